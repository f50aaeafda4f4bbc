// Protocol-client tests against a scripted fake daemon on a real Unix socket: hello (with an id) and welcome (answering it), ping/pong, a drive acked stage by stage (submitted with evidence command_returned), refusal (also of a welcome that answers another hello), immediate reconnect on `bye reconnect_requested`, backoff otherwise, no re-run after a disconnect, bye on stop.
package dev.koru.jetbrains.client;

import com.google.gson.JsonObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ClientTest {
    @TempDir
    Path dir;
    FakeDaemon daemon;
    DaemonClient client;
    final List<String> states = new CopyOnWriteArrayList<>();
    final AtomicInteger drivesStarted = new AtomicInteger();
    volatile CountDownLatch driveGate = new CountDownLatch(0);

    @BeforeEach
    void setUp() throws Exception {
        daemon = new FakeDaemon(dir);
    }

    @AfterEach
    void tearDown() throws Exception {
        if (client != null) client.dispose("test over");
        daemon.close();
    }

    DaemonClient start(Backoff backoff) {
        DaemonClient.Options options = new DaemonClient.Options();
        options.locate = () -> new SocketDiscovery.Location(daemon.socket, "test");
        options.hello = () -> {
            HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
            facts.productCode = "IU";
            facts.workspaceFolders = List.of(dir.toString());
            facts.availableToolWindows = List.of("AIAssistant");
            return HelloBuilder.build(facts);
        };
        options.runDrive = (drive, ack, cancelled) -> {
            drivesStarted.incrementAndGet();
            StepExecutor.execute(drive.steps, drive.prompt, new ExecutorTest.FakeHost(), Catalog.COMMANDS.stream()
                    .collect(java.util.stream.Collectors.toSet()), stage -> {
                        ack.accept(stage);
                        if ("focused".equals(stage.stage)) {
                            try {
                                driveGate.await(5, TimeUnit.SECONDS);
                            } catch (InterruptedException e) {
                                Thread.currentThread().interrupt();
                            }
                        }
                    }, drive.options.submit, cancelled);
        };
        options.onState = state -> states.add(state.kind);
        options.backoff = backoff;
        options.random = () -> 0.5;
        options.name = "koru-test";
        client = new DaemonClient(options);
        client.start();
        return client;
    }

    static String drive(String id) {
        return "{\"v\":1,\"type\":\"drive\",\"drive_id\":\"" + id + "\",\"prompt\":\"Hi ✓\",\"options\":{\"submit\":true,\"new_chat\":false,"
                + "\"busy\":\"queue\"},\"route\":\"plugin_drive\",\"steps\":["
                + "{\"command\":\"koru.activateToolWindow\",\"args\":[\"AIAssistant\"],\"proves\":\"focused\"},"
                + "{\"command\":\"koru.paste\",\"args\":[\"$prompt\"],\"proves\":\"pasted\"},"
                + "{\"command\":\"koru.submit\",\"args\":[\"AIAssistant\"],\"proves\":\"submitted\"}]}";
    }

    static void waitFor(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        long until = System.currentTimeMillis() + 5000;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > until) throw new AssertionError("timed out waiting for " + what);
            Thread.sleep(10);
        }
    }

    @Test
    void helloWelcomePingAndADriveAckedStageByStage() throws Exception {
        start(Backoff.DEFAULT);
        FakeDaemon.Peer peer = daemon.accept(5000);
        JsonObject hello = peer.welcome();
        assertEquals("jetbrains-idea", hello.getAsJsonObject("ide").get("product").getAsString());
        assertEquals("plugin", hello.get("role").getAsString());
        assertTrue(hello.has("id") && hello.get("id").getAsJsonPrimitive().isString(), "the hello carries an id: " + hello);
        waitFor(() -> "s_1".equals(client.sessionId()), "connected");
        peer.send("{\"v\":1,\"type\":\"ping\",\"id\":7}");
        JsonObject pong = peer.next();
        assertEquals("pong", pong.get("type").getAsString());
        assertEquals(7, pong.get("id").getAsInt());
        peer.send(drive("d_1"));
        List<String> stages = new ArrayList<>();
        JsonObject lastAck = null;
        for (int i = 0; i < 4; i++) {
            JsonObject ack = peer.next();
            lastAck = ack;
            assertEquals("ack", ack.get("type").getAsString());
            assertEquals("d_1", ack.get("drive_id").getAsString());
            stages.add(ack.get("stage").getAsString());
        }
        assertEquals(List.of("received", "focused", "pasted", "submitted"), stages);
        assertEquals("command_returned", lastAck.get("evidence").getAsString(), "the Enter key press proves only that it was posted");
        assertTrue(client.sendEvent(Messages.PluginEventKind.focus(false)));
        JsonObject event = peer.next();
        assertEquals("focus", event.getAsJsonObject("event").get("kind").getAsString());
        assertEquals(false, event.getAsJsonObject("event").get("focused").getAsBoolean());
    }

    @Test
    void aWelcomeForAnotherHelloIsRefusedAndOneWithoutIdIsAccepted() throws Exception {
        start(new Backoff(50, 50));
        FakeDaemon.Peer first = daemon.accept(5000);
        JsonObject hello = first.next();
        first.welcomeWithId(new com.google.gson.JsonPrimitive("someone-else"));
        waitFor(() -> states.contains("refused"), "refused state");
        assertTrue(client.state().reason.startsWith("unexpected_welcome"), client.state().reason);
        assertTrue(client.state().reason.contains(hello.get("id").toString()), client.state().reason);
        assertEquals(null, client.sessionId(), "not connected on a welcome that answers another hello");
        // A daemon from before welcomes carried the hello's id still speaks protocol v1.
        FakeDaemon.Peer second = daemon.accept(5000);
        JsonObject secondHello = second.next();
        assertTrue(!secondHello.get("id").equals(hello.get("id")), "each connection's hello has its own id");
        second.welcomeWithId(null);
        waitFor(() -> client.sessionId() != null, "connected to a daemon whose welcome has no id");
        assertEquals(null, DaemonClient.welcomeIdMismatch(new com.google.gson.JsonPrimitive(3), new com.google.gson.JsonPrimitive(3)));
    }

    @Test
    void aRefusalIsReportedAndRetriedWithBackoff() throws Exception {
        start(new Backoff(200, 1000));
        FakeDaemon.Peer first = daemon.accept(5000);
        first.next();
        first.send("{\"v\":1,\"type\":\"error\",\"code\":\"version_mismatch\",\"message\":\"no common version\",\"supported\":{\"min\":2,\"max\":3}}");
        first.close();
        long closedAt = System.currentTimeMillis();
        waitFor(() -> states.contains("refused"), "refused state");
        assertTrue(client.state().reason.contains("version_mismatch"), client.state().reason);
        FakeDaemon.Peer second = daemon.accept(5000);
        long waited = System.currentTimeMillis() - closedAt;
        assertTrue(waited >= 100, "the retry waited for the backoff (150 ms with random 0.5): " + waited);
        second.welcome();
        waitFor(() -> client.sessionId() != null, "connected after the refusal");
    }

    @Test
    void byeReconnectRequestedReconnectsAtOnceAndOtherByesBackOff() throws Exception {
        start(new Backoff(3000, 3000));
        FakeDaemon.Peer first = daemon.accept(5000);
        first.welcome();
        waitFor(() -> client.sessionId() != null, "connected");
        first.send("{\"v\":1,\"type\":\"bye\",\"reason\":\"reconnect_requested\"}");
        first.close();
        long t0 = System.currentTimeMillis();
        FakeDaemon.Peer second = daemon.accept(1000);
        assertTrue(System.currentTimeMillis() - t0 < 1000, "reconnected without the 1.5–3 s backoff");
        second.welcome();
        waitFor(() -> "s_2".equals(client.sessionId()), "a new session");
        second.send("{\"v\":1,\"type\":\"bye\",\"reason\":\"daemon shutting down\"}");
        second.close();
        long t1 = System.currentTimeMillis();
        FakeDaemon.Peer third = daemon.accept(5000);
        assertTrue(System.currentTimeMillis() - t1 >= 1200, "an ordinary bye keeps the backoff");
        third.welcome();
    }

    @Test
    void aDriveInterruptedByADisconnectIsNeverRerunNorAckedOnTheNextConnection() throws Exception {
        driveGate = new CountDownLatch(1);
        start(new Backoff(50, 50));
        FakeDaemon.Peer first = daemon.accept(5000);
        first.welcome();
        waitFor(() -> client.sessionId() != null, "connected");
        first.send(drive("d_9"));
        assertEquals("received", first.next().get("stage").getAsString());
        assertEquals("focused", first.next().get("stage").getAsString());
        first.close();
        FakeDaemon.Peer second = daemon.accept(5000);
        second.welcome();
        waitFor(() -> "s_2".equals(client.sessionId()), "reconnected");
        driveGate.countDown();
        second.send("{\"v\":1,\"type\":\"ping\",\"id\":\"after\"}");
        JsonObject next = second.next();
        assertEquals("pong", next.get("type").getAsString(), "no ack of the old drive reaches the new connection: " + next);
        assertEquals(1, drivesStarted.get(), "the drive ran once");
    }

    @Test
    void aCancelledDriveStopsBeforeItsNextStep() throws Exception {
        driveGate = new CountDownLatch(1);
        start(Backoff.DEFAULT);
        FakeDaemon.Peer peer = daemon.accept(5000);
        peer.welcome();
        waitFor(() -> client.sessionId() != null, "connected");
        peer.send(drive("d_c"));
        assertEquals("received", peer.next().get("stage").getAsString());
        assertEquals("focused", peer.next().get("stage").getAsString());
        peer.send("{\"v\":1,\"type\":\"cancel\",\"drive_id\":\"d_c\",\"reason\":\"cancelled\"}");
        Thread.sleep(100);
        driveGate.countDown();
        peer.send("{\"v\":1,\"type\":\"ping\",\"id\":1}");
        assertEquals("pong", peer.next().get("type").getAsString());
    }

    @Test
    void stopSaysByeAndStopsReconnecting() throws Exception {
        start(new Backoff(50, 50));
        FakeDaemon.Peer peer = daemon.accept(5000);
        peer.welcome();
        waitFor(() -> client.sessionId() != null, "connected");
        client.stop("project closed").get(2, TimeUnit.SECONDS);
        JsonObject bye = peer.next();
        assertEquals("bye", bye.get("type").getAsString());
        assertEquals("project closed", bye.get("reason").getAsString());
        assertEquals(FakeDaemon.CLOSED, peer.next());
        Thread.sleep(300);
        assertEquals(null, daemon.peers.poll(), "no reconnect after stop");
        waitFor(() -> "stopped".equals(client.state().kind), "stopped state");
    }

    @Test
    void noDaemonMeansRetryingWithBackoffUntilOneAppears() throws Exception {
        daemon.close();
        start(new Backoff(50, 100));
        waitFor(() -> states.stream().filter("no_daemon"::equals).count() >= 3, "several retries");
        assertTrue(client.state().reason == null || client.state().reason.contains("no daemon") || client.state().kind.equals("connecting"));
        daemon = new FakeDaemon(dir);
        daemon.accept(5000).welcome();
        waitFor(() -> client.sessionId() != null, "connected once the daemon is there");
    }
}
