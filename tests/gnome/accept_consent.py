#!/usr/bin/python3
"""Test only: answers GNOME's remote-desktop consent dialog through AT-SPI.

The dialog is a GTK 4 window of xdg-desktop-portal-gnome ("Remote desktop": a switch
"Allow remote interaction", buttons "Cancel" and "Share"). This waits for it, then
  (default)   turns the "Allow remote interaction" switch on if there is one and clicks Share;
  --refuse    clicks Cancel.
  --dump      prints the dialog's accessible tree and answers nothing.

Options: --timeout S (default 30). Exit 0 once answered (prints what it did and how long the
dialog took to appear), 1 on timeout. Run with /usr/bin/python3 in the session's environment;
the session's locale must be English (the buttons are found by their labels).
"""
import argparse
import sys
import time

import pyatspi

APP = "xdg-desktop-portal-gnome"


def walk(obj, depth=0):
    yield obj, depth
    for i in range(obj.childCount):
        child = obj.getChildAtIndex(i)
        if child is not None:
            yield from walk(child, depth + 1)


def actions(obj):
    try:
        action = obj.queryAction()
        return {action.getName(i): (action, i) for i in range(action.nActions)}
    except (NotImplementedError, Exception):  # gone, or no actions after all
        return {}


def dialogs():
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        if app is not None and app.name == APP:
            for window in app:
                if window is not None and window.getState().contains(pyatspi.STATE_VISIBLE):
                    yield window


def dump(window):
    for obj, depth in walk(window):
        states = [s.value_nick for s in obj.getState().getStates()]
        print(f"{'  ' * depth}{obj.getRoleName()} {obj.name!r} actions={list(actions(obj))} states={states}")


def label_of(obj):
    # GTK 4.8 names a button "_Share Share" (mnemonic label and label); take the last word.
    return (obj.name or "").split(" ")[-1]


def find(window, role_names, label):
    for obj, _ in walk(window):
        if obj.getRoleName() in role_names and (label is None or label_of(obj) == label):
            return obj
    return None


def wait_sensitive(obj, seconds=5):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if obj.getState().contains(pyatspi.STATE_SENSITIVE):
            return True
        time.sleep(0.05)
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--refuse", action="store_true")
    parser.add_argument("--dump", action="store_true")
    parser.add_argument("--timeout", type=float, default=30)
    args = parser.parse_args()
    start = time.monotonic()
    while time.monotonic() - start < args.timeout:
        for window in dialogs():
            share = find(window, ("push button", "button"), "Share")
            cancel = find(window, ("push button", "button"), "Cancel")
            if share is None or cancel is None:
                continue  # not the remote-desktop dialog, or not built yet
            seen = time.monotonic() - start
            if args.dump:
                dump(window)
                return 0
            if args.refuse:
                action, index = actions(cancel)["click"]
                action.doAction(index)
                print(f"refused: clicked Cancel ({seen:.2f} s until the dialog was seen)")
                return 0
            toggled = "no switch"
            switch = find(window, ("switch", "toggle button", "check box"), None)
            if switch is not None:
                if switch.getState().contains(pyatspi.STATE_CHECKED):
                    toggled = f"switch {switch.name!r} already on"
                else:
                    action, index = actions(switch)["toggle"]
                    action.doAction(index)
                    toggled = f"switched {switch.name!r} on"
            if not wait_sensitive(share):
                print(f"Share stayed insensitive after: {toggled}", file=sys.stderr)
                return 1
            action, index = actions(share)["click"]
            action.doAction(index)
            print(f"accepted: {toggled}, clicked Share ({seen:.2f} s until the dialog was seen)")
            return 0
        time.sleep(0.1)
    print(f"no {APP} consent dialog within {args.timeout} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
