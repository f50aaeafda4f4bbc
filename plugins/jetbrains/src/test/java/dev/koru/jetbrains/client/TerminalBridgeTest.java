// The terminal bridge against fakes of both JetBrains terminal APIs (named as such: no JetBrains IDE runs here) — the classic terminal (tty connector bytes as they are, a text buffer padded to its width) and the reworked terminal (its send path turning line breaks into CR, its output model with scrollback) — and, against the real daemon, an agent found by the environment tag of a reworked terminal's shell and typed into through this client.
package dev.koru.jetbrains.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TerminalBridgeTest {
    /** Fake of a classic terminal tab: JediTerm's tty connector writes what it is given; its text buffer pads each row to the width. */
    static final class FakeClassic implements TerminalPorts.Classic {
        final List<String> bytes = new CopyOnWriteArrayList<>();
        Long pid = 4321L;
        String[] rows = {"$ claude", "❯\u00a0Try \"hi\"", "", ""};
        boolean closed;

        @Override public String title() { return "Local"; }
        @Override public Long processPid() { return pid; }

        @Override
        public void ttyWrite(String data) throws IOException {
            if (closed) throw new IOException("the tty connector is closed");
            bytes.add(data);
        }

        @Override
        public String screenLines() {
            StringBuilder out = new StringBuilder();
            for (String row : rows) out.append(String.format("%-20s", row)).append('\n');
            return out.substring(0, out.length() - 1);
        }
    }

    /**
     * Fake of a reworked terminal tab: its send path turns CRLF and LF into CR (TerminalInput on Linux); its output model
     * keeps history above the screen, and only the text from the screen's top offset on is the screen.
     */
    static final class FakeReworked implements TerminalPorts.Reworked {
        final List<String> sent = new CopyOnWriteArrayList<>();
        Map<String, String> env;
        String output = "old line 1\nold line 2\n────   \n❯\u00a0\n────";
        /** Where the screen starts in {@link #output} (null: the model is not there yet). */
        Integer screenTop = "old line 1\nold line 2\n".length();

        @Override public String title() { return "Claude"; }
        @Override public Map<String, String> startupEnvironment() { return env; }
        @Override public void sendText(String text) { sent.add(text.replace("\r\n", "\n").replace('\n', '\r')); }
        @Override public String screenText() { return screenTop == null ? null : output.substring(screenTop); }
    }

    static Messages.TerminalIo order(String orderId, String terminalId, String kind, String data) {
        Messages.TerminalIo order = new Messages.TerminalIo();
        order.orderId = orderId;
        order.terminalId = terminalId;
        order.action = new Messages.TerminalAction();
        order.action.kind = kind;
        order.action.data = data;
        return order;
    }

    @Test
    void bothApisAreListedReadAndWrittenAsTheDaemonNeeds() {
        FakeClassic classic = new FakeClassic();
        FakeReworked reworked = new FakeReworked();
        List<TerminalBridge.Port> ports = new ArrayList<>(List.of(TerminalPorts.classic("c1", classic), TerminalPorts.reworked("r1", reworked)));
        TerminalBridge bridge = new TerminalBridge(() -> ports);

        // Before its shell started the reworked terminal names none: no pid, no tag yet.
        List<Messages.IdeTerminal> before = bridge.list();
        assertEquals(4321L, before.get(0).shellPid);
        assertNull(before.get(0).envTag);
        assertNull(before.get(1).shellPid);
        assertNull(before.get(1).envTag);
        reworked.env = Map.of("PATH", "/usr/bin", TerminalBridge.TERMINAL_TAG, "r1-tag");
        assertEquals("r1-tag", bridge.list().get(1).envTag);

        // Reads: the classic screen without its padding; the reworked one's screen part, without the history.
        assertEquals("$ claude\n❯\u00a0Try \"hi\"\n\n", bridge.handle(order("o1", "c1", "read", null)).screen);
        assertEquals("────\n❯\u00a0\n────", bridge.handle(order("o2", "r1", "read", null)).screen);

        // Writes: the classic tty gets the daemon's bytes exactly; the reworked terminal's own
        // send path turns the LF inside the paste into CR, which the agents read as a newline.
        String paste = "\u001b[200~line one\nline two ✓\u001b[201~";
        Messages.TerminalIoResult written = bridge.handle(order("o3", "c1", "write", paste));
        assertNull(written.error);
        assertEquals(List.of(paste), classic.bytes);
        bridge.handle(order("o4", "r1", "write", paste));
        bridge.handle(order("o5", "r1", "write", "\r"));
        assertEquals(List.of("\u001b[200~line one\rline two ✓\u001b[201~", "\r"), reworked.sent);
    }

    @Test
    void whatCannotBeDoneIsAnsweredWithWhy() {
        FakeClassic classic = new FakeClassic();
        FakeReworked reworked = new FakeReworked();
        reworked.screenTop = null; // its output model is not there yet
        List<TerminalBridge.Port> ports = List.of(TerminalPorts.classic("c1", classic), TerminalPorts.reworked("r1", reworked));
        TerminalBridge bridge = new TerminalBridge(() -> ports);
        assertTrue(bridge.handle(order("o1", "gone", "read", null)).error.contains("no terminal gone"));
        assertTrue(bridge.handle(order("o2", "r1", "read", null)).error.contains("does not give this terminal's screen"));
        assertTrue(bridge.handle(order("o3", "c1", "scroll", null)).error.contains("does not know terminal action scroll"));
        assertTrue(bridge.handle(order("o4", "c1", "write", null)).error.contains("without data"));
        classic.closed = true;
        Messages.TerminalIoResult refused = bridge.handle(order("o5", "c1", "write", "x"));
        assertTrue(refused.error.contains("the tty connector is closed"), refused.error);
        assertEquals("o5", refused.orderId);
        assertTrue(classic.bytes.isEmpty());
    }

    @Test
    void theHelloDeclaresTerminalIoOnlyWhereTheIdeHasItsTerminal() {
        HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
        assertTrue(HelloBuilder.capabilitiesFor(facts).stream().noneMatch(c -> c.kind.equals("terminal_io")));
        facts.terminalIo = true;
        assertTrue(HelloBuilder.capabilitiesFor(facts).stream().anyMatch(c -> c.kind.equals("terminal_io")));
    }

    @TempDir
    Path dir;

    @Test
    void againstTheRealDaemonAnAgentUnderATaggedShellIsFoundAndTypedIntoThroughThisClient() throws Exception {
        Path workspace = Files.createDirectories(dir.resolve("project"));
        // The "agent": a copy of sleep named claude (the Rust system tests run the real one),
        // under a shell started with the reworked terminal's tag in its environment.
        Path claude = Files.createDirectories(dir.resolve("bin")).resolve("claude");
        Files.copy(Path.of("/bin/sleep"), claude, StandardCopyOption.REPLACE_EXISTING);
        claude.toFile().setExecutable(true);
        String tag = "koru-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        ProcessBuilder shellBuilder = new ProcessBuilder("sh", "-c", "\"" + claude + "\" 60; true").directory(workspace.toFile());
        shellBuilder.environment().put(TerminalBridge.TERMINAL_TAG, tag);
        Process shell = shellBuilder.start();
        FakeReworked reworked = new FakeReworked();
        reworked.env = Map.of(TerminalBridge.TERMINAL_TAG, tag);
        reworked.output = "────────\n❯\u00a0Try \"fix lint errors\"\n────────";
        reworked.screenTop = 0;
        TerminalBridge bridge = new TerminalBridge(() -> List.of(TerminalPorts.reworked("term-1", reworked)));

        try (KoruDaemon daemon = new KoruDaemon(TestPaths.koruBinary(), dir.resolve("daemon")).start()) {
            DaemonClient.Options options = new DaemonClient.Options();
            options.locate = () -> new SocketDiscovery.Location(daemon.socket, "test");
            options.hello = () -> {
                HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
                facts.productCode = "IU";
                facts.appName = "IntelliJ IDEA";
                facts.ideVersion = "2025.3";
                facts.workspaceFolders = List.of(workspace.toString());
                facts.terminalIo = true;
                return HelloBuilder.build(facts);
            };
            options.runDrive = (drive, ack, cancelled) -> { };
            options.terminalIo = bridge::handle;
            options.backoff = new Backoff(50, 500);
            DaemonClient[] holder = new DaemonClient[1];
            options.onState = state -> {
                if ("connected".equals(state.kind) && holder[0] != null) holder[0].sendTerminals(bridge.list());
            };
            DaemonClient client = new DaemonClient(options);
            holder[0] = client;
            client.start();
            try {
                long until = System.currentTimeMillis() + 15_000;
                JsonObject agent = null;
                while (agent == null) {
                    if (client.sessionId() != null) client.sendTerminals(bridge.list());
                    KoruDaemon.Result listed = daemon.run("sessions", "--json");
                    JsonElement parsed = JsonParser.parseString(listed.stdout);
                    for (JsonElement entry : parsed.isJsonArray() ? parsed.getAsJsonArray() : parsed.getAsJsonObject().getAsJsonArray("sessions")) {
                        JsonObject session = entry.getAsJsonObject();
                        if (session.has("kind") && "terminal_agent".equals(session.get("kind").getAsString())) agent = session;
                    }
                    if (agent == null) {
                        if (System.currentTimeMillis() > until) throw new AssertionError("no agent listed: " + listed.stdout + "\n" + daemon.log());
                        Thread.sleep(200);
                    }
                }
                assertEquals("ide_terminal", agent.getAsJsonObject("terminal").get("kind").getAsString());
                assertEquals("term-1", agent.getAsJsonObject("terminal").get("terminal_id").getAsString());
                assertEquals(workspace.toString(), agent.get("workspace").getAsString());

                KoruDaemon.Result sent = daemon.run("send", "--wait", "--agent", "claude-code", "--workspace", workspace.toString(), "first line\nsecond ✓");
                // Koru's paste (the line break as the reworked terminal sends it) and the Enter,
                // once each; a sleeping stand-in records nothing, so the drive is not submitted.
                assertEquals(List.of("\u001b[200~first line\rsecond ✓\u001b[201~", "\r"), reworked.sent, sent.toString());
                assertTrue((sent.stdout + sent.stderr).contains("not_submitted"), sent.toString());
            } finally {
                client.dispose("test over");
            }
        } finally {
            shell.descendants().forEach(ProcessHandle::destroyForcibly);
            shell.destroyForcibly();
        }
    }
}
