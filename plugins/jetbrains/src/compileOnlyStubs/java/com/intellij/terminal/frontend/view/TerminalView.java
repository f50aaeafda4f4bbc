// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's view (2025.3+ Terminal API), only what the plugin calls; the real interface ships with the IDE.
package com.intellij.terminal.frontend.view;

public interface TerminalView {
    com.intellij.terminal.TerminalTitle getTitle();

    org.jetbrains.plugins.terminal.view.TerminalOutputModelsSet getOutputModels();

    kotlinx.coroutines.Deferred<org.jetbrains.plugins.terminal.session.TerminalStartupOptions> getStartupOptionsDeferred();

    org.jetbrains.plugins.terminal.view.TerminalSendTextBuilder createSendTextBuilder();
}
