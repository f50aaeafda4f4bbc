// Socket discovery by the daemon's rules (setting, KORU_SOCKET, XDG_RUNTIME_DIR, /tmp/koru-$UID) and product detection from build info.
package dev.koru.jetbrains.client;

import org.junit.jupiter.api.Test;

import java.nio.file.Paths;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

class DiscoveryAndProductTest {
    @Test
    void discoveryFollowsTheDaemonsOrder() {
        Map<String, String> env = Map.of("KORU_SOCKET", "/run/k.sock", "XDG_RUNTIME_DIR", "/run/user/1000");
        assertEquals(Paths.get("/home/me/k.sock"), SocketDiscovery.locate(" ~/k.sock ", env, 1000, "/home/me").path);
        assertEquals("setting", SocketDiscovery.locate("/x.sock", env, 1000, "/h").source);
        assertEquals(Paths.get("/run/k.sock"), SocketDiscovery.locate("", env, 1000, "/h").path);
        assertEquals("KORU_SOCKET", SocketDiscovery.locate(null, env, 1000, "/h").source);
        SocketDiscovery.Location xdg = SocketDiscovery.locate(null, Map.of("XDG_RUNTIME_DIR", "/run/user/1000"), 1000, "/h");
        assertEquals(Paths.get("/run/user/1000/koru/koru.sock"), xdg.path);
        assertEquals("XDG_RUNTIME_DIR", xdg.source);
        SocketDiscovery.Location fallback = SocketDiscovery.locate(null, Map.of("KORU_SOCKET", ""), 1234, "/h");
        assertEquals(Paths.get("/tmp/koru-1234/koru.sock"), fallback.path);
        assertEquals("default", fallback.source);
    }

    @Test
    void productsComeFromTheBuildsProductCode() {
        assertEquals("jetbrains-idea", ProductDetector.detect("IU", "idea", "IntelliJ IDEA 2024.3"));
        assertEquals("jetbrains-idea", ProductDetector.detect("IC", "Idea", "IntelliJ IDEA Community Edition"));
        assertEquals("jetbrains-pycharm", ProductDetector.detect("PC", "PyCharmCore", ""));
        assertEquals("jetbrains-webstorm", ProductDetector.detect("WS", "", ""));
        assertEquals("jetbrains-goland", ProductDetector.detect("GO", "", ""));
        assertEquals("jetbrains-rider", ProductDetector.detect("RD", "", ""));
        assertEquals("jetbrains-android-studio", ProductDetector.detect("AI", "AndroidStudio", "Android Studio"));
        assertEquals("jetbrains-rustrover", ProductDetector.detect(ProductDetector.productCodeOf("RR-243.22562.230"), "", ""));
    }

    @Test
    void withoutAProductCodeThePlatformPrefixOrNameDecides() {
        assertEquals("jetbrains-pycharm", ProductDetector.detect("", "Python", ""));
        assertEquals("jetbrains-rubymine", ProductDetector.detect(null, "Ruby", null));
        assertEquals("jetbrains-clion", ProductDetector.detect("", "", "CLion 2024.2"));
        assertEquals("jetbrains-xy", ProductDetector.detect("XY", "", "Some New IDE"), "a new product keeps its code");
        assertEquals("", ProductDetector.productCodeOf("243.1"));
    }
}
