// Test helper: a scripted stand-in for the daemon on a temp Unix socket, recording every line a client sends and sending whatever a test says.
package dev.koru.jetbrains.client;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

final class FakeDaemon implements AutoCloseable {
    /** One accepted connection. */
    final class Peer {
        final SocketChannel channel;
        final BlockingQueue<JsonObject> received = new LinkedBlockingQueue<>();

        Peer(SocketChannel channel) {
            this.channel = channel;
            Thread reader = new Thread(this::read, "fake-daemon-peer");
            reader.setDaemon(true);
            reader.start();
        }

        private void read() {
            LineSplitter splitter = new LineSplitter();
            ByteBuffer buffer = ByteBuffer.allocate(8192);
            try {
                while (true) {
                    buffer.clear();
                    int n = channel.read(buffer);
                    if (n < 0) break;
                    for (byte[] line : splitter.push(buffer.array(), 0, n)) {
                        received.add(JsonParser.parseString(new String(line, StandardCharsets.UTF_8)).getAsJsonObject());
                    }
                }
            } catch (Exception e) {
                // closed
            }
            received.add(CLOSED);
        }

        void send(String json) throws IOException {
            ByteBuffer bytes = ByteBuffer.wrap((json + "\n").getBytes(StandardCharsets.UTF_8));
            while (bytes.hasRemaining()) channel.write(bytes);
        }

        /** The next line the client sent (or {@link #CLOSED}), waiting up to 5 s. */
        JsonObject next() throws InterruptedException {
            JsonObject line = received.poll(5, TimeUnit.SECONDS);
            if (line == null) throw new AssertionError("the client sent nothing within 5 s");
            return line;
        }

        /** Answers the hello with a welcome carrying the hello's id, as the daemon does, and returns the hello. */
        JsonObject welcome() throws Exception {
            JsonObject hello = next();
            if (!"hello".equals(hello.get("type").getAsString())) throw new AssertionError("expected hello: " + hello);
            welcomeWithId(hello.get("id"));
            return hello;
        }

        /** Sends a welcome with {@code id} ({@code null}: none, as daemons did before welcomes carried the hello's id). */
        void welcomeWithId(com.google.gson.JsonElement id) throws IOException {
            String idField = id == null ? "" : "\"id\":" + id + ",";
            send("{\"v\":1," + idField + "\"type\":\"welcome\",\"protocol\":1,\"session_id\":\"s_" + sessions.incrementAndGet()
                    + "\",\"daemon\":{\"version\":\"fake\"},\"heartbeat_ms\":10000,\"max_line_bytes\":1048576}");
        }

        void close() throws IOException {
            channel.close();
        }
    }

    static final JsonObject CLOSED = new JsonObject();

    final Path socket;
    final ServerSocketChannel server;
    final BlockingQueue<Peer> peers = new LinkedBlockingQueue<>();
    final AtomicInteger sessions = new AtomicInteger();

    FakeDaemon(Path dir) throws IOException {
        socket = dir.resolve("fake.sock");
        Files.deleteIfExists(socket);
        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        Thread acceptor = new Thread(() -> {
            try {
                while (true) peers.add(new Peer(server.accept()));
            } catch (IOException e) {
                // closed
            }
        }, "fake-daemon-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /** The next connection, waiting up to {@code ms}. */
    Peer accept(long ms) throws InterruptedException {
        Peer peer = peers.poll(ms, TimeUnit.MILLISECONDS);
        if (peer == null) throw new AssertionError("no connection within " + ms + " ms");
        return peer;
    }

    @Override
    public void close() throws IOException {
        server.close();
        Files.deleteIfExists(socket);
    }

    static List<String> types(List<JsonObject> lines) {
        return lines.stream().map(l -> l == CLOSED ? "<closed>" : l.get("type").getAsString()).collect(java.util.stream.Collectors.toList());
    }
}
