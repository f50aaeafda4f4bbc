// Builds the `hello` this plugin sends: product (detected and raw), versions, the project's base paths, pids and focus, and the capabilities — which catalog actions and tool windows this IDE has.
package dev.koru.jetbrains.client;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/** Pure: the IDE glue gathers {@link WindowFacts}, this turns them into a {@link Messages.Hello}. */
public final class HelloBuilder {
    private HelloBuilder() {}

    /** What the plugin knows about its project window when it connects. */
    public static final class WindowFacts {
        public String pluginVersion = "0.0.0";
        /** {@code ApplicationInfo.getFullVersion()}. */
        public String ideVersion = "";
        /** {@code ApplicationInfo.getFullApplicationName()}. */
        public String appName = "";
        /** {@code ApplicationInfo.getBuild().getProductCode()} ({@code IU}, {@code PY}, …). */
        public String productCode = "";
        /** {@code System.getProperty("idea.platform.prefix")}. */
        public String platformPrefix = "";
        public List<String> workspaceFolders = new ArrayList<>();
        public String title;
        public long pid = ProcessHandle.current().pid();
        public Long parentPid = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(null);
        public boolean focused;
        /** Action ids worth reporting (the catalog's plus the allowed ones) that exist in this IDE. */
        public Collection<String> availableActions = List.of();
        /** Tool window ids of the catalog that are registered in this project. */
        public Collection<String> availableToolWindows = List.of();
        /** Whether the plugin reaches this window's terminals (the IDE has its terminal plugin). */
        public boolean terminalIo;
        /** Whether the plugin lends the system clipboard to the daemon ({@code clipboard} orders). */
        public boolean clipboardIo;
    }

    /** Capabilities: the generic kinds this plugin implements, then each action and tool window it found. */
    public static List<Messages.Capability> capabilitiesFor(WindowFacts facts) {
        List<Messages.Capability> capabilities = new ArrayList<>();
        capabilities.add(Messages.Capability.of("drive_steps"));
        capabilities.add(Messages.Capability.of("plugin_drive"));
        capabilities.add(Messages.Capability.of("clipboard"));
        if (facts.terminalIo) capabilities.add(Messages.Capability.of("terminal_io"));
        if (facts.clipboardIo) capabilities.add(Messages.Capability.of("clipboard_io"));
        Set<String> seen = new LinkedHashSet<>();
        for (String id : facts.availableActions) {
            if (id != null && !id.isEmpty() && seen.add("command:" + id)) capabilities.add(Messages.Capability.withId("command", id));
        }
        for (String id : facts.availableToolWindows) {
            if (id != null && !id.isEmpty() && seen.add("tool_window:" + id)) {
                capabilities.add(Messages.Capability.withId("tool_window", id));
            }
        }
        return capabilities;
    }

    public static Messages.Hello build(WindowFacts facts) {
        Messages.Hello hello = new Messages.Hello();
        hello.role = "plugin";
        hello.protocol = new Messages.VersionRange(Protocol.MIN_PROTOCOL_VERSION, Protocol.PROTOCOL_VERSION);
        hello.client = new Messages.ClientInfo(Protocol.CLIENT_NAME, facts.pluginVersion);
        hello.ide = new Messages.IdeInfo();
        hello.ide.product = ProductDetector.detect(facts.productCode, facts.platformPrefix, facts.appName);
        hello.ide.version = facts.ideVersion;
        hello.ide.appName = facts.appName;
        hello.ide.appHost = "desktop";
        hello.window = new Messages.WindowInfo();
        hello.window.pid = facts.pid;
        hello.window.parentPid = facts.parentPid;
        hello.window.workspaceFolders = new ArrayList<>(facts.workspaceFolders);
        hello.window.title = facts.title;
        hello.window.focused = facts.focused;
        hello.capabilities = capabilitiesFor(facts);
        return hello;
    }

    /** The protocol version the daemon chose must lie in this client's range. */
    public static boolean acceptsNegotiated(int negotiated) {
        return negotiated >= Protocol.MIN_PROTOCOL_VERSION && negotiated <= Protocol.PROTOCOL_VERSION;
    }

    /**
     * The version two ranges agree on — the highest inside both — or -1 when they do not
     * overlap or one is empty (the daemon's rule, docs/protocol.md "Handshake").
     */
    public static int negotiate(Messages.VersionRange ours, Messages.VersionRange theirs) {
        if (ours.min > ours.max || theirs.min > theirs.max) return -1;
        int high = Math.min(ours.max, theirs.max);
        int low = Math.max(ours.min, theirs.min);
        return high >= low ? high : -1;
    }
}
