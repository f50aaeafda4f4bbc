// COMPILE-ONLY STUB (never shipped): a signature-only copy of the terminal plugin's tool window service (classic terminal tabs), only what the plugin calls; the real class ships with the IDE.
package org.jetbrains.plugins.terminal;

public final class TerminalToolWindowManager {
    public static TerminalToolWindowManager getInstance(com.intellij.openapi.project.Project project) {
        throw new UnsupportedOperationException("stub");
    }

    public java.util.Set<com.intellij.terminal.ui.TerminalWidget> getTerminalWidgets() {
        throw new UnsupportedOperationException("stub");
    }
}
