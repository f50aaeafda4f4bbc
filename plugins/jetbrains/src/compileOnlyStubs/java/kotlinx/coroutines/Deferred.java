// COMPILE-ONLY STUB (never shipped): a signature-only copy of kotlinx.coroutines' Deferred, only what the plugin calls; the real interface ships with the IDE.
package kotlinx.coroutines;

public interface Deferred<T> {
    boolean isCompleted();

    T getCompleted();
}
