// NDJSON framing: splits a byte stream into lines and reports an over-long line before its newline arrives (mirrors daemon/src/codec.rs).
package dev.koru.jetbrains.client;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Accumulates bytes and returns complete lines without their {@code \n} (and a {@code \r} before it). Not thread-safe. */
public final class LineSplitter {
    /** A line longer than the limit arrived (the connection must be closed). */
    public static final class LineTooLongException extends Exception {
        public final int limit;

        public LineTooLongException(int limit) {
            super("line longer than " + limit + " bytes");
            this.limit = limit;
        }
    }

    private final int maxLineBytes;
    private byte[] buffer = new byte[0];
    private int length;

    public LineSplitter() {
        this(Protocol.DEFAULT_MAX_LINE_BYTES);
    }

    public LineSplitter(int maxLineBytes) {
        this.maxLineBytes = maxLineBytes;
    }

    /** Adds {@code count} bytes from {@code chunk} and returns the lines they complete. */
    public List<byte[]> push(byte[] chunk, int offset, int count) throws LineTooLongException {
        ensure(length + count);
        System.arraycopy(chunk, offset, buffer, length, count);
        int scanFrom = length;
        length += count;
        List<byte[]> lines = new ArrayList<>();
        int start = 0;
        for (int i = scanFrom; i < length; i++) {
            if (buffer[i] != '\n') continue;
            int end = i;
            if (end > start && buffer[end - 1] == '\r') end--;
            if (end - start > maxLineBytes) throw new LineTooLongException(maxLineBytes);
            lines.add(Arrays.copyOfRange(buffer, start, end));
            start = i + 1;
        }
        if (start > 0) {
            System.arraycopy(buffer, start, buffer, 0, length - start);
            length -= start;
        }
        // One byte of slack for a `\r` that may precede the newline still to come.
        if (length > maxLineBytes + 1) throw new LineTooLongException(maxLineBytes);
        return lines;
    }

    public List<byte[]> push(byte[] chunk) throws LineTooLongException {
        return push(chunk, 0, chunk.length);
    }

    /** Bytes held for a line not yet complete. */
    public int pending() {
        return length;
    }

    private void ensure(int capacity) {
        if (capacity <= buffer.length) return;
        buffer = Arrays.copyOf(buffer, Math.max(capacity, Math.max(256, buffer.length * 2)));
    }

    /** Joins lines the way {@link Codec#encodeLine} frames them (tests and the bench use it). */
    static byte[] join(List<byte[]> lines) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (byte[] line : lines) {
            out.writeBytes(line);
            out.write('\n');
        }
        return out.toByteArray();
    }
}
