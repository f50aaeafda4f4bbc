// The project window's terminals for the daemon: lists them (id, name, shell pid or environment tag) and carries out `terminal.io` orders — read the screen, write bytes as they are — through whichever terminal API the IDE has.
package dev.koru.jetbrains.client;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;

/** Pure: the IDE glue supplies the terminals ({@link Port}s), this answers the daemon. */
public final class TerminalBridge {
    /** The environment variable the plugin puts into each terminal's shell environment, naming the terminal. */
    public static final String TERMINAL_TAG = "KORU_TERMINAL_ID";

    /** One terminal as the IDE's API gives it (the classic terminal's widget, or the reworked terminal's view). */
    public interface Port {
        /** The plugin's id for it: unique in the window, stable for the terminal's life. */
        String id();

        /** Its name as the IDE shows it. */
        String name();

        /** Its shell's pid, or {@code null} where the API does not give one (the reworked terminal). */
        Long shellPid();

        /** The {@link #TERMINAL_TAG} value its shell was started with, or {@code null}. */
        String envTag();

        /** The visible screen, one line per row, or {@code null} when the API cannot give it now. */
        String screen();

        /** Writes {@code data} to the terminal's input as it is (no newline added, none rewritten where the API allows). */
        void write(String data) throws IOException;
    }

    private final Supplier<List<Port>> terminals;

    public TerminalBridge(Supplier<List<Port>> terminals) {
        this.terminals = Objects.requireNonNull(terminals);
    }

    /** The {@code terminals} report: every terminal the IDE has now that names a shell (by pid or tag). */
    public List<Messages.IdeTerminal> list() {
        List<Messages.IdeTerminal> list = new ArrayList<>();
        for (Port port : terminals.get()) {
            Messages.IdeTerminal terminal = new Messages.IdeTerminal(port.id(), port.name(), port.shellPid());
            terminal.envTag = port.envTag();
            list.add(terminal);
        }
        return list;
    }

    /** Carries out one order; never throws. */
    public Messages.TerminalIoResult handle(Messages.TerminalIo order) {
        Port port = null;
        for (Port candidate : terminals.get()) {
            if (candidate.id().equals(order.terminalId)) port = candidate;
        }
        if (port == null) return new Messages.TerminalIoResult(order.orderId, null, "no terminal " + order.terminalId + " in this window (it was closed)");
        String kind = order.action == null ? null : order.action.kind;
        try {
            if ("write".equals(kind)) {
                if (order.action.data == null) return new Messages.TerminalIoResult(order.orderId, null, "a write without data");
                port.write(order.action.data);
                return new Messages.TerminalIoResult(order.orderId, null, null);
            }
            if ("read".equals(kind)) {
                String screen = port.screen();
                if (screen == null) return new Messages.TerminalIoResult(order.orderId, null, "the IDE does not give this terminal's screen now");
                return new Messages.TerminalIoResult(order.orderId, screen, null);
            }
            return new Messages.TerminalIoResult(order.orderId, null, "this plugin does not know terminal action " + kind);
        } catch (IOException | RuntimeException e) {
            return new Messages.TerminalIoResult(order.orderId, null, "the terminal refused: " + e.getMessage());
        }
    }
}
