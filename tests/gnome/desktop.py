#!/usr/bin/python3
"""Test only: moves the headless GNOME session's focus like a person would.

  desktop.py click X Y        left click at screen point (X, Y) through a Mutter
                              RemoteDesktop pointer (moves to the top-left corner first)
  desktop.py overview on|off  shows / hides the Overview (org.gnome.Shell OverviewActive):
                              with it shown no window has keyboard focus
  desktop.py alt-tab           presses Alt+Tab (switches to the most recently used other
                              window) through a Mutter RemoteDesktop keyboard
  desktop.py type TEXT         types ASCII TEXT as keysyms through a Mutter RemoteDesktop keyboard
  desktop.py active           prints the title of each top-level window AT-SPI says is active

Run with /usr/bin/python3 in the session's environment (tests/gnome/session.sh env DIR).
"""
import sys
import time

import dbus

BTN_LEFT = 0x110


def click(x, y):
    bus = dbus.SessionBus()
    rd = bus.get_object("org.gnome.Mutter.RemoteDesktop", "/org/gnome/Mutter/RemoteDesktop")
    path = dbus.Interface(rd, "org.gnome.Mutter.RemoteDesktop").CreateSession()
    session = dbus.Interface(
        bus.get_object("org.gnome.Mutter.RemoteDesktop", path),
        "org.gnome.Mutter.RemoteDesktop.Session",
    )
    session.Start()
    try:
        # Relative motion only (absolute motion needs a screen-cast stream): push into the
        # top-left corner, then out to the point.
        session.NotifyPointerMotionRelative(dbus.Double(-10000), dbus.Double(-10000))
        time.sleep(0.05)
        session.NotifyPointerMotionRelative(dbus.Double(x), dbus.Double(y))
        time.sleep(0.05)
        session.NotifyPointerButton(dbus.Int32(BTN_LEFT), True)
        time.sleep(0.05)
        session.NotifyPointerButton(dbus.Int32(BTN_LEFT), False)
        time.sleep(0.1)
    finally:
        session.Stop()


def remote_session():
    bus = dbus.SessionBus()
    rd = bus.get_object("org.gnome.Mutter.RemoteDesktop", "/org/gnome/Mutter/RemoteDesktop")
    path = dbus.Interface(rd, "org.gnome.Mutter.RemoteDesktop").CreateSession()
    session = dbus.Interface(
        bus.get_object("org.gnome.Mutter.RemoteDesktop", path),
        "org.gnome.Mutter.RemoteDesktop.Session",
    )
    session.Start()
    return session


def alt_tab():
    ALT_L, TAB = 0xFFE9, 0xFF09
    session = remote_session()
    try:
        for keysym, pressed in ((ALT_L, True), (TAB, True), (TAB, False)):
            session.NotifyKeyboardKeysym(dbus.UInt32(keysym), pressed)
            time.sleep(0.05)
        time.sleep(0.3)
        session.NotifyKeyboardKeysym(dbus.UInt32(ALT_L), False)
        time.sleep(0.2)
    finally:
        session.Stop()


def type_text(text):
    session = remote_session()
    try:
        for char in text:
            keysym = ord(char)  # Latin-1 keysyms equal their code points
            session.NotifyKeyboardKeysym(dbus.UInt32(keysym), True)
            session.NotifyKeyboardKeysym(dbus.UInt32(keysym), False)
            time.sleep(0.02)
        time.sleep(0.2)
    finally:
        session.Stop()


def overview(on):
    bus = dbus.SessionBus()
    shell = bus.get_object("org.gnome.Shell", "/org/gnome/Shell")
    dbus.Interface(shell, "org.freedesktop.DBus.Properties").Set(
        "org.gnome.Shell", "OverviewActive", dbus.Boolean(on)
    )


def active():
    import pyatspi

    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        if app is None:
            continue
        for window in app:
            if window is not None and window.getState().contains(pyatspi.STATE_ACTIVE):
                print(f"{app.name}\t{window.name}")


def main(argv):
    if len(argv) == 4 and argv[1] == "click":
        click(float(argv[2]), float(argv[3]))
    elif len(argv) == 3 and argv[1] == "overview" and argv[2] in ("on", "off"):
        overview(argv[2] == "on")
    elif len(argv) == 2 and argv[1] == "alt-tab":
        alt_tab()
    elif len(argv) == 3 and argv[1] == "type":
        type_text(argv[2])
    elif len(argv) == 2 and argv[1] == "active":
        active()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
