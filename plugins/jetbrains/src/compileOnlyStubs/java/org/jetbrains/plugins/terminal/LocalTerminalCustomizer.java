// COMPILE-ONLY STUB (never shipped): a signature-only copy of the terminal plugin's extension that adjusts a local shell's command and environment before it starts; the real class ships with the IDE.
package org.jetbrains.plugins.terminal;

public abstract class LocalTerminalCustomizer {
    public String[] customizeCommandAndEnvironment(com.intellij.openapi.project.Project project, String workingDirectory,
                                                   String[] command, java.util.Map<String, String> envs) {
        return command;
    }
}
