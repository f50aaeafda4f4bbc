// The protocol messages a plugin sends and receives, mirroring docs/protocol.schema.json (field names are the schema's, camelCased; Gson maps them back to snake_case).
package dev.koru.jetbrains.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.TypeAdapter;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonWriter;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Plain data classes for the plugin's side of protocol v1. Every message is an envelope
 * ({@code v}, {@code type}, optional {@code id}) with its own fields at the top level.
 * Unknown fields are ignored on decode; optional fields left {@code null} are not written.
 */
public final class Messages {
    private Messages() {}

    /** Fields every line has. */
    public static class Envelope {
        public Integer v = Protocol.PROTOCOL_VERSION;
        public String type;
        /** An integer or a string chosen by a request's sender; {@code null} when absent. */
        public JsonElement id;
    }

    /** {@code protocol: {min, max}}: an inclusive range of versions. */
    public static final class VersionRange {
        public int min;
        public int max;

        public VersionRange() {}

        public VersionRange(int min, int max) {
            this.min = min;
            this.max = max;
        }
    }

    /** {@code client: {name, version}}. */
    public static final class ClientInfo {
        public String name;
        public String version;

        public ClientInfo() {}

        public ClientInfo(String name, String version) {
            this.name = name;
            this.version = version;
        }
    }

    /** {@code ide}: the IDE a plugin runs in. */
    public static final class IdeInfo {
        /** {@code jetbrains-<product>} (see {@link ProductDetector}). */
        public String product;
        public String version;
        public String appName;
        public String uriScheme;
        public String appHost;
    }

    /** {@code window}: the IDE window (project frame) a plugin lives in. */
    public static final class WindowInfo {
        public Long pid;
        public Long parentPid;
        public List<String> workspaceFolders;
        public String title;
        public Boolean focused;
        public String windowId;
        /** Every folder as a URI ({@code file:///…}, {@code vscode-remote://ssh-remote+box/…}); optional. */
        public List<String> workspaceUris;
        /** The remote the window is connected to ({@code ssh-remote}, {@code wsl}, …); absent for a local window. */
        public String remoteName;
        /** Where the IDE keeps this window's storage, so the daemon can observe the chat stores it writes; optional. */
        public WindowStorage storage;
    }

    /** {@code window.storage}: absolute local paths of the window's workspace and global storage folders. */
    public static final class WindowStorage {
        public String workspaceStorage;
        public String globalStorage;

        public WindowStorage() {}

        public WindowStorage(String workspaceStorage, String globalStorage) {
            this.workspaceStorage = workspaceStorage;
            this.globalStorage = globalStorage;
        }
    }

    /** {@code hello.chat}: whether the window's chat can take a request now, and why not. */
    public static final class ChatReadiness {
        public boolean ready;
        /** Why not, for a person (and what to do), when {@code ready} is false. */
        public String reason;

        public ChatReadiness() {}

        public ChatReadiness(boolean ready, String reason) {
            this.ready = ready;
            this.reason = reason;
        }
    }

    /**
     * A capability tagged by {@code kind}: {@code native_send}, {@code plugin_drive},
     * {@code drive_steps}, {@code chat_events}, {@code clipboard}, {@code command {id}},
     * {@code tool_window {id}}, or a kind this client does not know, kept verbatim.
     */
    public static final class Capability {
        public final String kind;
        public final String id;
        /** The whole object as received or built, so unknown kinds and fields survive a round trip. */
        public final JsonObject raw;

        private Capability(JsonObject raw) {
            this.raw = raw;
            this.kind = raw.has("kind") && raw.get("kind").isJsonPrimitive() ? raw.get("kind").getAsString() : "";
            this.id = raw.has("id") && raw.get("id").isJsonPrimitive() ? raw.get("id").getAsString() : null;
        }

        public static Capability of(String kind) {
            JsonObject raw = new JsonObject();
            raw.addProperty("kind", kind);
            return new Capability(raw);
        }

        public static Capability withId(String kind, String id) {
            JsonObject raw = new JsonObject();
            raw.addProperty("kind", kind);
            raw.addProperty("id", id);
            return new Capability(raw);
        }

        public static Capability fromJson(JsonObject raw) {
            return new Capability(raw.deepCopy());
        }

        /** True for the kinds protocol v1 defines. */
        public boolean isKnownKind() {
            return List.of("native_send", "plugin_drive", "drive_steps", "chat_events", "clipboard", "terminal_io", "command", "tool_window")
                    .contains(kind);
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Capability && ((Capability) other).raw.equals(raw);
        }

