// COMPILE-ONLY STUB (never shipped): a signature-only copy of the reworked terminal's startup options, only what the plugin calls; the real interface ships with the IDE.
package org.jetbrains.plugins.terminal.session;

public interface TerminalStartupOptions {
    java.util.Map<String, String> getEnvVariables();
}
