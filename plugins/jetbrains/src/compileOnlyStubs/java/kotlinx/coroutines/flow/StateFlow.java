// COMPILE-ONLY STUB (never shipped): a signature-only copy of kotlinx.coroutines' StateFlow, only what the plugin calls; the real interface ships with the IDE.
package kotlinx.coroutines.flow;

public interface StateFlow<T> {
    T getValue();
}