        @Override
        public int hashCode() {
            return raw.hashCode();
        }

        @Override
        public String toString() {
            return id == null ? kind : kind + ":" + id;
        }
    }

    /** Writes and reads {@link Capability} as its raw object. */
    static final class CapabilityAdapter extends TypeAdapter<Capability> {
        @Override
        public void write(JsonWriter out, Capability value) throws IOException {
            if (value == null) {
                out.nullValue();
                return;
            }
            com.google.gson.internal.Streams.write(value.raw, out);
        }

        @Override
        public Capability read(JsonReader in) throws IOException {
            JsonElement element = JsonParser.parseReader(in);
            if (!element.isJsonObject()) {
                throw new com.google.gson.JsonParseException("a capability must be an object with `kind`");
            }
            return Capability.fromJson(element.getAsJsonObject());
        }
    }

    /** {@code hello}: the first line every client sends. */
    public static final class Hello extends Envelope {
        public String role;
        public VersionRange protocol;
        public ClientInfo client;
        public IdeInfo ide;
        public WindowInfo window;
        public List<Capability> capabilities;
        /** Plugins: whether the window's chat can take a request now; absent when the plugin cannot tell (drives are sent as before). */
        public ChatReadiness chat;
        /** Controllers: {@code observe} holds the connection to reading; plugins leave it absent. */
        public String scope;

        public Hello() {
            type = "hello";
        }
    }

    /** {@code daemon: {version}} inside {@code welcome}. */
    public static final class DaemonInfo {
        public String version;
    }

    /** {@code welcome}: the daemon's answer to an acceptable hello; its {@code id} is the hello's (absent from daemons older than that rule). */
    public static final class Welcome extends Envelope {
        public Integer protocol;
        public String sessionId;
        public DaemonInfo daemon;
        public Long heartbeatMs;
        public Long maxLineBytes;
        /** The scope the daemon holds the connection to, when the hello declared one. */
        public String scope;
    }

    /** {@code location} of an error. */
    public static final class ErrorLocation {
        public Long line;
        public Long column;
        public String field;
    }

    /** {@code error}. */
    public static final class ErrorMessage extends Envelope {
        public String code;
        public String message;
        public JsonElement ref;
        public VersionRange supported;
        public ErrorLocation location;
    }

    /** {@code ping} and {@code pong}. */
    public static final class Ping extends Envelope {
        public Ping() {}

        public Ping(String type, JsonElement id) {
            this.type = type;
            this.id = id;
        }
    }

    /** {@code bye}. */
    public static final class Bye extends Envelope {
        public String reason;

        public Bye() {
            type = "bye";
        }

        public Bye(String reason) {
            this();
            this.reason = reason;
        }
    }

    /** {@code options} of a drive. */
    public static final class DriveOptions {
        public boolean submit = true;
        public boolean newChat;
        public Long timeoutMs;
        /** {@code queue} or {@code fail}. */
        public String busy;
    }

    /** One step of a drive: an IDE command or action id with arguments, and the stage it proves. */
    public static final class DriveStep {
        public String command;
        public List<JsonElement> args;
        /** {@code received}, {@code focused}, {@code pasted}, {@code submitted}. */
        public String proves;

        public DriveStep() {}

        public DriveStep(String command, List<JsonElement> args, String proves) {
            this.command = command;
            this.args = args;
            this.proves = proves;
        }
    }

    /** {@code drive} (daemon → plugin): deliver this prompt, ack every stage. */
    public static final class Drive extends Envelope {
        public String driveId;
        public String prompt;
        public DriveOptions options;
        /** {@code native_send} or {@code plugin_drive}. */
        public String route;
        public List<DriveStep> steps;
    }

    /** {@code cancel} (daemon → plugin). */
    public static final class Cancel extends Envelope {
        public String driveId;
        public String reason;
    }

    /** Why a drive could not go on. */
    public static final class Blocker {
        public String code;
        public String detail;

        public Blocker() {}

        public Blocker(String code, String detail) {
            this.code = code;
            this.detail = detail;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Blocker && Objects.equals(((Blocker) other).code, code)
                    && Objects.equals(((Blocker) other).detail, detail);
        }

        @Override
        public int hashCode() {
            return Objects.hash(code, detail);
        }

        @Override
        public String toString() {
            return code + ": " + detail;
        }
    }

    /** The values of {@code ack.evidence}: what proves a {@code submitted} ack (docs/protocol.md). */
    public static final class SubmitEvidence {
        private SubmitEvidence() {}

