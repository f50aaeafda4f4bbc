// COMPILE-ONLY STUB (never shipped): a signature-only copy of the terminal's tab title, only what the plugin calls; the real class ships with the IDE.
package com.intellij.terminal;

public class TerminalTitle {
    public String buildTitle() {
        throw new UnsupportedOperationException("stub");
    }
}
