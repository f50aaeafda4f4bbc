// Puts KORU_TERMINAL_ID (a new id for each terminal) into the environment of every shell the IDE's terminal starts, so that the daemon can find the shell of a reworked terminal tab, whose API gives no pid; registered only where the terminal plugin is installed.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.project.Project;
import dev.koru.jetbrains.client.TerminalBridge;
import org.jetbrains.plugins.terminal.LocalTerminalCustomizer;

import java.util.Map;
import java.util.UUID;

public final class KoruTerminalCustomizer extends LocalTerminalCustomizer {
    @Override
    public String[] customizeCommandAndEnvironment(Project project, String workingDirectory, String[] command, Map<String, String> envs) {
        envs.put(TerminalBridge.TERMINAL_TAG, UUID.randomUUID().toString());
        return command;
    }
}
