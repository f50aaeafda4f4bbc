#!/usr/bin/python3
"""TEST ONLY — a stand-in for an IDE window with a Koru plugin, for the headless GNOME test.

Not an IDE and not Koru's VS Code extension: a small GTK 4 window ("Koru stand-in IDE window
(test only)") whose multi-line text view has the keyboard focus, and which speaks Koru's
plugin protocol on the daemon's Unix socket like a real plugin does:

  * hello as role "plugin" for product code-server with capability clipboard_io, its pid,
    its workspace folder and whether its window is active right now ("focused");
  * answers ping with pong;
  * reports its REAL focus: every change of the GTK window's `is-active` (the compositor's
    keyboard focus) is sent as a focus event;
  * answers clipboard orders with the REAL Wayland clipboard (Gdk.Clipboard of its display):
    read -> the clipboard's text (absent when it holds none), write -> makes it the content;
  * records what its text view receives: on Return (no modifier) the text before it is a
    submission, written as one JSON line {"kind":"submitted","text":…} to OUT, and the view
    is cleared (like a chat input). Focus changes, pastes and clipboard orders are logged to
    OUT too ({"kind":"focus"|"paste"|"clipboard"|"hello"|"welcome"|…}).

When the daemon goes away it reconnects (every 200 ms, up to 60 s) like a plugin does. After
each submission it records the clipboard's text ("clipboard_after_submit"), so a test can check
that a drive put the previous clipboard back; --clipboard TEXT seeds the clipboard when the
window is first focused (a Wayland client may set the selection only while focused).

Usage (run with /usr/bin/python3 in the GNOME session's environment):
  standin_window.py --socket SOCK --workspace DIR --out FILE [--product code-server]
                    [--clipboard TEXT]
"""
import argparse
import json
import os
import sys
import time

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Gdk", "4.0")
from gi.repository import Gdk, Gio, GLib, Gtk  # noqa: E402

TITLE = "Koru stand-in IDE window (test only)"


