// Where the daemon's socket is, by the daemon's own rules (daemon/src/paths.rs): the plugin setting, then $KORU_SOCKET, then $XDG_RUNTIME_DIR/koru/koru.sock, then /tmp/koru-$UID/koru.sock.
package dev.koru.jetbrains.client;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;

/** Socket discovery; pure given its input so tests can drive it. */
public final class SocketDiscovery {
    private SocketDiscovery() {}

    /** The socket path and which rule chose it (shown in the status widget and the log). */
    public static final class Location {
        public final Path path;
        /** {@code setting}, {@code KORU_SOCKET}, {@code XDG_RUNTIME_DIR} or {@code default}. */
        public final String source;

        public Location(Path path, String source) {
            this.path = path;
            this.source = source;
        }

        @Override
        public String toString() {
            return path + " (" + source + ")";
        }
    }

    /** Finds the socket: {@code setting} (blank = unset), then the environment, then the per-user default. */
    public static Location locate(String setting, Map<String, String> env, long uid, String home) {
        String configured = setting == null ? "" : setting.trim();
        if (!configured.isEmpty()) return new Location(Paths.get(expandHome(configured, home)), "setting");
        String explicit = env.get("KORU_SOCKET");
        if (explicit != null && !explicit.isEmpty()) return new Location(Paths.get(explicit), "KORU_SOCKET");
        String runtime = env.get("XDG_RUNTIME_DIR");
        if (runtime != null && !runtime.isEmpty()) return new Location(Paths.get(runtime, "koru", "koru.sock"), "XDG_RUNTIME_DIR");
        return new Location(Paths.get("/tmp/koru-" + uid, "koru.sock"), "default");
    }

    /** Discovery for this process: its environment, uid and home. */
    public static Location locate(String setting) {
        return locate(setting, System.getenv(), currentUid(), System.getProperty("user.home"));
    }

    /** Expands a leading {@code ~} the way a person writing the setting means it. */
    static String expandHome(String value, String home) {
        if (value.equals("~")) return home;
        if (value.startsWith("~/")) return Paths.get(home, value.substring(2)).toString();
        return value;
    }

    /** The real uid of this process: the owner of /proc/self on Linux, else the unix attribute of the home directory. */
    public static long currentUid() {
        for (Path probe : new Path[] {Paths.get("/proc/self"), Paths.get(System.getProperty("user.home", "/"))}) {
            try {
                Object uid = Files.getAttribute(probe, "unix:uid");
                if (uid instanceof Integer) return (Integer) uid;
            } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
                // try the next probe
            }
        }
        return 0;
    }
}
