// COMPILE-ONLY STUB (never shipped): a signature-only copy of the classic terminal's JediTerm widget, only what the plugin calls; the real class ships with the IDE.
package com.intellij.terminal;

public class JBTerminalWidget {
    public static JBTerminalWidget asJediTermWidget(com.intellij.terminal.ui.TerminalWidget widget) {
        throw new UnsupportedOperationException("stub");
    }

    public com.jediterm.terminal.model.TerminalTextBuffer getTerminalTextBuffer() {
        throw new UnsupportedOperationException("stub");
    }
}
