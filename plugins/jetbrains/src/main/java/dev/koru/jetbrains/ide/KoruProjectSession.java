// One project window's Koru session: builds the hello from the IDE (ApplicationInfo, project base path, catalog actions and tool windows found), runs the protocol client, reports focus, and says bye when the project closes.
package dev.koru.jetbrains.ide;

import com.intellij.openapi.Disposable;
import com.intellij.openapi.actionSystem.ActionManager;
import com.intellij.openapi.application.ApplicationInfo;
import com.intellij.openapi.diagnostic.Logger;
import com.intellij.openapi.project.Project;
import com.intellij.openapi.util.Disposer;
import com.intellij.openapi.wm.ToolWindowManager;
import com.intellij.openapi.wm.WindowManager;
import dev.koru.jetbrains.client.Catalog;
import dev.koru.jetbrains.client.DaemonClient;
import dev.koru.jetbrains.client.HelloBuilder;
import dev.koru.jetbrains.client.Messages;
import dev.koru.jetbrains.client.Protocol;
import dev.koru.jetbrains.client.SocketDiscovery;
import dev.koru.jetbrains.client.StepExecutor;
import dev.koru.jetbrains.client.TerminalBridge;

import javax.swing.JFrame;
import javax.swing.SwingUtilities;
import java.awt.KeyboardFocusManager;
import java.awt.Window;
import java.beans.PropertyChangeListener;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/** Created by {@link KoruStartupActivity}, closed by {@link KoruProjectListener} or when the project is disposed. */
public final class KoruProjectSession implements Disposable {
    private static final Logger LOG = Logger.getInstance(KoruProjectSession.class);
    private static final Map<Project, KoruProjectSession> SESSIONS = new ConcurrentHashMap<>();

    private final Project project;
    private final DaemonClient client;
    private final List<Consumer<DaemonClient.State>> listeners = new CopyOnWriteArrayList<>();
    private volatile String activeDrive;
    private PropertyChangeListener focusListener;
    private volatile Boolean lastFocused;
    /** The project's terminal tabs for the daemon (where the IDE has its terminal plugin). */
    private final TerminalBridge terminals;
    private volatile List<Messages.IdeTerminal> lastTerminals = List.of();
    private final java.util.concurrent.ScheduledExecutorService terminalWatch;

