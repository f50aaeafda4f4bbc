// Negotiation tests: the hello this plugin sends (product, version range, capabilities), the version-range rule, and capability kinds this client does not know kept verbatim.
package dev.koru.jetbrains.client;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class NegotiationTest {
    private static HelloBuilder.WindowFacts facts() {
        HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
        facts.pluginVersion = "0.1.0";
        facts.ideVersion = "2024.3.1";
        facts.appName = "PyCharm 2024.3.1";
        facts.productCode = "PY";
        facts.workspaceFolders = List.of("/home/me/repo");
        facts.pid = 4242;
        facts.parentPid = 1L;
        facts.focused = true;
        facts.availableActions = List.of("copilot.chat.show", "copilot.chat.show");
        facts.availableToolWindows = List.of("AIAssistant");
        return facts;
    }

    @Test
    void theHelloCarriesProductRangeWindowAndCapabilities() {
        JsonObject hello = Codec.toTree(HelloBuilder.build(facts()));
        assertEquals("hello", hello.get("type").getAsString());
        assertEquals(1, hello.get("v").getAsInt());
        assertEquals("plugin", hello.get("role").getAsString());
        assertEquals(JsonParser.parseString("{\"min\":1,\"max\":1}"), hello.get("protocol"));
        assertEquals("koru-jetbrains", hello.getAsJsonObject("client").get("name").getAsString());
        assertEquals("jetbrains-pycharm", hello.getAsJsonObject("ide").get("product").getAsString());
        assertEquals("PyCharm 2024.3.1", hello.getAsJsonObject("ide").get("app_name").getAsString());
        assertEquals(4242, hello.getAsJsonObject("window").get("pid").getAsInt());
        assertEquals("/home/me/repo", hello.getAsJsonObject("window").getAsJsonArray("workspace_folders").get(0).getAsString());
        assertTrue(hello.getAsJsonObject("window").get("focused").getAsBoolean());
        List<String> caps = HelloBuilder.build(facts()).capabilities.stream().map(Object::toString).collect(Collectors.toList());
        assertEquals(List.of("drive_steps", "plugin_drive", "clipboard", "command:copilot.chat.show", "tool_window:AIAssistant"), caps);
        // The hello itself passes the envelope checks.
        byte[] line = Codec.encodeLine(HelloBuilder.build(facts()));
        assertTrue(Codec.decodeLine(java.util.Arrays.copyOf(line, line.length - 1)).ok());
    }

    @Test
    void theVersionRangeRuleMatchesTheDaemons() {
        Messages.VersionRange ours = new Messages.VersionRange(1, 1);
        assertEquals(1, HelloBuilder.negotiate(ours, new Messages.VersionRange(1, 3)));
        assertEquals(2, HelloBuilder.negotiate(new Messages.VersionRange(1, 2), new Messages.VersionRange(2, 5)));
        assertEquals(-1, HelloBuilder.negotiate(ours, new Messages.VersionRange(2, 3)), "no overlap");
        assertEquals(-1, HelloBuilder.negotiate(ours, new Messages.VersionRange(3, 2)), "empty range");
        assertTrue(HelloBuilder.acceptsNegotiated(1));
        assertFalse(HelloBuilder.acceptsNegotiated(2), "a welcome naming a version outside our range is refused");
        assertFalse(HelloBuilder.acceptsNegotiated(0));
    }

    @Test
    void unknownCapabilityKindsAreToleratedAndKeptVerbatim() {
        String line = "{\"v\":1,\"type\":\"hello\",\"role\":\"plugin\",\"protocol\":{\"min\":1,\"max\":1},"
                + "\"client\":{\"name\":\"x\",\"version\":\"1\"},\"capabilities\":[{\"kind\":\"native_send\"},"
                + "{\"kind\":\"teleport\",\"range\":3},{\"kind\":\"tool_window\",\"id\":\"AIAssistant\"}]}";
        Codec.Decoded decoded = Codec.decodeLine(line.getBytes(StandardCharsets.UTF_8));
        assertTrue(decoded.ok());
        Messages.Hello hello = decoded.as(Messages.Hello.class);
        assertEquals(3, hello.capabilities.size());
        Messages.Capability unknown = hello.capabilities.get(1);
        assertEquals("teleport", unknown.kind);
        assertFalse(unknown.isKnownKind());
        assertTrue(hello.capabilities.get(2).isKnownKind());
        assertEquals(JsonParser.parseString(line), Codec.toTree(hello), "re-encoded verbatim");
    }

    @Test
    void aWelcomeWithFieldsThisClientDoesNotKnowDecodes() {
        String line = "{\"v\":1,\"type\":\"welcome\",\"protocol\":1,\"session_id\":\"s_1\",\"daemon\":{\"version\":\"9.9\",\"x\":1},"
                + "\"heartbeat_ms\":10000,\"max_line_bytes\":1048576,\"new_field\":{\"a\":[1]}}";
        Messages.Welcome welcome = Codec.decodeLine(line.getBytes(StandardCharsets.UTF_8)).as(Messages.Welcome.class);
        assertEquals("s_1", welcome.sessionId);
        assertEquals(10000L, welcome.heartbeatMs);
        assertEquals("9.9", welcome.daemon.version);
    }
}
