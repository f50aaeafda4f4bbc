// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's absolute output offset; the real interface ships with the IDE.
package org.jetbrains.plugins.terminal.view;

public interface TerminalOffset {
    long toAbsolute();
}
