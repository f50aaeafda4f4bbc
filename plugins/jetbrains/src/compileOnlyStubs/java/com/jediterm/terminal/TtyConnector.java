// COMPILE-ONLY STUB (never shipped): a signature-only copy of JediTerm's TtyConnector (the classic terminal's pty), only what the plugin calls; the real class ships with the IDE.
package com.jediterm.terminal;

public interface TtyConnector {
    void write(String string) throws java.io.IOException;
}
