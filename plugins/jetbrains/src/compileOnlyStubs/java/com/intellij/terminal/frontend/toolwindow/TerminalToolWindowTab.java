// COMPILE-ONLY STUB (never shipped): a signature-only copy of a reworked terminal tab in the Terminal tool window; the real interface ships with the IDE.
package com.intellij.terminal.frontend.toolwindow;

public interface TerminalToolWindowTab {
    com.intellij.terminal.frontend.view.TerminalView getView();
}
