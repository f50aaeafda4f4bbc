// The plugin's connection to the daemon: connect over the Unix socket, `hello`, answer heartbeats, run drives one at a time and ack them, send events, and reconnect with capped jittered backoff — plain Java (no IntelliJ API), so it is tested against the real daemon.
package dev.koru.jetbrains.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonPrimitive;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.DoubleSupplier;
import java.util.function.Supplier;

/**
 * One plugin session per IDE project window. Threads: a connection thread (connect, read,
 * wait out the backoff), a sender thread (every write, so no caller ever blocks on the
 * socket — the EDT included), a drive thread (drives run one at a time, in order) and a
 * timer (handshake timeout, heartbeat watchdog). Nothing here calls into the IDE except
 * through {@link Options#runDrive}, {@link Options#hello} and the listeners.
 */
public final class DaemonClient {
    /** The levels the plugin's log uses. */
    public interface Log {
        void debug(String message);

        void info(String message);

        void warn(String message);
    }

    /** Runs one drive, calling {@code ack} per stage; {@code cancelled} says true once the daemon cancelled it or the connection dropped. */
    public interface DriveRunner {
        void run(Messages.Drive drive, Consumer<StepExecutor.StageAck> ack, BooleanSupplier cancelled) throws Exception;
    }

    /** Where the connection stands, for the status bar widget and the log. */
    public static final class State {
        /** {@code connecting}, {@code connected}, {@code no_daemon}, {@code refused}, {@code stopped}. */
        public final String kind;
        public final SocketDiscovery.Location socket;
        public final String sessionId;
        public final String daemonVersion;
        /** Why there is no connection (no_daemon, refused), for people. */
        public final String reason;
        public final long retryInMs;

        State(String kind, SocketDiscovery.Location socket, String sessionId, String daemonVersion, String reason, long retryInMs) {
            this.kind = kind;
            this.socket = socket;
            this.sessionId = sessionId;
            this.daemonVersion = daemonVersion;
            this.reason = reason;
            this.retryInMs = retryInMs;
        }

        @Override
        public String toString() {
            switch (kind) {
                case "connected": return "connected as " + sessionId + " to koru " + daemonVersion + " at " + socket.path;
                case "connecting": return "connecting to " + socket;
                case "stopped": return "stopped";
                default: return kind + ": " + reason + " (retry in " + retryInMs + " ms)";
            }
        }
    }

    /** What the client needs from its host. */
    public static final class Options {
        public Supplier<SocketDiscovery.Location> locate = () -> SocketDiscovery.locate(null);
        /** The hello to send; called for every connection so it carries fresh facts. */
        public Supplier<Messages.Hello> hello;
        public DriveRunner runDrive;
        public Log log = new Log() {
            public void debug(String message) {}

            public void info(String message) {}

            public void warn(String message) {}
        };
        public Consumer<State> onState = state -> {};
        /** Called with a drive id when a drive starts and with {@code null} when it ends. */
        public Consumer<String> onDrive = driveId -> {};
        public Backoff backoff = Backoff.DEFAULT;
        public DoubleSupplier random = Math::random;
        /** How long to wait for {@code welcome} after {@code hello} (the daemon's own limit is 5 s). */
        public long handshakeTimeoutMs = 5000;
        /** Carries out {@code terminal.io} orders (absent: each is answered with an error); run on a thread of its own. */
        public java.util.function.Function<Messages.TerminalIo, Messages.TerminalIoResult> terminalIo;
        /** Reads and writes the system clipboard for {@code clipboard} orders (absent: each is answered with an error); run on the terminal thread. */
        public ClipboardLender clipboard;
        /** A name for the threads, so a thread dump says which project they serve. */
        public String name = "koru";
    }

