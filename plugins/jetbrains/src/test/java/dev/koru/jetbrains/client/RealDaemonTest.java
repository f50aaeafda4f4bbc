// Against the real daemon: the protocol client (without the IDE glue) connects to `koru daemon` on a temp socket, appears in `koru sessions` as a JetBrains product, receives a drive from `koru send` and acks every stage (the daemon records submit evidence command_returned), and reconnects after a daemon restart.
package dev.koru.jetbrains.client;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class RealDaemonTest {
    @TempDir
    Path dir;
    KoruDaemon daemon;
    DaemonClient client;
    Path workspace;
    final List<String> hostCalls = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() throws Exception {
        daemon = new KoruDaemon(TestPaths.koruBinary(), dir).start("--heartbeat-ms", "500");
        workspace = Files.createDirectories(dir.resolve("project"));
    }

    @AfterEach
    void tearDown() throws Exception {
        if (client != null) client.dispose("test over");
        daemon.close();
    }

    /** A client whose IDE is IntelliJ IDEA with AI Assistant's tool window, and whose host records the steps. */
    static DaemonClient client(Path socket, Path workspace, List<String> calls) {
        DaemonClient.Options options = new DaemonClient.Options();
        options.locate = () -> new SocketDiscovery.Location(socket, "test");
        options.hello = () -> {
            HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
            facts.pluginVersion = "test";
            facts.productCode = "IU";
            facts.appName = "IntelliJ IDEA";
            facts.ideVersion = "2024.3";
            facts.workspaceFolders = List.of(workspace.toString());
            facts.availableToolWindows = List.of("AIAssistant");
            return HelloBuilder.build(facts);
        };
        StepExecutor.Host host = new StepExecutor.Host() {
            String clipboard = "";

            public void executeCommand(String command, List<JsonElement> args) {
                calls.add(command);
            }

            public String readClipboard() {
                return clipboard;
            }

            public void writeClipboard(String text) {
                clipboard = text;
            }
        };
        Set<String> allowed = Set.copyOf(Catalog.COMMANDS);
        options.runDrive = (drive, ack, cancelled) ->
                StepExecutor.execute(drive.steps, drive.prompt, host, allowed, ack, drive.options.submit, cancelled);
        options.backoff = new Backoff(50, 500);
        options.name = "koru-real";
        DaemonClient client = new DaemonClient(options);
        client.start();
        return client;
    }

    JsonArray sessions() throws Exception {
        KoruDaemon.Result result = daemon.run("sessions", "--json");
        assertEquals(0, result.code, result.toString());
        JsonElement parsed = JsonParser.parseString(result.stdout);
        return parsed.isJsonArray() ? parsed.getAsJsonArray() : parsed.getAsJsonObject().getAsJsonArray("sessions");
    }

    JsonObject ourSession() throws Exception {
        for (JsonElement s : sessions()) {
            JsonObject session = s.getAsJsonObject();
            if ("koru-jetbrains".equals(session.getAsJsonObject("client").get("name").getAsString())) return session;
        }
        return null;
    }

    void waitConnected(String notSession) throws Exception {
        long until = System.currentTimeMillis() + 10_000;
        while (client.sessionId() == null || client.sessionId().equals(notSession)) {
            if (System.currentTimeMillis() > until) {
                throw new AssertionError("the client did not connect: " + client.state() + "\n" + daemon.log());
            }
            Thread.sleep(20);
        }
    }

    @Test
    void theClientAppearsAsAJetBrainsSessionTakesADriveAndReconnectsAfterARestart() throws Exception {
        client = client(daemon.socket, workspace, hostCalls);
        waitConnected(null);
        JsonObject session = ourSession();
        assertTrue(session != null, "koru sessions lists the plugin: " + sessions());
        assertEquals("jetbrains-idea", session.getAsJsonObject("ide").get("product").getAsString());
        assertEquals(client.sessionId(), session.get("session_id").getAsString());
        assertTrue(session.getAsJsonArray("capabilities").toString().contains("AIAssistant"), session.toString());

        KoruDaemon.Result sent = daemon.run("send", "--workspace", workspace.toString(), "--wait", "--json", "Explain this code ✓");
        assertEquals(0, sent.code, sent.toString());
        String text = sent.stdout;
        assertTrue(text.contains("\"done\""), "the drive is done: " + text);
        for (String stage : new String[] {"received", "focused", "pasted", "submitted"}) {
            assertTrue(text.contains("\"" + stage + "\""), "history has " + stage + ": " + text);
        }
        assertTrue(text.contains("jetbrains_plugin_drive"), "the AI Assistant route ran: " + text);
        JsonObject drive = JsonParser.parseString(text).getAsJsonObject();
        assertEquals("command_returned", drive.get("submit_evidence").getAsString(),
                "the daemon records that only the Enter key press returned: " + text);
        assertEquals(List.of("koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit"), new ArrayList<>(hostCalls));

        String before = client.sessionId();
        daemon.stop();
        daemon.start("--heartbeat-ms", "500");
        waitConnected(before);
        JsonObject again = ourSession();
        assertTrue(again != null, "the plugin is back after the restart");
        assertNotEquals(before, again.get("session_id").getAsString());
    }

    @Test
    void aDriveThatMustNotSubmitStopsAfterPasting() throws Exception {
        client = client(daemon.socket, workspace, hostCalls);
        waitConnected(null);
        KoruDaemon.Result sent = daemon.run("send", "--ide", "jetbrains-idea", "--no-submit", "--wait", "--json", "leave it unsent");
        assertEquals(0, sent.code, sent.toString());
        assertTrue(sent.stdout.contains("\"done\""), sent.stdout);
        assertEquals(List.of("koru.activateToolWindow", "koru.focusInput", "koru.paste"), new ArrayList<>(hostCalls),
                "a drive that must not submit runs no submit step");
    }
}
