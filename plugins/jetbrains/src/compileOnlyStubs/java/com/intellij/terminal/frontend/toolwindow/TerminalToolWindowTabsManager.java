// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's tab service (2025.3+ Terminal API), only what the plugin calls; the real interface ships with the IDE.
package com.intellij.terminal.frontend.toolwindow;

public interface TerminalToolWindowTabsManager {
    static TerminalToolWindowTabsManager getInstance(com.intellij.openapi.project.Project project) {
        throw new UnsupportedOperationException("stub");
    }

    java.util.List<TerminalToolWindowTab> getTabs();
}
