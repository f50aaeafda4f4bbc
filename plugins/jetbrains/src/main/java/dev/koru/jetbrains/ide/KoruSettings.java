// The plugin's settings (socket path, extra allowed commands), kept application-wide in PropertiesComponent.
package dev.koru.jetbrains.ide;

import com.intellij.ide.util.PropertiesComponent;
import dev.koru.jetbrains.client.Catalog;

import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/** Read and written on the EDT (the settings page) and read from the plugin's threads (plain string values). */
public final class KoruSettings {
    private KoruSettings() {}

    static final String SOCKET_PATH = "dev.koru.jetbrains.socketPath";
    static final String ALLOWED_COMMANDS = "dev.koru.jetbrains.allowedCommands";

    /** The socket path setting; blank means the daemon's own rules. */
    public static String socketPath() {
        String value = PropertiesComponent.getInstance().getValue(SOCKET_PATH);
        return value == null ? "" : value;
    }

    public static void setSocketPath(String value) {
        PropertiesComponent.getInstance().setValue(SOCKET_PATH, value == null ? "" : value.trim());
    }

    /** Extra action ids the user allows drives to run, one per line or comma-separated. */
    public static List<String> extraAllowedCommands() {
        String value = PropertiesComponent.getInstance().getValue(ALLOWED_COMMANDS);
        return parseList(value);
    }

    public static void setExtraAllowedCommands(String text) {
        PropertiesComponent.getInstance().setValue(ALLOWED_COMMANDS, String.join("\n", parseList(text)));
    }

    static List<String> parseList(String text) {
        if (text == null) return List.of();
        return Arrays.stream(text.split("[,\\n]")).map(String::trim).filter(s -> !s.isEmpty()).distinct().collect(Collectors.toList());
    }

    /** The allow-list: the registry catalog's step commands plus the setting. */
    public static Set<String> allowedCommands() {
        Set<String> allowed = new LinkedHashSet<>(Catalog.COMMANDS);
        allowed.addAll(extraAllowedCommands());
        return allowed;
    }
}
