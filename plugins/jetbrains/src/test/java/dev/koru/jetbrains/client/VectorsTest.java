// Replays the golden conversations protocol/vectors/*.ndjson (the files the Rust system tests replay against the daemon and the VS Code extension replays through its codec) through this client's codec and message types.
package dev.koru.jetbrains.client;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class VectorsTest {
    /** Plugin-side messages: what a plugin sends and what it receives. */
    private static final Set<String> PLUGIN_SENDS = Set.of("hello", "ack", "event", "terminals", "capabilities", "clipboard.result", "terminal.io.result", "ping", "pong", "bye");
    private static final Set<String> PLUGIN_RECEIVES = Set.of("welcome", "error", "ping", "pong", "bye", "drive", "cancel", "terminal.io");

    static List<Path> files() throws IOException {
        try (Stream<Path> listing = Files.list(TestPaths.root().resolve("protocol").resolve("vectors"))) {
            return listing.filter(p -> p.getFileName().toString().endsWith(".ndjson")).sorted().collect(Collectors.toList());
        }
    }

    static List<JsonObject> steps(Path file) throws IOException {
        List<JsonObject> steps = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            if (!line.isBlank()) steps.add(JsonParser.parseString(line).getAsJsonObject());
        }
        return steps;
    }

    static JsonElement substitute(JsonElement value) {
        if (value.isJsonPrimitive() && value.getAsJsonPrimitive().isString()) {
            return value.getAsString().equals("$WORKSPACE") ? new JsonPrimitive("/home/user/repo") : value;
        }
        if (value.isJsonArray()) {
            JsonArray out = new JsonArray();
            value.getAsJsonArray().forEach(v -> out.add(substitute(v)));
            return out;
        }
        if (value.isJsonObject()) {
            JsonObject out = new JsonObject();
            value.getAsJsonObject().entrySet().forEach(e -> out.add(e.getKey(), substitute(e.getValue())));
            return out;
        }
        return value;
    }

    /** The next `expect` on the same connection after step {@code index}. */
    static JsonObject nextExpect(List<JsonObject> all, int index) {
        JsonElement conn = all.get(index).get("conn");
        for (int i = index + 1; i < all.size(); i++) {
            JsonObject step = all.get(i);
            if (conn != null && conn.equals(step.get("conn")) && step.has("expect")) return step.getAsJsonObject("expect");
        }
        return null;
    }

    /** Error codes a client's codec can tell on its own (envelope level, before any daemon logic). */
    static String envelopeLevel(JsonObject expected) {
        if (expected == null || !"error".equals(string(expected, "type"))) return null;
        String code = string(expected, "code");
        String field = expected.has("location") && expected.get("location").isJsonObject()
                ? string(expected.getAsJsonObject("location"), "field") : null;
        if ("malformed".equals(code) || "unknown_type".equals(code)) return code;
        if ("invalid_message".equals(code) && ("v".equals(field) || "id".equals(field) || "type".equals(field))) return code;
        return null;
    }

    static String string(JsonObject object, String key) {
        JsonElement value = object.get(key);
        return value != null && value.isJsonPrimitive() ? value.getAsString() : null;
    }

    /** True when a pattern holds a placeholder string (`$any`, `$capture:…`, `$name`) somewhere. */
    static boolean hasPlaceholder(JsonElement value) {
        if (value.isJsonPrimitive()) return value.getAsJsonPrimitive().isString() && value.getAsString().startsWith("$");
        if (value.isJsonArray()) {
            for (JsonElement v : value.getAsJsonArray()) if (hasPlaceholder(v)) return true;
            return false;
        }
        if (value.isJsonObject()) {
            for (Map.Entry<String, JsonElement> e : value.getAsJsonObject().entrySet()) if (hasPlaceholder(e.getValue())) return true;
        }
        return false;
    }

    /** Removes fields whose value is a placeholder slot we cannot type (`$any` for a number, `$absent`). */
    static JsonObject typeable(JsonObject pattern) {
        JsonObject out = new JsonObject();
        for (Map.Entry<String, JsonElement> e : pattern.entrySet()) {
            JsonElement v = e.getValue();
            if (v.isJsonPrimitive() && v.getAsJsonPrimitive().isString()
                    && (v.getAsString().equals("$any") || v.getAsString().equals("$absent"))) continue;
            out.add(e.getKey(), v.isJsonObject() ? typeable(v.getAsJsonObject()) : v);
        }
        return out;
    }

    @Test
    void thereAreGoldenVectorsToReplay() throws IOException {
        assertTrue(files().size() >= 5, "found " + files());
    }

    @TestFactory
    Stream<DynamicTest> everyVectorFile() throws IOException {
        return files().stream().map(file -> DynamicTest.dynamicTest("vector " + file.getFileName(), () -> replay(file)));
    }

    private void replay(Path file) throws IOException {
        List<JsonObject> all = steps(file);
        String name = file.getFileName().toString();
        Map<String, String> roles = new HashMap<>();
        int pluginLines = 0;
        for (int index = 0; index < all.size(); index++) {
            JsonObject step = all.get(index);
            String where = name + ":" + (index + 1);
            String conn = string(step, "conn");
            if (step.has("send")) {
                JsonElement sentElement = substitute(step.get("send"));
                byte[] encoded = Codec.encodeLine(sentElement);
                assertEquals('\n', encoded[encoded.length - 1], where + ": one line");
                Codec.Decoded decoded = Codec.decodeLine(java.util.Arrays.copyOf(encoded, encoded.length - 1));
                JsonObject expected = nextExpect(all, index);
                String expectedError = envelopeLevel(expected);
                if (expectedError != null) {
                    assertFalse(decoded.ok(), where + ": should be refused as " + expectedError);
                    assertEquals(expectedError, decoded.error.code, where);
                } else if (decoded.ok()) {
                    assertEquals(sentElement, decoded.envelope, where + ": round trip");
                    String type = decoded.type();
                    if ("hello".equals(type)) roles.put(conn, string(decoded.envelope, "role"));
                    boolean refused = expected != null && "error".equals(string(expected, "type"));
                    if ("plugin".equals(roles.get(conn)) && PLUGIN_SENDS.contains(type) && !refused) {
                        // The plugin's own types encode exactly what the vector sends.
                        Object typed = decoded.as(Messages.pluginClassFor(type));
                        assertEquals(sentElement, Codec.toTree(typed), where + ": typed round trip of " + type);
                        pluginLines++;
                    }
                }
            }
            if (step.has("send_raw") || step.has("send_hex")) {
                byte[] bytes = step.has("send_raw")
                        ? step.get("send_raw").getAsString().getBytes(StandardCharsets.UTF_8)
                        : HexFormat.of().parseHex(step.get("send_hex").getAsString());
                Codec.Decoded decoded = Codec.decodeLine(bytes);
                JsonObject expected = nextExpect(all, index);
                assertFalse(decoded.ok(), where + ": a bad line must not decode");
                assertNotNull(expected, where);
                assertEquals(string(expected, "code"), decoded.error.code, where);
                JsonObject location = expected.has("location") ? expected.getAsJsonObject("location") : null;
                if (location != null && location.has("column") && location.get("column").isJsonPrimitive()
                        && location.get("column").getAsJsonPrimitive().isNumber() && step.has("send_hex")) {
                    assertEquals(location.get("column").getAsInt(), decoded.error.column, where + ": UTF-8 offset");
                }
                String message = string(expected, "message");
                if (message != null && message.startsWith("the line is not valid UTF-8")) {
                    assertEquals(message, decoded.error.message, where);
                }
            }
            if (step.has("send_repeat")) {
                JsonObject repeat = step.getAsJsonObject("send_repeat");
                String big = repeat.get("prefix").getAsString() + repeat.get("text").getAsString().repeat(repeat.get("times").getAsInt())
                        + repeat.get("suffix").getAsString() + "\n";
                LineSplitter splitter = new LineSplitter();
                assertThrows(LineSplitter.LineTooLongException.class, () -> splitter.push(big.getBytes(StandardCharsets.UTF_8)),
                        where + ": over-long line");
                assertEquals("line_too_long", string(nextExpect(all, index), "code"), where);
            }
            if (step.has("expect")) {
                JsonObject expect = step.getAsJsonObject("expect");
                String type = string(expect, "type");
                assertTrue(Protocol.KNOWN_MESSAGE_TYPES.contains(type), where + ": the daemon sends " + type + ", unknown to this client");
                if ("plugin".equals(roles.get(conn)) && PLUGIN_RECEIVES.contains(type)) {
                    // What the daemon sends a plugin decodes into the plugin's types.
                    JsonObject pattern = typeable(expect);
                    Object typed = Protocol.GSON.fromJson(pattern, Messages.pluginClassFor(type));
                    assertNotNull(typed, where);
                    JsonObject back = Codec.toTree(typed);
                    for (String key : new String[] {"id", "type", "drive_id", "prompt", "code", "reason", "route"}) {
                        if (pattern.has(key) && !hasPlaceholder(pattern.get(key))) {
                            assertEquals(pattern.get(key), back.get(key), where + ": " + key + " of " + type);
                        }
                    }
                    if ("drive".equals(type) && pattern.has("steps")) {
                        assertEquals(pattern.get("steps"), back.get("steps"), where + ": steps of a drive");
                    }
                    pluginLines++;
                }
            }
        }
        if (name.startsWith("drive") || name.startsWith("handshake.")) {
            assertTrue(pluginLines > 0, name + ": no plugin-side line was checked");
        }
    }

    @Test
    void theClientKnowsExactlyTheMessageTypesOfTheSchema() throws IOException {
        JsonObject schema = JsonParser.parseString(Files.readString(TestPaths.root().resolve("docs").resolve("protocol.schema.json")))
                .getAsJsonObject();
        Set<String> types = new TreeSet<>();
        for (JsonElement branch : schema.getAsJsonArray("oneOf")) {
            types.add(branch.getAsJsonObject().getAsJsonObject("properties").getAsJsonObject("type").get("const").getAsString());
        }
        assertEquals(types, new TreeSet<>(Protocol.KNOWN_MESSAGE_TYPES));
    }

    @Test
    void thePluginSideTypesHaveTheSchemasRequiredFields() throws IOException {
        JsonObject schema = JsonParser.parseString(Files.readString(TestPaths.root().resolve("docs").resolve("protocol.schema.json")))
                .getAsJsonObject();
        JsonObject defs = schema.getAsJsonObject("$defs");
        Map<String, Class<?>> mirrors = Map.ofEntries(
                Map.entry("DriveRequest", Messages.Drive.class), Map.entry("DriveStep", Messages.DriveStep.class),
                Map.entry("Blocker", Messages.Blocker.class), Map.entry("Hello", Messages.Hello.class),
                Map.entry("Welcome", Messages.Welcome.class), Map.entry("IdeInfo", Messages.IdeInfo.class),
                Map.entry("WindowInfo", Messages.WindowInfo.class), Map.entry("ClientInfo", Messages.ClientInfo.class),
                Map.entry("WindowStorage", Messages.WindowStorage.class), Map.entry("ChatReadiness", Messages.ChatReadiness.class),
                Map.entry("Ack", Messages.Ack.class), Map.entry("PluginEventKind", Messages.PluginEventKind.class),
                Map.entry("ChatOutcome", Messages.ChatOutcome.class));
        for (Map.Entry<String, Class<?>> mirror : mirrors.entrySet()) {
            JsonObject def = defs.getAsJsonObject(mirror.getKey());
            assertNotNull(def, mirror.getKey());
            Set<String> fields = new TreeSet<>();
            for (Class<?> c = mirror.getValue(); c != null && c != Object.class; c = c.getSuperclass()) {
                for (java.lang.reflect.Field f : c.getDeclaredFields()) {
                    fields.add(com.google.gson.FieldNamingPolicy.LOWER_CASE_WITH_UNDERSCORES.translateName(f));
                }
            }
            // A tagged union (`oneOf`, as PluginEventKind) is mirrored by one class with every variant's fields.
            List<JsonObject> variants = new ArrayList<>();
            if (def.has("oneOf")) def.getAsJsonArray("oneOf").forEach(v -> variants.add(v.getAsJsonObject()));
            else variants.add(def);
            for (JsonObject variant : variants) {
                for (String property : variant.getAsJsonObject("properties").keySet()) {
                    assertTrue(fields.contains(property), mirror.getKey() + "." + property + " has no field in " + mirror.getValue().getSimpleName());
                }
            }
        }
    }

    @Test
    void thePluginsNewEventsAndEvidenceEncodeAsTheSchemaSays() {
        assertEquals(JsonParser.parseString("{\"v\":1,\"type\":\"event\",\"event\":{\"kind\":\"chat_readiness\",\"ready\":false,"
                        + "\"reason\":\"signed out\"}}"),
                Codec.toTree(new Messages.Event(Messages.PluginEventKind.chatReadiness(false, "signed out"))));
        assertEquals(JsonParser.parseString("{\"v\":1,\"type\":\"event\",\"event\":{\"kind\":\"chat_readiness\",\"ready\":true}}"),
                Codec.toTree(new Messages.Event(Messages.PluginEventKind.chatReadiness(true, null))));
        assertEquals(JsonParser.parseString("{\"v\":1,\"type\":\"event\",\"event\":{\"kind\":\"chat_outcome\",\"drive_id\":\"d_1\","
                        + "\"outcome\":{\"kind\":\"needs_input\",\"input\":\"permission\",\"detail\":\"Run it?\"}}}"),
                Codec.toTree(new Messages.Event(Messages.PluginEventKind.chatOutcome("d_1",
                        Messages.ChatOutcome.needsInput("permission", "Run it?")))));
        assertEquals(JsonParser.parseString("{\"kind\":\"reply_completed\",\"excerpt\":\"Done.\",\"length\":5}"),
                Codec.toTree(Messages.ChatOutcome.replyCompleted("Done.", 5L)));
        assertEquals(JsonParser.parseString("{\"kind\":\"failed\",\"detail\":\"quota\"}"), Codec.toTree(Messages.ChatOutcome.failed("quota")));
        assertEquals(JsonParser.parseString("{\"kind\":\"cancelled\"}"), Codec.toTree(Messages.ChatOutcome.cancelled()));
        // Every SubmitEvidence constant is a value of the schema's enum.
        JsonObject schema;
        try {
            schema = JsonParser.parseString(Files.readString(TestPaths.root().resolve("docs").resolve("protocol.schema.json"))).getAsJsonObject();
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        Set<String> values = new TreeSet<>();
        schema.getAsJsonObject("$defs").getAsJsonObject("SubmitEvidence").getAsJsonArray("oneOf")
                .forEach(v -> values.add(v.getAsJsonObject().get("const").getAsString()));
        assertEquals(values, new TreeSet<>(List.of(Messages.SubmitEvidence.CHAT_RESPONDED, Messages.SubmitEvidence.CHAT_RUNNING,
                Messages.SubmitEvidence.COMMAND_RETURNED, Messages.SubmitEvidence.KEY_PRESSED,
                Messages.SubmitEvidence.AGENT_HOOK, Messages.SubmitEvidence.AGENT_TRANSCRIPT)));
    }

    @Test
    void encodedLinesAreUtf8JsonWithOneNewline() {
        Messages.Ack ack = new Messages.Ack("d_1", "pasted", null);
        byte[] line = Codec.encodeLine(ack);
        assertEquals('\n', line[line.length - 1]);
        assertEquals(1, new String(line, StandardCharsets.UTF_8).split("\n", -1).length - 1, "exactly one newline");
        assertEquals(JsonParser.parseString("{\"v\":1,\"type\":\"ack\",\"drive_id\":\"d_1\",\"stage\":\"pasted\"}"),
                JsonParser.parseString(new String(line, StandardCharsets.UTF_8)));
    }
}
