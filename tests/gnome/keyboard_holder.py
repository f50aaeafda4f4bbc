#!/usr/bin/python3
"""Test only: gives the headless GNOME seat a keyboard for the session's lifetime.

A headless mutter seat has no keyboard until the first injected key; the first 2-8 keys of a
new remote-desktop session are then lost. This holds one org.gnome.Mutter.RemoteDesktop
session open (it ends when this process leaves the bus) and presses Shift once, like a
plugged-in keyboard. Run with /usr/bin/python3 on the session bus of the GNOME session.
Prints "ready" on stdout once the key went through, then sleeps until killed.
"""
import sys
import time

import dbus
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
deadline = time.monotonic() + 20
while True:
    try:
        rd = bus.get_object("org.gnome.Mutter.RemoteDesktop", "/org/gnome/Mutter/RemoteDesktop")
        path = dbus.Interface(rd, "org.gnome.Mutter.RemoteDesktop").CreateSession()
        break
    except dbus.DBusException as error:
        if time.monotonic() > deadline:
            sys.exit(f"keyboard_holder: no org.gnome.Mutter.RemoteDesktop: {error}")
        time.sleep(0.1)
session = dbus.Interface(
    bus.get_object("org.gnome.Mutter.RemoteDesktop", path),
    "org.gnome.Mutter.RemoteDesktop.Session",
)
session.Start()
SHIFT_L = 0xFFE1
session.NotifyKeyboardKeysym(dbus.UInt32(SHIFT_L), True)
session.NotifyKeyboardKeysym(dbus.UInt32(SHIFT_L), False)
print("ready", flush=True)
GLib.MainLoop().run()