class StandIn:
    def __init__(self, args):
        self.args = args
        self.out = open(args.out, "a", encoding="utf-8")
        self.conn = None
        self.input = None
        self.output = None
        self.said_focus = None
        self.welcomed = False
        self.app = Gtk.Application(
            application_id="dev.koru.StandInWindow",
            flags=Gio.ApplicationFlags.NON_UNIQUE,
        )
        self.app.connect("activate", self.activate)

    # -- the record a test reads -------------------------------------------------------
    def record(self, kind, **fields):
        fields = {"kind": kind, "t": round(time.time(), 3), **fields}
        self.out.write(json.dumps(fields, ensure_ascii=False) + "\n")
        self.out.flush()

    # -- the window ----------------------------------------------------------------------
    def activate(self, app):
        self.window = Gtk.ApplicationWindow(application=app, title=TITLE)
        self.window.set_default_size(900, 600)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        self.status = Gtk.Label(label="(nothing received yet)", xalign=0)
        self.status.set_wrap(True)
        self.view = Gtk.TextView()
        self.view.set_wrap_mode(Gtk.WrapMode.CHAR)
        self.view.set_vexpand(True)
        scroll = Gtk.ScrolledWindow()
        scroll.set_child(self.view)
        scroll.set_vexpand(True)
        box.append(Gtk.Label(label=TITLE + " — Return submits; the text view is the chat input", xalign=0))
        box.append(scroll)
        box.append(self.status)
        self.window.set_child(box)

        keys = Gtk.EventControllerKey()
        keys.set_propagation_phase(Gtk.PropagationPhase.CAPTURE)
        keys.connect("key-pressed", self.on_key)
        self.view.add_controller(keys)
        self.view.connect("paste-clipboard", lambda _v: self.record("paste"))

        self.window.connect("notify::is-active", self.on_active)
        # Maximized, so a click anywhere below the top bar lands in it (a Wayland client
        # cannot place itself; a new window here does not get focus without a click).
        self.window.maximize()
        self.window.present()
        self.view.grab_focus()
        self.clipboard = Gdk.Display.get_default().get_clipboard()
        self.connect_daemon()

    def on_key(self, _controller, keyval, _keycode, state):
        mods = state & (
            Gdk.ModifierType.SHIFT_MASK
            | Gdk.ModifierType.CONTROL_MASK
            | Gdk.ModifierType.ALT_MASK
            | Gdk.ModifierType.SUPER_MASK
        )
        if keyval in (Gdk.KEY_Return, Gdk.KEY_KP_Enter) and not mods:
            buffer = self.view.get_buffer()
            text = buffer.get_text(buffer.get_start_iter(), buffer.get_end_iter(), True)
            self.record("submitted", text=text, chars=len(text))
            shown = text if len(text) <= 200 else text[:200] + f"… ({len(text)} characters)"
            self.status.set_text("Received: " + shown)
            buffer.set_text("")
            self.record_clipboard("clipboard_after_submit")
            return True
        return False

    def record_clipboard(self, kind):
        """Records the clipboard's text now (what a drive left there)."""

        def done(clipboard, result):
            try:
                self.record(kind, text=clipboard.read_text_finish(result))
            except GLib.Error as error:
                self.record(kind, text=None, error=error.message)

        self.clipboard.read_text_async(None, done)

    def on_active(self, window, _pspec):
        focused = bool(window.is_active())
        self.record("focus", focused=focused)
        if focused and self.args.clipboard is not None and not getattr(self, "seeded", False):
            # A Wayland client can set the selection only while it has keyboard focus.
            self.seeded = True
            self.set_clipboard(self.args.clipboard)
            self.record_clipboard("clipboard_seeded")
        self.report_focus(focused)

    def report_focus(self, focused):
        if self.output is None or not self.welcomed or self.said_focus == focused:
            return
        self.said_focus = focused
        self.send({"v": 1, "type": "event", "event": {"kind": "focus", "focused": focused}})

    # -- the plugin protocol -------------------------------------------------------------
    def reconnect(self):
        """Like a plugin whose daemon restarted: tries again every 200 ms (for 60 s)."""
        self.reconnect_tries = getattr(self, "reconnect_tries", 0) + 1
        if self.connect_daemon(quiet=True):
            self.reconnect_tries = 0
            return False
        if self.reconnect_tries > 300:
            self.record("error", error="no daemon for 60 s")
            self.app.quit()
            return False
        return True

    def connect_daemon(self, quiet=False):
        client = Gio.SocketClient()
        try:
            self.conn = client.connect(Gio.UnixSocketAddress.new(self.args.socket), None)
        except GLib.Error as error:
            if quiet:
                return False
            self.record("error", error=f"connect {self.args.socket}: {error.message}")
            print(f"standin: cannot connect to {self.args.socket}: {error.message}", file=sys.stderr)
            self.app.quit()
            return False
        self.input = Gio.DataInputStream.new(self.conn.get_input_stream())
        self.output = self.conn.get_output_stream()
        focused = bool(self.window.is_active())
        self.said_focus = focused
        hello = {
            "v": 1,
            "type": "hello",
            "id": "h1",
            "role": "plugin",
            "protocol": {"min": 1, "max": 1},
            "client": {"name": "stand-in-gtk-window", "version": "0"},
            "ide": {"product": self.args.product, "version": "1.0", "app_name": self.args.product},
            "window": {
                "pid": os.getpid(),
                "focused": focused,
                "workspace_folders": [os.path.abspath(self.args.workspace)],
            },
            "capabilities": [{"kind": "clipboard_io"}],
        }
        self.record("hello", focused=focused)
        self.send(hello)
        self.read_next()
        return True

    def send(self, message):
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            self.output.write_all(data, None)
        except GLib.Error as error:
            self.record("error", error=f"write: {error.message}")
            self.app.quit()

    def read_next(self):
        self.input.read_line_async(GLib.PRIORITY_DEFAULT, None, self.on_line)

    def on_line(self, stream, result):
        try:
            line, _length = stream.read_line_finish_utf8(result)
        except GLib.Error as error:
            self.record("error", error=f"read: {error.message}")
            self.app.quit()
            return
        if line is None:
            self.record("disconnected")
            print("standin: the daemon closed the connection; reconnecting", file=sys.stderr)
            self.output = None
            self.welcomed = False
            GLib.timeout_add(200, self.reconnect)
            return
        try:
            message = json.loads(line)
        except ValueError:
            self.record("error", error=f"bad line: {line[:200]}")
        else:
            self.handle(message)
        self.read_next()

    def handle(self, message):
        kind = message.get("type")
        if kind == "ping":
            self.send({"v": 1, "id": message.get("id"), "type": "pong"})
        elif kind == "welcome":
            self.welcomed = True
            self.record("welcome", session_id=message.get("session_id"))
            # Focus may have changed between hello and welcome.
            self.report_focus(bool(self.window.is_active()))
        elif kind == "clipboard":
            self.clipboard_order(message)
        else:
            self.record("message", message=message)

    def set_clipboard(self, text):
        value = GLib.Bytes.new(text.encode("utf-8"))
        provider = Gdk.ContentProvider.new_union(
            [
                Gdk.ContentProvider.new_for_bytes("text/plain;charset=utf-8", value),
                Gdk.ContentProvider.new_for_bytes("text/plain", value),
                Gdk.ContentProvider.new_for_bytes("UTF8_STRING", value),
            ]
        )
        return self.clipboard.set_content(provider)

    def clipboard_order(self, message):
        order_id = message.get("order_id")
        action = message.get("action") or {}
        self.record("clipboard", action=action.get("kind"), chars=len(action.get("text", "")))

        def answer(**fields):
            self.send({"v": 1, "type": "clipboard.result", "order_id": order_id, **fields})

        if action.get("kind") == "read":
            if not self.clipboard.get_formats().get_mime_types() and not self.clipboard.get_formats().get_gtypes():
                answer()  # the clipboard holds nothing
                return

            def done(clipboard, result):
                try:
                    text = clipboard.read_text_finish(result)
                except GLib.Error as error:
                    answer(error=f"reading the clipboard: {error.message}")
                    return
                if text is None:
                    answer()
                else:
                    answer(text=text)

            self.clipboard.read_text_async(None, done)
        elif action.get("kind") == "write":
            if not self.set_clipboard(action.get("text", "")):
                answer(error="GTK refused the clipboard content")
                return
            answer()
        else:
            answer(error=f"unknown clipboard action {action.get('kind')!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--product", default="code-server")
    parser.add_argument("--clipboard", help="text to put on the clipboard when first focused")
    args = parser.parse_args()
    standin = StandIn(args)
    return standin.app.run([sys.argv[0]])


if __name__ == "__main__":
    sys.exit(main())
