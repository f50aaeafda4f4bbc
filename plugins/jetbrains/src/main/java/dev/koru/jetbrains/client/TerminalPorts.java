// The two JetBrains terminal APIs as the terminal bridge uses them — the classic terminal (a JediTerm widget and its tty connector) and the reworked terminal of 2025.2+ (a TerminalView with its send-text builder and output model) — and a Port over each.
package dev.koru.jetbrains.client;

import java.io.IOException;
import java.util.Map;

/** Pure: the IDE glue implements {@link Classic} and {@link Reworked} over the real classes. */
public final class TerminalPorts {
    private TerminalPorts() {}

    /** What the plugin uses of a classic terminal tab ({@code TerminalWidget} / {@code JBTerminalWidget}). */
    public interface Classic {
        String title();

        /** {@code ProcessTtyConnector.getProcess().pid()}, or {@code null} before the shell started. */
        Long processPid();

        /** {@code TtyConnector.write(String)}: the bytes go to the pty as they are. */
        void ttyWrite(String data) throws IOException;

        /** The screen lines of the terminal's text buffer ({@code TerminalTextBuffer.getScreenLines()}), or {@code null}. */
        String screenLines();
    }

    /** What the plugin uses of a reworked terminal tab ({@code TerminalToolWindowTab} and its {@code TerminalView}). */
    public interface Reworked {
        String title();

        /** {@code startupOptionsDeferred}'s {@code envVariables} once the shell started, else {@code null}. */
        Map<String, String> startupEnvironment();

        /** {@code createSendTextBuilder().send(text)} (no bracketed paste, no execute): the terminal turns each line break into CR. */
        void sendText(String text);

        /**
         * The screen of the active output model ({@code outputModels.active}: the regular buffer, or the alternate one of a
         * full-screen program), from its {@code screenTopOffset} to its end, or {@code null} when not known.
         */
        String screenText();
    }

    /** A classic terminal: a pid from its process, bytes written exactly, the screen from its text buffer. */
    public static TerminalBridge.Port classic(String id, Classic terminal) {
        return new TerminalBridge.Port() {
            @Override public String id() { return id; }
            @Override public String name() { return terminal.title(); }
            @Override public Long shellPid() { return terminal.processPid(); }
            @Override public String envTag() { return null; }
            @Override public String screen() { return trimRows(terminal.screenLines()); }
            @Override public void write(String data) throws IOException { terminal.ttyWrite(data); }
        };
    }

    /**
     * A reworked terminal: no pid in its API, so the shell is named by the {@link TerminalBridge#TERMINAL_TAG}
     * the plugin's customizer put into its environment; the screen is its output model's screen part.
     */
    public static TerminalBridge.Port reworked(String id, Reworked terminal) {
        return new TerminalBridge.Port() {
            @Override public String id() { return id; }
            @Override public String name() { return terminal.title(); }
            @Override public Long shellPid() { return null; }

            @Override
            public String envTag() {
                Map<String, String> env = terminal.startupEnvironment();
                return env == null ? null : env.get(TerminalBridge.TERMINAL_TAG);
            }

            @Override
            public String screen() {
                return trimRows(terminal.screenText());
            }

            @Override
            public void write(String data) {
                terminal.sendText(data);
            }
        };
    }

    /** Each row without its trailing blanks. */
    static String trimRows(String screen) {
        if (screen == null) return null;
        StringBuilder out = new StringBuilder();
        String[] rows = screen.split("\n", -1);
        for (int i = 0; i < rows.length; i++) {
            if (i > 0) out.append('\n');
            out.append(rows[i].replaceAll("[ \u0000]+$", ""));
        }
        return out.toString();
    }
}
