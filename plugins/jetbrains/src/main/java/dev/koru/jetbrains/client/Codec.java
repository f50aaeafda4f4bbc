// Encodes envelopes as NDJSON lines and decodes lines with the daemon's envelope-level rules and error codes (UTF-8, JSON object, id, type, v), as protocol/src/envelope.rs does.
package dev.koru.jetbrains.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonPrimitive;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import com.google.gson.stream.MalformedJsonException;

import java.io.IOException;
import java.io.StringReader;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/** NDJSON encode/decode for the protocol. */
public final class Codec {
    private Codec() {}

    /** Why a line could not be decoded, in the daemon's error vocabulary. */
    public static final class DecodeError {
        /** {@code malformed}, {@code unknown_type} or {@code invalid_message}. */
        public final String code;
        public final String message;
        /** 1-based byte offset (UTF-8) or JSON column, when known. */
        public final Integer column;
        public final String field;

        DecodeError(String code, String message, Integer column, String field) {
            this.code = code;
            this.message = message;
            this.column = column;
            this.field = field;
        }

        @Override
        public String toString() {
            return code + ": " + message;
        }
    }

    /** A decoded line: either an envelope object or an error. */
    public static final class Decoded {
        public final JsonObject envelope;
        public final DecodeError error;

        private Decoded(JsonObject envelope, DecodeError error) {
            this.envelope = envelope;
            this.error = error;
        }

        public boolean ok() {
            return error == null;
        }

        public String type() {
            return envelope.get("type").getAsString();
        }

        /** The envelope as the plugin-side class of its type. */
        public <T> T as(Class<T> type) {
            return Protocol.GSON.fromJson(envelope, type);
        }
    }

    /** One message as one line, newline included. */
    public static byte[] encodeLine(Object message) {
        String json = message instanceof JsonElement ? Protocol.GSON.toJson((JsonElement) message) : Protocol.GSON.toJson(message);
        return (json + "\n").getBytes(StandardCharsets.UTF_8);
    }

    /** The JSON tree a message encodes to (for comparisons). */
    public static JsonObject toTree(Object message) {
        return Protocol.GSON.toJsonTree(message).getAsJsonObject();
    }

    /** Decodes one line (without its newline), checking what the daemon checks first. */
    public static Decoded decodeLine(byte[] line) {
        String text;
        try {
            CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT);
            text = decoder.decode(ByteBuffer.wrap(line)).toString();
        } catch (CharacterCodingException e) {
            int offset = firstInvalidUtf8(line);
            return error("malformed", "the line is not valid UTF-8 (first bad byte at offset " + offset + ")", offset + 1, null);
        }
        JsonElement value;
        try {
            JsonReader reader = new JsonReader(new StringReader(text));
            reader.setLenient(false);
            value = com.google.gson.internal.bind.TypeAdapters.JSON_ELEMENT.read(reader);
            if (reader.peek() != JsonToken.END_DOCUMENT) {
                return error("malformed", "the line is not valid JSON: trailing characters", null, null);
            }
        } catch (JsonParseException | IOException | IllegalStateException e) {
            String detail = e.getCause() instanceof MalformedJsonException ? e.getCause().getMessage() : e.getMessage();
            return error("malformed", "the line is not valid JSON: " + detail, null, null);
        }
        if (value == null || !value.isJsonObject()) {
            return error("malformed", "the line is JSON but not an object; every line must be one JSON object", null, null);
        }
        JsonObject object = value.getAsJsonObject();
        JsonElement id = object.get("id");
        if (id != null && !id.isJsonNull() && !(isString(id) || isInteger(id))) {
            return error("invalid_message", "`id` must be an integer or a string", null, "id");
        }
        JsonElement type = object.get("type");
        if (!isString(type)) {
            return error("invalid_message", type == null ? "missing field `type`" : "`type` must be a string", null, "type");
        }
        if (!Protocol.KNOWN_MESSAGE_TYPES.contains(type.getAsString())) {
            return error("unknown_type", "unknown message type " + new JsonPrimitive(type.getAsString()), null, null);
        }
        JsonElement v = object.get("v");
        if (!isInteger(v) || v.getAsLong() < 1) {
            return error("invalid_message",
                    v == null ? "missing field `v` (the protocol version)" : "`v` must be a positive integer protocol version",
                    null, "v");
        }
        return new Decoded(object, null);
    }

    private static Decoded error(String code, String message, Integer column, String field) {
        return new Decoded(null, new DecodeError(code, message, column, field));
    }

    private static boolean isString(JsonElement element) {
        return element != null && element.isJsonPrimitive() && element.getAsJsonPrimitive().isString();
    }

    private static boolean isInteger(JsonElement element) {
        if (element == null || !element.isJsonPrimitive() || !element.getAsJsonPrimitive().isNumber()) return false;
        String text = element.getAsJsonPrimitive().getAsString();
        return text.matches("-?\\d+");
    }

    /** The offset of the first byte that is not part of valid UTF-8 (Rust's {@code valid_up_to}). */
    static int firstInvalidUtf8(byte[] bytes) {
        int i = 0;
        while (i < bytes.length) {
            int lead = bytes[i] & 0xff;
            if (lead < 0x80) {
                i++;
                continue;
            }
            int continuation;
            if (lead >= 0xc2 && lead <= 0xdf) continuation = 1;
            else if (lead >= 0xe0 && lead <= 0xef) continuation = 2;
            else if (lead >= 0xf0 && lead <= 0xf4) continuation = 3;
            else return i;
            // The second byte's range excludes overlong forms and surrogates.
            int low = lead == 0xe0 ? 0xa0 : lead == 0xf0 ? 0x90 : 0x80;
            int high = lead == 0xed ? 0x9f : lead == 0xf4 ? 0x8f : 0xbf;
            if (i + 1 >= bytes.length || (bytes[i + 1] & 0xff) < low || (bytes[i + 1] & 0xff) > high) return i;
            for (int k = 2; k <= continuation; k++) {
                if (i + k >= bytes.length || (bytes[i + k] & 0xc0) != 0x80) return i;
            }
            i += continuation + 1;
        }
        return bytes.length;
    }
}
