// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's pair of output models (regular and alternate buffer); the real interface ships with the IDE.
package org.jetbrains.plugins.terminal.view;

public interface TerminalOutputModelsSet {
    kotlinx.coroutines.flow.StateFlow<TerminalOutputModel> getActive();
}
