// The plugin's own version, from the properties file the build writes into the jar (no plugin-manager API needed).
package dev.koru.jetbrains.ide;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

final class PluginInfo {
    private PluginInfo() {}

    static String version() {
        try (InputStream in = PluginInfo.class.getResourceAsStream("/dev/koru/jetbrains/plugin.properties")) {
            if (in == null) return "0.0.0";
            Properties properties = new Properties();
            properties.load(in);
            return properties.getProperty("version", "0.0.0");
        } catch (IOException e) {
            return "0.0.0";
        }
    }
}
