#!/usr/bin/env python3
"""Keeps every state of a file that its tool rewrites whole, used only to record the
corpus: Cline's classic core rewrites `tasks/<id>/ui_messages.json` whole on each change
(a temporary file renamed over it), so the file's successive states are only seen by
reading it while the tool runs.

Polls every `ui_messages.json` under the folder given with `--root` every 2 ms and,
each time one's bytes differ from the previous read, copies them to
`<out>/<task id>/<NNN>.json` (NNN counting from 001). A state that lasted less than a
poll can be missed; every state kept is one the tool wrote, byte for byte (a rename
replaces the file at once, so no read sees half of one).

Runs until it gets SIGTERM or SIGINT.

Usage: capture_rewrites.py --root ~/.cline/data/tasks --out /tmp/rewrites
"""

import argparse
import os
import signal
import sys
import time

NAME = "ui_messages.json"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--every", type=float, default=0.002, help="seconds between polls")
    args = parser.parse_args()
    running = True

    def stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    last = {}
    counts = {}
    while running:
        try:
            tasks = os.listdir(args.root)
        except FileNotFoundError:
            tasks = []
        for task in tasks:
            path = os.path.join(args.root, task, NAME)
            try:
                with open(path, "rb") as source:
                    data = source.read()
            except (FileNotFoundError, NotADirectoryError):
                continue
            if last.get(task) == data:
                continue
            last[task] = data
            counts[task] = counts.get(task, 0) + 1
            folder = os.path.join(args.out, task)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{counts[task]:03}.json"), "wb") as copy:
                copy.write(data)
        time.sleep(args.every)
    print(f"kept {sum(counts.values())} states of {len(counts)} task(s) in {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
