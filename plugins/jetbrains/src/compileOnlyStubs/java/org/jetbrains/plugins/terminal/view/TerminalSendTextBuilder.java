// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's send-text builder, only what the plugin calls; the real interface ships with the IDE.
package org.jetbrains.plugins.terminal.view;

public interface TerminalSendTextBuilder {
    void send(String text);
}
