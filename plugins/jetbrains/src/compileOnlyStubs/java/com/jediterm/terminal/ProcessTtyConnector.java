// COMPILE-ONLY STUB (never shipped): a signature-only copy of JediTerm's ProcessTtyConnector (a tty connector over a process), only what the plugin calls; the real class ships with the IDE.
package com.jediterm.terminal;

public abstract class ProcessTtyConnector implements TtyConnector {
    public Process getProcess() {
        throw new UnsupportedOperationException("stub");
    }
}
