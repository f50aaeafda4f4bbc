// Protocol constants of the Koru socket protocol v1 (docs/protocol.md) and the one Gson instance the client encodes and decodes with.
package dev.koru.jetbrains.client;

import com.google.gson.FieldNamingPolicy;
import com.google.gson.Gson;
import com.google.gson.GsonBuilder;

import java.util.List;

/** Versions, limits and message types of the protocol, as in protocol/src/lib.rs and docs/protocol.schema.json. */
public final class Protocol {
    private Protocol() {}

    /** The highest protocol version this client speaks. */
    public static final int PROTOCOL_VERSION = 1;
    /** The lowest protocol version this client still speaks. */
    public static final int MIN_PROTOCOL_VERSION = 1;
    /** Default maximum line length in bytes, newline excluded (1 MiB), as the daemon's. */
    public static final int DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
    /** The `bye` reason with which the daemon asks a plugin to connect again (recovery action `reconnect_plugin`). */
    public static final String RECONNECT_REQUESTED = "reconnect_requested";
    /** The client name the daemon shows in `koru sessions`. */
    public static final String CLIENT_NAME = "koru-jetbrains";

    /** Every message type of protocol v1 (a test checks this against docs/protocol.schema.json). */
    public static final List<String> KNOWN_MESSAGE_TYPES = List.of(
            "hello", "welcome", "error", "ping", "pong", "bye", "drive", "cancel", "ack", "event",
            "terminals", "capabilities", "clipboard", "clipboard.result", "terminal.io", "terminal.io.result",
            "status", "status.result", "sessions.list", "sessions.list.result", "drives.list",
            "drives.list.result", "drive.create", "drive.get", "drive.cancel", "drive.result",
            "events.subscribe", "events.subscribed", "stream", "chats.list", "chats.list.result",
            "observe.report", "observe.reported", "recovery.run", "recovery.result", "journal.verify",
            "journal.verify.result", "chat.read", "chat.read.result", "chat.audit", "chat.audit.result");

    /** Snake-case field names on the wire, camelCase in Java; nulls are left out (optional fields). */
    public static final Gson GSON = new GsonBuilder()
            .setFieldNamingPolicy(FieldNamingPolicy.LOWER_CASE_WITH_UNDERSCORES)
            .disableHtmlEscaping()
            .registerTypeAdapter(Messages.Capability.class, new Messages.CapabilityAdapter())
            .create();
}
