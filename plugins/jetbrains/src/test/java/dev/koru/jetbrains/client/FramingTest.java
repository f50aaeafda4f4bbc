// Framing tests: lines split across reads, CRLF, blank lines, the over-long line reported before its newline, invalid UTF-8 with the daemon's byte offset, and the envelope checks.
package dev.koru.jetbrains.client;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.stream.Collectors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class FramingTest {
    private static List<String> text(List<byte[]> lines) {
        return lines.stream().map(l -> new String(l, StandardCharsets.UTF_8)).collect(Collectors.toList());
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void linesSplitAcrossChunksAreJoinedAndCrlfIsAccepted() throws Exception {
        LineSplitter splitter = new LineSplitter(64);
        assertEquals(List.of(), splitter.push(bytes("{\"v\":1,")));
        assertEquals(List.of("{\"v\":1,\"type\":\"ping\"}"), text(splitter.push(bytes("\"type\":\"ping\"}\r\n{\"v\":1"))));
        assertEquals(List.of("{\"v\":1}", ""), text(splitter.push(bytes("}\n\n"))));
        assertEquals(0, splitter.pending());
    }

    @Test
    void aMultiByteCharacterSplitBetweenReadsSurvives() throws Exception {
        byte[] line = bytes("{\"v\":1,\"type\":\"bye\",\"reason\":\"🚀ü\"}\n");
        LineSplitter splitter = new LineSplitter();
        List<byte[]> out = new java.util.ArrayList<>();
        for (byte b : line) out.addAll(splitter.push(new byte[] {b}));
        assertEquals(1, out.size());
        Codec.Decoded decoded = Codec.decodeLine(out.get(0));
        assertTrue(decoded.ok());
        assertEquals("🚀ü", decoded.as(Messages.Bye.class).reason);
    }

    @Test
    void anOverLongLineIsReportedBeforeItsNewline() {
        assertThrows(LineSplitter.LineTooLongException.class, () -> new LineSplitter(8).push(bytes("0123456789ABCDEF")));
        assertThrows(LineSplitter.LineTooLongException.class, () -> new LineSplitter(8).push(bytes("0123456789\n")));
    }

    @Test
    void aLineExactlyAtTheLimitPassesEvenWithCr() throws Exception {
        LineSplitter splitter = new LineSplitter(8);
        assertEquals(List.of("01234567"), text(splitter.push(bytes("01234567\r\n"))));
    }

    @Test
    void invalidUtf8IsMalformedWithTheFirstBadByte() {
        byte[] line = {'{', '"', 'a', (byte) 0xc3, (byte) 0x28, '}'};
        Codec.Decoded decoded = Codec.decodeLine(line);
        assertFalse(decoded.ok());
        assertEquals("malformed", decoded.error.code);
        assertEquals(4, decoded.error.column);
        assertEquals("the line is not valid UTF-8 (first bad byte at offset 3)", decoded.error.message);
        assertEquals(0, Codec.firstInvalidUtf8(new byte[] {(byte) 0xff}));
        assertEquals(1, Codec.firstInvalidUtf8(new byte[] {'a', (byte) 0xed, (byte) 0xa0, (byte) 0x80}), "surrogates are invalid");
        assertEquals(3, Codec.firstInvalidUtf8(bytes("abc")));
    }

    @Test
    void envelopeChecksUseTheDaemonsCodes() {
        assertEquals("malformed", Codec.decodeLine(bytes("not json")).error.code);
        assertEquals("malformed", Codec.decodeLine(bytes("[1,2]")).error.code);
        assertEquals("malformed", Codec.decodeLine(bytes("{'v':1}")).error.code, "strict JSON, no single quotes");
        assertEquals("malformed", Codec.decodeLine(bytes("{\"v\":1} x")).error.code);
        assertEquals("unknown_type", Codec.decodeLine(bytes("{\"v\":1,\"type\":\"teleport\"}")).error.code);
        Codec.Decoded noV = Codec.decodeLine(bytes("{\"type\":\"ping\"}"));
        assertEquals("invalid_message", noV.error.code);
        assertEquals("v", noV.error.field);
        assertEquals("id", Codec.decodeLine(bytes("{\"v\":1,\"type\":\"ping\",\"id\":1.5}")).error.field);
        assertEquals("type", Codec.decodeLine(bytes("{\"v\":1,\"type\":7}")).error.field);
        assertTrue(Codec.decodeLine(bytes("{\"v\":1,\"type\":\"ping\",\"id\":\"x\",\"extra\":{}}")).ok(), "unknown fields are ignored");
    }

    @Test
    void unknownFieldsInKnownMessagesAreIgnored() {
        Codec.Decoded decoded = Codec.decodeLine(bytes(
                "{\"v\":1,\"type\":\"drive\",\"drive_id\":\"d_1\",\"prompt\":\"hi\",\"route\":\"plugin_drive\","
                        + "\"options\":{\"submit\":false,\"new_chat\":false,\"busy\":\"queue\",\"future\":1},\"later\":[1],"
                        + "\"steps\":[{\"command\":\"koru.paste\",\"args\":[\"$prompt\",{\"k\":[\"$prompt\"]}],\"proves\":\"pasted\"}]}"));
        assertTrue(decoded.ok());
        Messages.Drive drive = decoded.as(Messages.Drive.class);
        assertEquals("d_1", drive.driveId);
        assertFalse(drive.options.submit);
        assertEquals("koru.paste", drive.steps.get(0).command);
        assertEquals(2, drive.steps.get(0).args.size());
    }
}
