#!/usr/bin/env python3
"""Completes package-lock.json with the opencode platform packages that the npm registry
reachable from the machine that wrote the lock did not serve (its copy misses some of
opencode's per-platform packages at 1.18.33), so that `npm ci` finds the lock in sync
with package.json. Each added entry names only the version and the platform (os, cpu,
libc: as the same packages declare at neighbouring versions); no `resolved`/`integrity`,
so a machine of such a platform resolves it from its registry, and every other machine
skips it without a download.

Usage (after `npm install --package-lock-only` in tests/agents): python3 fill-lock.py
"""
import json
import pathlib

LOCK = pathlib.Path(__file__).with_name("package-lock.json")
PLATFORMS = {  # package suffix: (os, cpu, libc)
    "linux-x64": ("linux", "x64", None),
    "linux-x64-baseline": ("linux", "x64", None),
    "linux-x64-musl": ("linux", "x64", "musl"),
    "linux-x64-baseline-musl": ("linux", "x64", "musl"),
    "linux-arm64": ("linux", "arm64", None),
    "linux-arm64-musl": ("linux", "arm64", "musl"),
    "darwin-x64": ("darwin", "x64", None),
    "darwin-x64-baseline": ("darwin", "x64", None),
    "darwin-arm64": ("darwin", "arm64", None),
    "windows-x64": ("win32", "x64", None),
    "windows-x64-baseline": ("win32", "x64", None),
    "windows-arm64": ("win32", "arm64", None),
}

lock = json.loads(LOCK.read_text())
packages = lock["packages"]
version = packages["node_modules/opencode-ai"]["version"]
for suffix, (os_, cpu, libc) in PLATFORMS.items():
    key = f"node_modules/opencode-{suffix}"
    if key in packages:
        continue
    entry = {"version": version, "cpu": [cpu], "license": "MIT", "optional": True,
             "os": [os_]}
    if libc:
        entry["libc"] = [libc]
    packages[key] = entry
    print("added", key)
lock["packages"] = dict(sorted(packages.items(), key=lambda item: (item[0] != "", item[0])))
LOCK.write_text(json.dumps(lock, indent=2) + "\n")
