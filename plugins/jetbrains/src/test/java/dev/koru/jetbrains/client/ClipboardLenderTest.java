// The clipboard the plugin lends the daemon for the desktop portal without one of its own: clipboard orders answered with the text read, the write done, an empty clipboard as no text, and failures as errors; capability clipboard_io only where a lender is wired.
package dev.koru.jetbrains.client;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ClipboardLenderTest {
    /** A clipboard standing in for the IDE's CopyPasteManager (named fake: no IDE here). */
    static final class FakeClipboard implements DaemonClient.ClipboardLender {
        String text = "the user's clipboard";

        public String read() {
            return text;
        }

        public void write(String value) throws Exception {
            if (value.equals("locked")) throw new IllegalStateException("the clipboard is busy");
            text = value.isEmpty() ? null : value;
        }
    }

    private static Messages.ClipboardOrder order(String id, String kind, String text) {
        Messages.ClipboardOrder order = new Messages.ClipboardOrder();
        order.orderId = id;
        order.action = new Messages.ClipboardAction();
        order.action.kind = kind;
        order.action.text = text;
        return order;
    }

    private static DaemonClient client(DaemonClient.ClipboardLender lender) {
        DaemonClient.Options options = new DaemonClient.Options();
        options.hello = () -> HelloBuilder.build(new HelloBuilder.WindowFacts());
        options.runDrive = (drive, ack, cancelled) -> {};
        options.clipboard = lender;
        return new DaemonClient(options);
    }

    @Test
    void ordersReadWriteAndRestoreTheLentClipboard() {
        FakeClipboard clipboard = new FakeClipboard();
        DaemonClient client = client(clipboard);
        Messages.ClipboardResult read = client.answerClipboard(order("o_1", "read", null));
        assertEquals("o_1", read.orderId);
        assertEquals("the user's clipboard", read.text);
        assertNull(read.error);
        Messages.ClipboardResult written = client.answerClipboard(order("o_2", "write", "the prompt ✓\nline two"));
        assertNull(written.error);
        assertEquals("the prompt ✓\nline two", clipboard.text);
        client.answerClipboard(order("o_3", "write", ""));
        Messages.ClipboardResult empty = client.answerClipboard(order("o_4", "read", null));
        assertNull(empty.text, "an empty clipboard holds no text");
        assertNull(empty.error);
        Messages.ClipboardResult failed = client.answerClipboard(order("o_5", "write", "locked"));
        assertTrue(failed.error.contains("the clipboard is busy"), failed.error);
        Messages.ClipboardResult unknown = client.answerClipboard(order("o_6", "swap", null));
        assertEquals("unknown clipboard action swap", unknown.error);
        assertEquals("clipboard.result", unknown.type);
    }

    @Test
    void aWindowWithoutALenderSaysSoAndDeclaresNoClipboardIo() {
        Messages.ClipboardResult refused = client(null).answerClipboard(order("o_1", "read", null));
        assertEquals("this window does not lend its clipboard", refused.error);
        HelloBuilder.WindowFacts facts = new HelloBuilder.WindowFacts();
        List<Messages.Capability> without = HelloBuilder.capabilitiesFor(facts);
        assertTrue(without.stream().noneMatch(c -> c.kind.equals("clipboard_io")));
        facts.clipboardIo = true;
        assertTrue(HelloBuilder.capabilitiesFor(facts).stream().anyMatch(c -> c.kind.equals("clipboard_io")));
    }
}