    /** One open connection; replaced on every reconnect so late writes and acks for an old one are dropped. */
    private final class Connection {
        final SocketChannel channel;
        final SocketDiscovery.Location location;
        volatile boolean welcomed;
        /** The id this connection's hello carried; the welcome must carry it back (or none, from an older daemon). */
        volatile JsonElement helloId;
        volatile String sessionId;
        volatile long lastReceivedMs = System.currentTimeMillis();
        volatile long heartbeatMs;
        final AtomicBoolean closed = new AtomicBoolean();

        Connection(SocketChannel channel, SocketDiscovery.Location location) {
            this.channel = channel;
            this.location = location;
        }

        void close() {
            if (closed.compareAndSet(false, true)) {
                try {
                    channel.close();
                } catch (IOException ignored) {
                    // already gone
                }
            }
        }
    }

    /** One queued or running drive. */
    private static final class DriveJob {
        final Messages.Drive drive;
        final Connection connection;
        final AtomicBoolean cancelled = new AtomicBoolean();

        DriveJob(Messages.Drive drive, Connection connection) {
            this.drive = drive;
            this.connection = connection;
        }
    }

    private final Options options;
    private final Object lock = new Object();
    private final ExecutorService sender;
    private final ExecutorService driver;
    private final ExecutorService terminalWorker;
    private final ScheduledExecutorService timer;
    private final Deque<DriveJob> jobs = new ArrayDeque<>();
    private DriveJob running;
    private Thread connectionThread;
    private volatile Connection connection;
    private volatile boolean stopped = true;
    private volatile boolean reconnectImmediately;
    private volatile State state;
    private int attempt;
    private final AtomicInteger drivesRun = new AtomicInteger();
    private final AtomicInteger hellosSent = new AtomicInteger();

    public DaemonClient(Options options) {
        this.options = Objects.requireNonNull(options);
        Objects.requireNonNull(options.hello, "options.hello");
        Objects.requireNonNull(options.runDrive, "options.runDrive");
        this.sender = Executors.newSingleThreadExecutor(daemonThreads(options.name + "-send"));
        this.driver = Executors.newSingleThreadExecutor(daemonThreads(options.name + "-drive"));
        this.terminalWorker = Executors.newSingleThreadExecutor(daemonThreads(options.name + "-terminal"));
        this.timer = Executors.newSingleThreadScheduledExecutor(daemonThreads(options.name + "-timer"));
        this.state = new State("stopped", null, null, null, null, 0);
    }

    private static ThreadFactory daemonThreads(String name) {
        return runnable -> {
            Thread thread = new Thread(runnable, name);
            thread.setDaemon(true);
            return thread;
        };
    }

    public State state() {
        return state;
    }

    /** The session id the daemon gave this window, when connected. */
    public String sessionId() {
        Connection current = connection;
        return current != null && current.welcomed ? current.sessionId : null;
    }

    /** How many drives this client has run (for the status widget). */
    public int drivesRun() {
        return drivesRun.get();
    }

    /** Starts connecting (and keeps reconnecting until {@link #stop}); returns at once. */
    public void start() {
        synchronized (lock) {
            if (!stopped) return;
            stopped = false;
            attempt = 0;
            connectionThread = new Thread(this::connectionLoop, options.name + "-connection");
            connectionThread.setDaemon(true);
            connectionThread.start();
        }
    }

    /** Drops the connection (if any) and connects again at once; returns at once. */
    public void reconnectNow() {
        synchronized (lock) {
            attempt = 0;
            reconnectImmediately = true;
            lock.notifyAll();
        }
        Connection current = connection;
        if (current != null) current.close();
        if (stopped) start();
    }

