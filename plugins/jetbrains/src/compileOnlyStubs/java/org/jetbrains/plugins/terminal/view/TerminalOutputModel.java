// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's output model (screen and history), only what the plugin calls; the real interface ships with the IDE.
package org.jetbrains.plugins.terminal.view;

public interface TerminalOutputModel {
    TerminalOffset getScreenTopOffset();

    TerminalOffset getEndOffset();

    CharSequence getText(TerminalOffset start, TerminalOffset end);
}
