#!/usr/bin/env python3
# Generates src/main/java/dev/koru/jetbrains/client/Catalog.java — the step commands, action ids and tool windows the built-in registry's JetBrains entries use (the plugin's default allow-list and what it looks for to report capabilities) — from registry/default.yaml; `--check` fails when the committed file is stale.
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REGISTRY = os.path.join(HERE, "..", "..", "..", "registry", "default.yaml")
OUT = os.path.join(HERE, "..", "src", "main", "java", "dev", "koru", "jetbrains", "client", "Catalog.java")
BUILT_IN = {"koru.activateToolWindow", "koru.focusInput", "koru.paste", "koru.submit"}


def applies_to_jetbrains(entry):
    products = (entry.get("applies_to") or {}).get("products") or ["any"]
    return any(str(p).startswith("jetbrains") for p in products)


def unique(items):
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def java_string(value):
    return json.dumps(value, ensure_ascii=False)


def generate():
    with open(REGISTRY, encoding="utf-8") as f:
        registry = yaml.safe_load(f)
    entries = []
    for entry in registry.get("interfaces") or []:
        if entry.get("transport") != "ide_command" or not applies_to_jetbrains(entry):
            continue
        required = [str(c) for c in (entry.get("requires") or {}).get("capabilities") or []]
        steps = entry.get("steps") or []
        commands = unique([s["command"] for s in steps] + [c[len("command:"):] for c in required if c.startswith("command:")])
        tool_windows = unique(
            [str(s["args"][0]) for s in steps
             if s["command"] in ("koru.activateToolWindow", "koru.focusInput") and s.get("args")]
            + [c[len("tool_window:"):] for c in required if c.startswith("tool_window:")])
        if commands or tool_windows:
            entries.append((entry["id"], commands, tool_windows))
    commands = sorted({c for _, cs, _ in entries for c in cs})
    actions = [c for c in commands if c not in BUILT_IN]
    tool_windows = sorted({t for _, _, ts in entries for t in ts})

    def java_list(items):
        return "List.of(" + ", ".join(java_string(i) for i in items) + ")"

    lines = [
        "// The command catalog of the built-in registry's JetBrains entries: generated from registry/default.yaml by scripts/generate-catalog.py — do not edit; run `python3 plugins/jetbrains/scripts/generate-catalog.py`.",
        "package dev.koru.jetbrains.client;",
        "",
        "import java.util.List;",
        "",
        "/** Step commands, action ids and tool window ids the registry's JetBrains routes use. */",
        "public final class Catalog {",
        "    private Catalog() {}",
        "",
        "    /** One registry entry and what its steps run and its requirements name. */",
        "    public static final class Entry {",
        "        public final String id;",
        "        public final List<String> commands;",
        "        public final List<String> toolWindows;",
        "",
        "        Entry(String id, List<String> commands, List<String> toolWindows) {",
        "            this.id = id;",
        "            this.commands = commands;",
        "            this.toolWindows = toolWindows;",
        "        }",
        "    }",
        "",
        "    /** Each JetBrains catalog entry of registry/default.yaml. */",
        "    public static final List<Entry> ENTRIES = List.of(",
    ]
    for i, (eid, cs, ts) in enumerate(entries):
        sep = "," if i < len(entries) - 1 else ""
        lines.append(f"            new Entry({java_string(eid)}, {java_list(cs)}, {java_list(ts)}){sep}")
    lines += [
        "    );",
        "",
        "    /** Every step command above, once: the plugin's default allow-list. */",
        f"    public static final List<String> COMMANDS = {java_list(commands)};",
        "",
        "    /** The commands that are IDE action ids (not Koru's built-in steps): reported as `command:<id>` when the IDE has them. */",
        f"    public static final List<String> ACTION_IDS = {java_list(actions)};",
        "",
        "    /** Tool window ids: reported as `tool_window:<id>` when registered in the project. */",
        f"    public static final List<String> TOOL_WINDOWS = {java_list(tool_windows)};",
        "}",
        "",
    ]
    return "\n".join(lines)


def main():
    text = generate()
    if "--check" in sys.argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("Catalog.java is stale: registry/default.yaml changed. Run `python3 plugins/jetbrains/scripts/generate-catalog.py` and commit the result.", file=sys.stderr)
                sys.exit(1)
        print("Catalog.java matches registry/default.yaml")
    else:
        with open(OUT, "w", encoding="utf-8") as f:
            f.write(text)
        print("wrote " + os.path.relpath(OUT))


if __name__ == "__main__":
    main()