        /** The chat's own response ended, or paused for the user, before the ack. */
        public static final String CHAT_RESPONDED = "chat_responded";
        /** The chat was still answering, with no refusal, when the plugin stopped waiting. */
        public static final String CHAT_RUNNING = "chat_running";
        /** Only the IDE action or key press returned: nothing from the chat confirmed it took the prompt. */
        public static final String COMMAND_RETURNED = "command_returned";
        /** The daemon pressed the submit key into a verified window (never sent by a plugin). */
        public static final String KEY_PRESSED = "key_pressed";
        /** A terminal agent's own prompt-submit hook reported the prompt (never sent by a plugin). */
        public static final String AGENT_HOOK = "agent_hook";
        /** A terminal agent's own transcript or prompt history recorded the prompt (never sent by a plugin). */
        public static final String AGENT_TRANSCRIPT = "agent_transcript";
    }

    /** {@code ack} (plugin → daemon): one stage of a drive. */
    public static final class Ack extends Envelope {
        public String driveId;
        public String stage;
        public Blocker blocker;
        /** With {@code submitted}: one of {@link SubmitEvidence} (absent: the daemon records {@code command_returned}). */
        public String evidence;
        /**
         * With {@code failed} and blocker {@code chat_refused}: {@code not_ready} when the chat refused
         * before taking the prompt because it is not ready yet (the daemon sends the prompt again).
         */
        public String refusal;

        public Ack() {
            type = "ack";
        }

        public Ack(String driveId, String stage, Blocker blocker) {
            this(driveId, stage, blocker, null);
        }

        public Ack(String driveId, String stage, Blocker blocker, String evidence) {
            this();
            this.driveId = driveId;
            this.stage = stage;
            this.blocker = blocker;
            this.evidence = evidence;
        }
    }

    /**
     * {@code event.outcome} of a {@code chat_outcome} event, tagged by {@code kind}:
     * {@code reply_completed {excerpt?, length?}}, {@code needs_input {input, detail?}}
     * ({@code input}: {@code question}, {@code permission}, {@code tool_approval}, {@code other}),
     * {@code failed {detail}}, {@code cancelled}.
     */
    public static final class ChatOutcome {
        public String kind;
        public String excerpt;
        public Long length;
        public String input;
        public String detail;

        public static ChatOutcome replyCompleted(String excerpt, Long length) {
            ChatOutcome outcome = of("reply_completed");
            outcome.excerpt = excerpt;
            outcome.length = length;
            return outcome;
        }

        public static ChatOutcome needsInput(String input, String detail) {
            ChatOutcome outcome = of("needs_input");
            outcome.input = Objects.requireNonNull(input, "input");
            outcome.detail = detail;
            return outcome;
        }

        public static ChatOutcome failed(String detail) {
            ChatOutcome outcome = of("failed");
            outcome.detail = Objects.requireNonNull(detail, "detail");
            return outcome;
        }

        public static ChatOutcome cancelled() {
            return of("cancelled");
        }

        private static ChatOutcome of(String kind) {
            ChatOutcome outcome = new ChatOutcome();
            outcome.kind = kind;
            return outcome;
        }
    }

    /**
     * {@code event.event}: {@code chat_busy}, {@code chat_idle}, {@code focus {focused}},
     * {@code workspace_changed {workspace_folders}}, {@code window_closing},
     * {@code chat_readiness {ready, reason?}}, {@code chat_outcome {drive_id, outcome}}.
     */
    public static final class PluginEventKind {
        public String kind;
        public Boolean focused;
        public List<String> workspaceFolders;
        /** {@code chat_readiness}: whether the chat can take a request now, and why not. */
        public Boolean ready;
        public String reason;
        /** {@code chat_outcome}: the drive whose request the chat answered (sent only after its {@code submitted} ack). */
        public String driveId;
        public ChatOutcome outcome;

        public static PluginEventKind chatReadiness(boolean ready, String reason) {
            PluginEventKind event = of("chat_readiness");
            event.ready = ready;
            event.reason = reason;
            return event;
        }

        public static PluginEventKind chatOutcome(String driveId, ChatOutcome outcome) {
            PluginEventKind event = of("chat_outcome");
            event.driveId = Objects.requireNonNull(driveId, "driveId");
            event.outcome = Objects.requireNonNull(outcome, "outcome");
            return event;
        }

        public static PluginEventKind focus(boolean focused) {
            PluginEventKind event = new PluginEventKind();
            event.kind = "focus";
            event.focused = focused;
            return event;
        }

