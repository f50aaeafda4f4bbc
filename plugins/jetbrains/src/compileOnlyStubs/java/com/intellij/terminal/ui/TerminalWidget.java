// COMPILE-ONLY STUB (never shipped): a signature-only copy of the classic terminal's widget interface, only what the plugin calls; the real interface ships with the IDE.
package com.intellij.terminal.ui;

public interface TerminalWidget {
    com.intellij.terminal.TerminalTitle getTerminalTitle();

    com.jediterm.terminal.TtyConnector getTtyConnector();
}
