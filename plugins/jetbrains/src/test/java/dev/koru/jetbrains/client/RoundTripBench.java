// Bench (a plain main, Markdown on stdout): drive round trips through the real daemon to this protocol client and, in the same run, to `koru dev fake-plugin`, p50/p99 over ≥ 1,000 drives each; run with `bash plugins/jetbrains/build.sh bench [DRIVES]`.
package dev.koru.jetbrains.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Set;

/**
 * A controller (raw socket, this codec) subscribes to events and, in turns of 100, creates
 * drives for one session with a 200-character prompt and waits for the `drive_updated`
 * event whose state is terminal. Two plugins are connected to the same daemon:
 * the Java protocol client as IntelliJ IDEA (route jetbrains_plugin_drive: 4 steps, 5 acks,
 * a no-op host) and the fake plugin as the same product (same route, same acks).
 */
public final class RoundTripBench {
    private RoundTripBench() {}

    /** A blocking NDJSON controller connection. */
    static final class Controller implements AutoCloseable {
        final SocketChannel channel;
        final LineSplitter splitter = new LineSplitter();
        final Deque<JsonObject> pending = new ArrayDeque<>();
        final ByteBuffer buffer = ByteBuffer.allocate(256 * 1024);
        int nextId = 1;

        Controller(Path socket) throws IOException {
            channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.connect(UnixDomainSocketAddress.of(socket));
            send("{\"v\":1,\"type\":\"hello\",\"role\":\"controller\",\"protocol\":{\"min\":1,\"max\":1},"
                    + "\"client\":{\"name\":\"jetbrains-bench\",\"version\":\"1\"}}");
            expect("welcome");
            send("{\"v\":1,\"id\":0,\"type\":\"events.subscribe\"}");
            expect("events.subscribed");
        }

        void send(String json) throws IOException {
            ByteBuffer bytes = ByteBuffer.wrap((json + "\n").getBytes(StandardCharsets.UTF_8));
            while (bytes.hasRemaining()) channel.write(bytes);
        }

        JsonObject next() throws IOException {
            while (pending.isEmpty()) {
                buffer.clear();
                int n = channel.read(buffer);
                if (n < 0) throw new IOException("the daemon closed the controller connection");
                try {
                    for (byte[] line : splitter.push(buffer.array(), 0, n)) {
                        pending.add(JsonParser.parseString(new String(line, StandardCharsets.UTF_8)).getAsJsonObject());
                    }
                } catch (LineSplitter.LineTooLongException e) {
                    throw new IOException(e);
                }
            }
            return pending.poll();
        }

        JsonObject expect(String type) throws IOException {
            for (;;) {
                JsonObject line = next();
                if (type.equals(line.get("type").getAsString())) return line;
            }
        }

        /** One drive to {@code session}; returns nanoseconds until its terminal `drive_updated`, or throws when it did not end `done`. */
        long drive(String session, String prompt) throws IOException {
            int id = nextId++;
            long start = System.nanoTime();
            send("{\"v\":1,\"id\":" + id + ",\"type\":\"drive.create\",\"target\":{\"session\":\"" + session + "\"},\"prompt\":"
                    + new com.google.gson.JsonPrimitive(prompt) + "}");
            String driveId = null;
            for (;;) {
                JsonObject line = next();
                String type = line.get("type").getAsString();
                if (type.equals("drive.result") && line.has("id") && line.get("id").getAsInt() == id) {
                    driveId = line.getAsJsonObject("drive").get("drive_id").getAsString();
                } else if (type.equals("error") && line.has("ref") && line.get("ref").getAsInt() == id) {
                    throw new IOException("drive.create refused: " + line);
                } else if (type.equals("stream") && driveId != null) {
                    JsonObject event = line.getAsJsonObject("event");
                    if (!"drive_updated".equals(event.get("kind").getAsString())) continue;
                    JsonObject drive = event.getAsJsonObject("drive");
                    if (!driveId.equals(drive.get("drive_id").getAsString())) continue;
                    String state = drive.get("state").getAsString();
                    if (Set.of("done", "failed", "cancelled", "timed_out").contains(state)) {
                        long took = System.nanoTime() - start;
                        if (!state.equals("done")) throw new IOException("drive ended " + state + ": " + drive);
                        return took;
                    }
                }
            }
        }

