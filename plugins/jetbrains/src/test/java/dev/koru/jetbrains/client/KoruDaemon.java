// Test and bench helper: runs the real `koru daemon` on a private temp socket (its own XDG and HOME directories) and runs `koru` CLI commands against it.
package dev.koru.jetbrains.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

public final class KoruDaemon implements AutoCloseable {
    public final Path binary;
    public final Path dir;
    public final Path socket;
    private Process process;

    public KoruDaemon(Path binary, Path dir) throws IOException {
        this.binary = binary;
        this.dir = dir;
        Path run = Files.createDirectories(dir.resolve("run"));
        run.toFile().setReadable(true, true);
        this.socket = run.resolve("koru").resolve("koru.sock");
        for (String d : new String[] {"state", "config", "home"}) Files.createDirectories(dir.resolve(d));
    }

    private void environment(Map<String, String> env) {
        env.put("XDG_RUNTIME_DIR", dir.resolve("run").toString());
        env.put("XDG_STATE_HOME", dir.resolve("state").toString());
        env.put("XDG_CONFIG_HOME", dir.resolve("config").toString());
        env.put("HOME", dir.resolve("home").toString());
        env.put("KORU_SOCKET", socket.toString());
        env.remove("DISPLAY");
        env.remove("WAYLAND_DISPLAY");
    }

    /** Starts the daemon and waits for its socket. */
    public KoruDaemon start(String... extra) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(binary.toString(), "daemon", "--socket", socket.toString(), "--no-observe"));
        command.addAll(List.of(extra));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("daemon.log").toFile()));
        environment(builder.environment());
        process = builder.start();
        long until = System.currentTimeMillis() + 10_000;
        while (!Files.exists(socket)) {
            if (!process.isAlive()) throw new IllegalStateException("koru daemon exited: " + log());
            if (System.currentTimeMillis() > until) throw new IllegalStateException("no socket within 10 s: " + log());
            Thread.sleep(20);
        }
        return this;
    }

    /** Stops the daemon with SIGTERM (it says bye to every connection) and waits for it. */
    public void stop() throws InterruptedException {
        if (process == null) return;
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) process.destroyForcibly().waitFor();
        process = null;
    }

    public String log() {
        try {
            return Files.readString(dir.resolve("daemon.log"));
        } catch (IOException e) {
            return "(no log)";
        }
    }

    /** The result of one CLI command. */
    public static final class Result {
        public final int code;
        public final String stdout;
        public final String stderr;

        Result(int code, String stdout, String stderr) {
            this.code = code;
            this.stdout = stdout;
            this.stderr = stderr;
        }

        @Override
        public String toString() {
            return "exit " + code + "\nstdout: " + stdout + "\nstderr: " + stderr;
        }
    }

    /** Runs {@code koru ARGS} against this daemon. */
    public Result run(String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(binary.toString());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command);
        environment(builder.environment());
        Path out = Files.createTempFile(dir, "out", ".txt");
        Path err = Files.createTempFile(dir, "err", ".txt");
        builder.redirectOutput(out.toFile()).redirectError(err.toFile());
        Process p = builder.start();
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException("koru " + String.join(" ", args) + " took more than 60 s");
        }
        Result result = new Result(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8), Files.readString(err, StandardCharsets.UTF_8));
        Files.deleteIfExists(out);
        Files.deleteIfExists(err);
        return result;
    }

    /** Starts a long-running {@code koru ARGS} (e.g. {@code dev fake-plugin}) against this daemon. */
    public Process spawn(String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(binary.toString());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("spawned.log").toFile()));
        environment(builder.environment());
        return builder.start();
    }

    @Override
    public void close() throws InterruptedException {
        stop();
    }
}
