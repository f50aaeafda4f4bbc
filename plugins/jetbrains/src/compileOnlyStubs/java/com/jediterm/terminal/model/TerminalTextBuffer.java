// COMPILE-ONLY STUB (never shipped): a signature-only copy of JediTerm's TerminalTextBuffer (the classic terminal's screen), only what the plugin calls; the real class ships with the IDE.
package com.jediterm.terminal.model;

public class TerminalTextBuffer {
    public String getScreenLines() {
        throw new UnsupportedOperationException("stub");
    }
}