    /**
     * Says {@code bye} (when connected), closes, and stops reconnecting. Returns at once; the
     * future completes once the bye is flushed and the socket closed (at most ~1 s).
     */
    public CompletableFuture<Void> stop(String reason) {
        Connection current;
        synchronized (lock) {
            stopped = true;
            lock.notifyAll();
            current = connection;
        }
        CompletableFuture<Void> done = new CompletableFuture<>();
        if (current == null) {
            setState(new State("stopped", null, null, null, null, 0));
            done.complete(null);
            return done;
        }
        try {
            sender.execute(() -> {
                try {
                    if (current.welcomed) writeNow(current, new Messages.Bye(reason));
                } finally {
                    current.close();
                    done.complete(null);
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            current.close();
            done.complete(null);
        }
        return done.completeOnTimeout(null, 1, TimeUnit.SECONDS);
    }

    /** Stops and releases the threads. */
    public void dispose(String reason) {
        stop(reason).join();
        sender.shutdown();
        driver.shutdownNow();
        terminalWorker.shutdownNow();
        timer.shutdownNow();
    }

    /** Sends an event when connected; returns whether it was queued. Never blocks. */
    public boolean sendEvent(Messages.PluginEventKind event) {
        Connection current = connection;
        if (current == null || !current.welcomed) return false;
        send(current, new Messages.Event(event));
        return true;
    }

    /** Sends the window's terminals when connected; returns whether it was queued. Never blocks. */
    public boolean sendTerminals(List<Messages.IdeTerminal> terminals) {
        Connection current = connection;
        if (current == null || !current.welcomed) return false;
        send(current, new Messages.Terminals(terminals));
        return true;
    }

    // ── connection thread ────────────────────────────────────────────────────────────

    private void connectionLoop() {
        while (!stopped) {
            SocketDiscovery.Location location;
            try {
                location = options.locate.get();
            } catch (RuntimeException e) {
                location = new SocketDiscovery.Location(java.nio.file.Paths.get("/nonexistent"), "error: " + e.getMessage());
            }
            Outcome outcome = runConnection(location);
            if (stopped) break;
            long delay;
            synchronized (lock) {
                if (outcome.welcomed) attempt = 0;
                delay = reconnectImmediately ? 0 : options.backoff.delay(attempt, options.random);
                reconnectImmediately = false;
                attempt++;
            }
            if (outcome.refusal != null) {
                options.log.warn("the daemon refused this window: " + outcome.refusal + "; retrying in " + delay + " ms");
                setState(new State("refused", location, null, null, outcome.refusal, delay));
            } else {
                String reason = outcome.failure != null ? outcome.failure
                        : outcome.welcomed ? "the connection closed" : "the daemon closed the connection before welcome";
                options.log.debug(reason + "; retrying in " + delay + " ms");
                setState(new State("no_daemon", location, null, null, reason, delay));
            }
            waitBeforeRetry(delay);
        }
        setState(new State("stopped", null, null, null, null, 0));
    }

    private void waitBeforeRetry(long delayMs) {
        long until = System.currentTimeMillis() + delayMs;
        synchronized (lock) {
            while (!stopped && !reconnectImmediately) {
                long left = until - System.currentTimeMillis();
                if (left <= 0) return;
                try {
                    lock.wait(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
            reconnectImmediately = false;
        }
    }

    /** How one connection ended. */
    private static final class Outcome {
        boolean welcomed;
        String failure;
        String refusal;
    }

    private Outcome runConnection(SocketDiscovery.Location location) {
        Outcome outcome = new Outcome();
        setState(new State("connecting", location, null, null, null, 0));
        SocketChannel channel;
        try {
            channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.connect(UnixDomainSocketAddress.of(location.path));
        } catch (IOException | RuntimeException e) {
            outcome.failure = "no daemon at " + location.path + " (" + e.getClass().getSimpleName()
                    + (e.getMessage() == null ? "" : ": " + e.getMessage()) + "); start one with `koru daemon`";
            return outcome;
        }
        Connection current = new Connection(channel, location);
        synchronized (lock) {
            if (stopped) {
                current.close();
                return outcome;
            }
            connection = current;
        }
        ScheduledFuture<?> handshakeTimeout = null;
        ScheduledFuture<?> watchdog = null;
        try {
            Messages.Hello hello;
            try {
                hello = options.hello.get();
            } catch (RuntimeException e) {
                outcome.failure = "could not build hello: " + e;
                return outcome;
            }
            // The welcome carries this id back (docs/protocol.md "Handshake"), so a welcome is
            // known to answer this connection's hello.
            if (hello.id == null || hello.id.isJsonNull()) hello.id = new JsonPrimitive("hello-" + hellosSent.incrementAndGet());
            current.helloId = hello.id;
            send(current, hello);
            handshakeTimeout = timer.schedule(() -> {
                if (!current.welcomed) {
                    options.log.warn("no welcome within " + options.handshakeTimeoutMs + " ms; closing");
                    current.close();
                }
            }, options.handshakeTimeoutMs, TimeUnit.MILLISECONDS);
            LineSplitter splitter = new LineSplitter(Protocol.DEFAULT_MAX_LINE_BYTES);
            ByteBuffer buffer = ByteBuffer.allocate(64 * 1024);
            while (!current.closed.get()) {
                buffer.clear();
                int read = channel.read(buffer);
                if (read < 0) break;
                current.lastReceivedMs = System.currentTimeMillis();
                List<byte[]> lines;
                try {
                    lines = splitter.push(buffer.array(), 0, read);
                } catch (LineSplitter.LineTooLongException e) {
                    outcome.failure = "the daemon sent a line longer than " + e.limit + " bytes";
                    options.log.warn(outcome.failure);
                    break;
                }
                for (byte[] line : lines) {
                    if (line.length == 0) continue;
                    boolean wasWelcomed = current.welcomed;
                    handleLine(current, line, outcome);
                    if (!wasWelcomed && current.welcomed) {
                        outcome.welcomed = true;
                        handshakeTimeout.cancel(false);
                        long interval = current.heartbeatMs > 0 ? current.heartbeatMs : 10_000;
                        watchdog = timer.scheduleAtFixedRate(() -> {
                            // Four silent heartbeat intervals: the daemon is gone without closing.
                            if (System.currentTimeMillis() - current.lastReceivedMs > 4 * interval) {
                                options.log.warn("no line from the daemon for " + 4 * interval + " ms; reconnecting");
                                current.close();
                            }
                        }, interval, interval, TimeUnit.MILLISECONDS);
                    }
                }
            }
        } catch (IOException e) {
            if (!current.closed.get()) outcome.failure = "the connection failed: " + e.getMessage();
        } finally {
            if (handshakeTimeout != null) handshakeTimeout.cancel(false);
            if (watchdog != null) watchdog.cancel(false);
            current.close();
            synchronized (lock) {
                if (connection == current) connection = null;
            }
            abandonDrives(current);
            if (outcome.welcomed) options.log.info("the connection to the daemon closed");
        }
        return outcome;
    }

    private void handleLine(Connection current, byte[] line, Outcome outcome) {
        Codec.Decoded decoded = Codec.decodeLine(line);
        if (!decoded.ok()) {
            options.log.warn("ignoring a line from the daemon: " + decoded.error);
            return;
        }
        String type = decoded.type();
        if (!current.welcomed) {
            switch (type) {
                case "welcome": {
                    Messages.Welcome welcome = decoded.as(Messages.Welcome.class);
                    String mismatch = welcomeIdMismatch(current.helloId, welcome.id);
                    if (mismatch != null) {
                        outcome.refusal = mismatch;
                        current.close();
                        return;
                    }
                    if (welcome.protocol == null || !HelloBuilder.acceptsNegotiated(welcome.protocol)) {
                        outcome.refusal = "version_mismatch: the daemon chose protocol " + welcome.protocol
                                + ", this plugin speaks " + Protocol.MIN_PROTOCOL_VERSION + "–" + Protocol.PROTOCOL_VERSION;
                        current.close();
                        return;
                    }
                    current.sessionId = welcome.sessionId;
                    current.heartbeatMs = welcome.heartbeatMs == null ? 0 : welcome.heartbeatMs;
                    current.welcomed = true;
                    String version = welcome.daemon == null ? "?" : welcome.daemon.version;
                    options.log.info("connected to koru " + version + " at " + current.location.path + " as session "
                            + welcome.sessionId + " (protocol " + welcome.protocol + ")");
                    setState(new State("connected", current.location, welcome.sessionId, version, null, 0));
                    return;
                }
                case "error": {
                    Messages.ErrorMessage error = decoded.as(Messages.ErrorMessage.class);
                    outcome.refusal = error.code + ": " + error.message;
                    return;
                }
                default:
                    options.log.warn("expected welcome, got " + type);
                    return;
            }
        }
        switch (type) {
            case "ping":
                send(current, new Messages.Ping("pong", decoded.envelope.get("id")));
                break;
            case "drive":
                enqueue(new DriveJob(decoded.as(Messages.Drive.class), current));
                break;
            case "terminal.io": {
                Messages.TerminalIo order = decoded.as(Messages.TerminalIo.class);
                Connection asked = current;
                terminalWorker.execute(() -> {
                    Messages.TerminalIoResult result;
                    try {
                        result = options.terminalIo == null
                                ? new Messages.TerminalIoResult(order.orderId, null, "this window does not reach its terminals")
                                : options.terminalIo.apply(order);
                    } catch (RuntimeException e) {
                        result = new Messages.TerminalIoResult(order.orderId, null, "the plugin failed: " + e);
                    }
                    send(asked, result);
                });
                break;
            }
            case "clipboard": {
                Messages.ClipboardOrder order = decoded.as(Messages.ClipboardOrder.class);
                Connection asked = current;
                terminalWorker.execute(() -> send(asked, answerClipboard(order)));
                break;
            }
            case "cancel": {
                Messages.Cancel cancel = decoded.as(Messages.Cancel.class);
                cancel(cancel.driveId, cancel.reason);
                break;
            }
            case "bye": {
                Messages.Bye bye = decoded.as(Messages.Bye.class);
                options.log.info("the daemon says bye: " + (bye.reason == null ? "" : bye.reason));
                // An operator's recovery action: come back at once, not after a backoff.
                if (Protocol.RECONNECT_REQUESTED.equals(bye.reason)) {
                    synchronized (lock) {
                        reconnectImmediately = true;
                        attempt = 0;
                    }
                }
                break;
            }
            case "error": {
                Messages.ErrorMessage error = decoded.as(Messages.ErrorMessage.class);
                options.log.warn("the daemon reports " + error.code + ": " + error.message);
                break;
            }
            default:
                options.log.debug("ignoring " + type);
        }
    }

    // ── drives ───────────────────────────────────────────────────────────────────────

    private void enqueue(DriveJob job) {
        synchronized (lock) {
            jobs.addLast(job);
        }
        driver.execute(this::runNext);
    }

    private void runNext() {
        DriveJob job;
        synchronized (lock) {
            job = jobs.pollFirst();
            if (job == null) return;
            running = job;
        }
        Messages.Drive drive = job.drive;
        int steps = drive.steps == null ? 0 : drive.steps.size();
        options.log.info("drive " + drive.driveId + ": route " + drive.route + ", " + steps + " steps, "
                + (drive.prompt == null ? 0 : drive.prompt.length()) + " chars");
        safely(() -> options.onDrive.accept(drive.driveId));
        Consumer<StepExecutor.StageAck> ack = stage -> {
            if (job.cancelled.get()) return;
            options.log.info("drive " + drive.driveId + ": " + stage);
            send(job.connection, new Messages.Ack(drive.driveId, stage.stage, stage.blocker, stage.evidence));
        };
        try {
            options.runDrive.run(drive, ack, job.cancelled::get);
        } catch (Exception | LinkageError e) {
            ack.accept(new StepExecutor.StageAck("failed",
                    new Messages.Blocker("capability_missing", "the plugin failed: " + e)));
        } finally {
            drivesRun.incrementAndGet();
            synchronized (lock) {
                running = null;
            }
            safely(() -> options.onDrive.accept(null));
        }
    }

    private void cancel(String driveId, String reason) {
        options.log.info("drive " + driveId + ": cancelled by the daemon (" + reason + ")");
        synchronized (lock) {
            if (running != null && Objects.equals(running.drive.driveId, driveId)) running.cancelled.set(true);
            jobs.removeIf(job -> {
                boolean match = Objects.equals(job.drive.driveId, driveId);
                if (match) job.cancelled.set(true);
                return match;
            });
        }
    }

    /** A dropped connection: the daemon fails what was in flight; the plugin never re-runs it. */
    private void abandonDrives(Connection closed) {
        synchronized (lock) {
            if (running != null && running.connection == closed) running.cancelled.set(true);
            jobs.removeIf(job -> {
                boolean match = job.connection == closed;
                if (match) job.cancelled.set(true);
                return match;
            });
        }
    }

    // ── writing ──────────────────────────────────────────────────────────────────────

    /** Queues one message for the connection; dropped if that connection has closed by then. */
    /** The system clipboard, lent to the daemon: what the IDE reads and writes. */
    public interface ClipboardLender {
        /** The clipboard's text, or {@code null} when it holds none. */
        String read() throws Exception;

        /** Makes {@code text} the clipboard's content (empty: empties it). */
        void write(String text) throws Exception;
    }

    /** Answers one {@code clipboard} order: the text read or the write done, or why not. */
    Messages.ClipboardResult answerClipboard(Messages.ClipboardOrder order) {
        ClipboardLender lender = options.clipboard;
        if (lender == null) {
            return new Messages.ClipboardResult(order.orderId, null, "this window does not lend its clipboard");
        }
        String kind = order.action == null ? null : order.action.kind;
        try {
            if ("read".equals(kind)) {
                return new Messages.ClipboardResult(order.orderId, lender.read(), null);
            }
            if ("write".equals(kind)) {
                lender.write(order.action.text == null ? "" : order.action.text);
                return new Messages.ClipboardResult(order.orderId, null, null);
            }
            return new Messages.ClipboardResult(order.orderId, null, "unknown clipboard action " + kind);
        } catch (Exception e) {
            return new Messages.ClipboardResult(order.orderId, null, "the plugin failed: " + e);
        }
    }

    private void send(Connection target, Object message) {
        try {
            sender.execute(() -> writeNow(target, message));
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // disposed
        }
    }

    private void writeNow(Connection target, Object message) {
        if (target.closed.get()) return;
        ByteBuffer bytes = ByteBuffer.wrap(Codec.encodeLine(message));
        try {
            while (bytes.hasRemaining()) target.channel.write(bytes);
        } catch (IOException e) {
            options.log.debug("write failed: " + e.getMessage());
            target.close();
        }
    }

    private void setState(State next) {
        state = next;
        safely(() -> options.onState.accept(next));
    }

    private void safely(Runnable runnable) {
        try {
            runnable.run();
        } catch (RuntimeException e) {
            options.log.warn("a listener failed: " + e);
        }
    }

    /**
     * Why a welcome does not answer the hello that carried {@code helloId}, or {@code null}
     * when it does: it carries the same id, or none (a daemon from before welcomes carried
     * the hello's id, which is still protocol v1).
     */
    static String welcomeIdMismatch(JsonElement helloId, JsonElement welcomeId) {
        if (welcomeId == null || welcomeId.isJsonNull() || welcomeId.equals(helloId)) return null;
        return "unexpected_welcome: the daemon's welcome answers id " + welcomeId + ", but this connection's hello had id "
                + idOf(helloId);
    }

    /** The id of a message, for logs. */
    static String idOf(JsonElement id) {
        return id == null ? "-" : id.toString();
    }
}