    private KoruProjectSession(Project project) {
        this.project = project;
        DaemonClient.Options options = new DaemonClient.Options();
        options.locate = () -> SocketDiscovery.locate(KoruSettings.socketPath());
        options.hello = this::hello;
        IdeHost host = new IdeHost(project);
        options.runDrive = (drive, ack, cancelled) -> StepExecutor.execute(drive.steps, drive.prompt, host,
                KoruSettings.allowedCommands(), ack, drive.options == null || drive.options.submit, cancelled);
        options.log = new DaemonClient.Log() {
            public void debug(String message) {
                LOG.debug(message);
            }

            public void info(String message) {
                LOG.info(message);
            }

            public void warn(String message) {
                LOG.warn(message);
            }
        };
        IdeTerminals ideTerminals = IdeTerminals.available() ? new IdeTerminals(project) : null;
        this.terminals = ideTerminals == null ? null : new TerminalBridge(ideTerminals::ports);
        if (terminals != null) options.terminalIo = terminals::handle;
        // The system clipboard, for the desktop portal without one of its own (GNOME 43).
        options.clipboard = new DaemonClient.ClipboardLender() {
            public String read() throws Exception {
                String text = host.readClipboard();
                return text == null || text.isEmpty() ? null : text;
            }

            public void write(String text) throws Exception {
                host.writeClipboard(text);
            }
        };
        options.onState = state -> {
            if ("connected".equals(state.kind)) lastTerminals = List.of(); // report them again on this connection
            listeners.forEach(listener -> listener.accept(state));
        };
        options.onDrive = driveId -> {
            activeDrive = driveId;
            listeners.forEach(listener -> listener.accept(client().state()));
        };
        options.name = "koru-" + project.getName();
        this.client = new DaemonClient(options);
        // The terminal API has no listener that covers both terminals: the list is read every 2 s and sent when it changed.
        this.terminalWatch = terminals == null ? null : java.util.concurrent.Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "koru-terminals-" + project.getName());
            thread.setDaemon(true);
            return thread;
        });
        if (terminalWatch != null) terminalWatch.scheduleWithFixedDelay(this::reportTerminals, 1, 2, java.util.concurrent.TimeUnit.SECONDS);
    }

    private DaemonClient client() {
        return client;
    }

    /** Starts the session for a project (once); called on any thread. */
    public static KoruProjectSession open(Project project) {
        return SESSIONS.computeIfAbsent(project, p -> {
            KoruProjectSession session = new KoruProjectSession(p);
            Disposer.register(p, session);
            session.client.start();
            Edt.later(session::watchFocus);
            return session;
        });
    }

    /** The running session of a project, or {@code null}. */
    public static KoruProjectSession of(Project project) {
        return project == null ? null : SESSIONS.get(project);
    }

    public static Collection<KoruProjectSession> all() {
        return SESSIONS.values();
    }

    /** Says {@code window_closing} and {@code bye}; never blocks the calling thread (the EDT). */
    public static void close(Project project, String reason) {
        KoruProjectSession session = SESSIONS.remove(project);
        if (session != null) session.shutdown(reason);
    }

    public DaemonClient.State state() {
        return client.state();
    }

    public String activeDrive() {
        return activeDrive;
    }

    public int drivesRun() {
        return client.drivesRun();
    }

    public void reconnect() {
        client.reconnectNow();
    }

    public void addListener(Consumer<DaemonClient.State> listener) {
        listeners.add(listener);
    }

    public void removeListener(Consumer<DaemonClient.State> listener) {
        listeners.remove(listener);
    }

    private void reportTerminals() {
        try {
            if (client.sessionId() == null) return;
            List<Messages.IdeTerminal> now = terminals.list();
            if (Protocol.GSON.toJson(now).equals(Protocol.GSON.toJson(lastTerminals))) return;
            if (client.sendTerminals(now)) lastTerminals = now;
        } catch (RuntimeException e) {
            LOG.debug("Koru: reporting the terminals: " + e);
        }
    }

    private void shutdown(String reason) {
        if (terminalWatch != null) terminalWatch.shutdownNow();
        client.sendEvent(Messages.PluginEventKind.of("window_closing"));
        client.stop(reason).whenComplete((ok, error) -> client.dispose(reason));
        Edt.later(this::unwatchFocus);
    }

    @Override
    public void dispose() {
        if (SESSIONS.remove(project, this)) shutdown("project closed");
    }

    /** The hello for this connection; gathers the IDE facts on the EDT (called on the connection thread). */
    private Messages.Hello hello() {
        try {
            HelloBuilder.WindowFacts facts = Edt.call(this::facts, 10_000);
            return HelloBuilder.build(facts);
        } catch (Exception e) {
            throw new IllegalStateException("could not read the IDE's facts: " + e, e);
        }
    }

    private HelloBuilder.WindowFacts facts() {
        HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
        ApplicationInfo info = ApplicationInfo.getInstance();
        facts.pluginVersion = PluginInfo.version();
        facts.ideVersion = info.getFullVersion();
        facts.appName = info.getVersionName();
        facts.productCode = info.getBuild().getProductCode();
        facts.platformPrefix = System.getProperty("idea.platform.prefix", "");
        String base = project.getBasePath();
        facts.workspaceFolders = base == null ? List.of() : List.of(base);
        facts.title = project.getName();
        facts.focused = isFocused();
        Set<String> actions = new LinkedHashSet<>(Catalog.ACTION_IDS);
        actions.addAll(KoruSettings.extraAllowedCommands());
        actions.removeAll(StepExecutor.BUILT_IN);
        List<String> presentActions = new ArrayList<>();
        for (String id : actions) if (ActionManager.getInstance().getAction(id) != null) presentActions.add(id);
        facts.availableActions = presentActions;
        List<String> toolWindows = new ArrayList<>();
        ToolWindowManager manager = ToolWindowManager.getInstance(project);
        for (String id : Catalog.TOOL_WINDOWS) if (manager.getToolWindow(id) != null) toolWindows.add(id);
        facts.availableToolWindows = toolWindows;
        facts.terminalIo = terminals != null;
        facts.clipboardIo = true;
        return facts;
    }

    /** True when the project's frame (or a window it owns) is the active window. EDT only. */
    private boolean isFocused() {
        JFrame frame = WindowManager.getInstance().getFrame(project);
        Window active = KeyboardFocusManager.getCurrentKeyboardFocusManager().getActiveWindow();
        return frame != null && active != null && (active == frame || SwingUtilities.isDescendingFrom(active, frame)
                || active.getOwner() == frame);
    }

    /** Reports focus changes of this project's window as `event focus`. EDT only. */
    private void watchFocus() {
        focusListener = event -> {
            boolean focused = isFocused();
            if (lastFocused == null || lastFocused != focused) {
                lastFocused = focused;
                client.sendEvent(Messages.PluginEventKind.focus(focused));
            }
        };
        KeyboardFocusManager.getCurrentKeyboardFocusManager().addPropertyChangeListener("activeWindow", focusListener);
    }

    private void unwatchFocus() {
        if (focusListener != null) {
            KeyboardFocusManager.getCurrentKeyboardFocusManager().removePropertyChangeListener("activeWindow", focusListener);
            focusListener = null;
        }
    }

    public SocketDiscovery.Location socket() {
        return SocketDiscovery.locate(KoruSettings.socketPath());
    }
}