        public static PluginEventKind workspaceChanged(List<String> folders) {
            PluginEventKind event = new PluginEventKind();
            event.kind = "workspace_changed";
            event.workspaceFolders = new ArrayList<>(folders);
            return event;
        }

        public static PluginEventKind of(String kind) {
            PluginEventKind event = new PluginEventKind();
            event.kind = kind;
            return event;
        }
    }

    /** {@code event} (plugin → daemon). */
    public static final class Event extends Envelope {
        public PluginEventKind event;

        public Event() {
            type = "event";
        }

        public Event(PluginEventKind event) {
            this();
            this.event = event;
        }
    }

    /** One integrated terminal of the IDE window, as {@code terminals} reports it. */
    public static final class IdeTerminal {
        public String terminalId;
        public String name;
        /** The terminal's shell process, once the IDE knows it. */
        public Long shellPid;
        /** Where no pid is known: the {@code KORU_TERMINAL_ID} its shell was started with. */
        public String envTag;

        public IdeTerminal() {}

        public IdeTerminal(String terminalId, String name, Long shellPid) {
            this.terminalId = terminalId;
            this.name = name;
            this.shellPid = shellPid;
        }
    }

    /** {@code terminals} (plugin → daemon): every integrated terminal of the window; each report replaces the last. */
    public static final class Terminals extends Envelope {
        public List<IdeTerminal> terminals;

        public Terminals() {
            type = "terminals";
        }

        public Terminals(List<IdeTerminal> terminals) {
            this();
            this.terminals = terminals;
        }
    }

    /** {@code capabilities} (plugin → daemon): the plugin's capabilities now, replacing those of its hello (a plugin installed or enabled after it). */
    public static final class Capabilities extends Envelope {
        public List<Capability> capabilities;

        public Capabilities() {
            type = "capabilities";
        }

        public Capabilities(List<Capability> capabilities) {
            this();
            this.capabilities = capabilities;
        }
    }

    /** What a {@code clipboard} order asks: {@code read} the system clipboard's text, or {@code write} {@code text}. */
    public static final class ClipboardAction {
        public String kind;
        public String text;
    }

    /** {@code clipboard} (daemon → plugin): read or write the system clipboard; answered by {@link ClipboardResult}. This plugin does not declare {@code clipboard_io}, so the daemon sends it none; an order that comes anyway is answered with an error. */
    public static final class ClipboardOrder extends Envelope {
        public String orderId;
        public ClipboardAction action;
    }

    /** {@code clipboard.result} (plugin → daemon): the text read, or why the order could not be done. */
    public static final class ClipboardResult extends Envelope {
        public String orderId;
        public String text;
        public String error;

        public ClipboardResult() {
            type = "clipboard.result";
        }

        public ClipboardResult(String orderId, String text, String error) {
            this();
            this.orderId = orderId;
            this.text = text;
            this.error = error;
        }
    }

    /** What {@code terminal.io} asks: {@code read} the screen, or {@code write} {@code data} as it is. */
    public static final class TerminalAction {
        public String kind;
        public String data;
    }

    /** {@code terminal.io} (daemon → plugin): read or write one terminal; answered by {@link TerminalIoResult}. */
    public static final class TerminalIo extends Envelope {
        public String orderId;
        public String terminalId;
        public TerminalAction action;
    }

    /** {@code terminal.io.result} (plugin → daemon): the screen read, or why the order could not be done. */
    public static final class TerminalIoResult extends Envelope {
        public String orderId;
        public String screen;
        public String error;

        public TerminalIoResult() {
            type = "terminal.io.result";
        }

        public TerminalIoResult(String orderId, String screen, String error) {
            this();
            this.orderId = orderId;
            this.screen = screen;
            this.error = error;
        }
    }

    /** The class a message type decodes into on the plugin side, or {@code null} for controller-only types. */
    public static Class<? extends Envelope> pluginClassFor(String type) {
        switch (type) {
            case "hello": return Hello.class;
            case "welcome": return Welcome.class;
            case "error": return ErrorMessage.class;
            case "ping":
            case "pong": return Ping.class;
            case "bye": return Bye.class;
            case "drive": return Drive.class;
            case "cancel": return Cancel.class;
            case "ack": return Ack.class;
            case "event": return Event.class;
            case "terminals": return Terminals.class;
            case "capabilities": return Capabilities.class;
            case "clipboard": return ClipboardOrder.class;
            case "clipboard.result": return ClipboardResult.class;
            case "terminal.io": return TerminalIo.class;
            case "terminal.io.result": return TerminalIoResult.class;
            default: return null;
        }
    }
}