        @Override
        public void close() throws IOException {
            channel.close();
        }
    }

    static String sessionOf(KoruDaemon daemon, String clientName, String workspace) throws Exception {
        long until = System.currentTimeMillis() + 10_000;
        while (System.currentTimeMillis() < until) {
            KoruDaemon.Result result = daemon.run("sessions", "--json");
            JsonElement parsed = JsonParser.parseString(result.stdout);
            for (JsonElement s : parsed.getAsJsonArray()) {
                JsonObject session = s.getAsJsonObject();
                if (session.getAsJsonObject("client").get("name").getAsString().equals(clientName)
                        && session.getAsJsonObject("window").getAsJsonArray("workspace_folders").toString().contains(workspace)) {
                    return session.get("session_id").getAsString();
                }
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException("no session of " + clientName + " for " + workspace);
    }

    static double percentile(long[] sorted, double p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))] / 1000.0;
    }

    static String row(String what, List<Long> samples) {
        long[] sorted = samples.stream().mapToLong(Long::longValue).toArray();
        Arrays.sort(sorted);
        double mean = Arrays.stream(sorted).average().orElse(0) / 1000.0;
        return String.format("| %s | %d | %.1f µs | %.1f µs | %.1f µs |", what, sorted.length,
                percentile(sorted, 50), percentile(sorted, 99), mean);
    }

    public static void main(String[] args) throws Exception {
        int drives = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int turn = 100;
        int warmup = Math.min(200, drives / 5);
        Path dir = Files.createTempDirectory("koru-jb-bench");
        Path binary = TestPaths.koruBinary();
        String prompt = "Refactor the parser so that it keeps every comment — ünïcödé, 漢字, 🚀 — and explain each change. "
                .repeat(3).substring(0, 200);
        try (KoruDaemon daemon = new KoruDaemon(binary, dir).start("--heartbeat-ms", "60000")) {
            Path javaWorkspace = Files.createDirectories(dir.resolve("java-plugin"));
            Path fakeWorkspace = Files.createDirectories(dir.resolve("fake-plugin"));
            DaemonClient client = RealDaemonTest.client(daemon.socket, javaWorkspace, java.util.Collections.synchronizedList(new ArrayList<>()));
            Process fake = daemon.spawn("dev", "fake-plugin", "--socket", daemon.socket.toString(), "--product", "jetbrains-idea",
                    "--workspace", fakeWorkspace.toString(), "--behaviour", "ack");
            try (Controller controller = new Controller(daemon.socket)) {
                String javaSession = sessionOf(daemon, Protocol.CLIENT_NAME, javaWorkspace.toString());
                String fakeSession = sessionOf(daemon, "koru-fake-plugin", fakeWorkspace.toString());
                for (int i = 0; i < warmup; i++) {
                    controller.drive(javaSession, prompt);
                    controller.drive(fakeSession, prompt);
                }
                List<Long> java = new ArrayList<>();
                List<Long> fakeTimes = new ArrayList<>();
                long started = System.nanoTime();
                while (java.size() < drives) {
                    for (int i = 0; i < turn && java.size() < drives; i++) java.add(controller.drive(javaSession, prompt));
                    for (int i = 0; i < turn && fakeTimes.size() < drives; i++) fakeTimes.add(controller.drive(fakeSession, prompt));
                }
                double seconds = (System.nanoTime() - started) / 1e9;
                System.out.println("### JetBrains protocol client vs fake plugin: drive round trip through `koru daemon`");
                System.out.println();
                System.out.printf("%d drives each after %d warm-up drives each, in alternating turns of %d; 200-character prompt; "
                        + "route `jetbrains_plugin_drive` (4 steps, acks received, focused ×2, pasted, submitted) for both; "
                        + "%.1f s in all; koru binary %s.%n%n", drives, warmup, turn, seconds, binary);
                System.out.println("| plugin | drives | p50 | p99 | mean |");
                System.out.println("|---|---:|---:|---:|---:|");
                System.out.println(row("Java protocol client (`DaemonClient`, no-op host)", java));
                System.out.println(row("`koru dev fake-plugin --product jetbrains-idea`", fakeTimes));
            } finally {
                client.dispose("bench over");
                fake.destroy();
                fake.waitFor();
            }
        }
    }
}
