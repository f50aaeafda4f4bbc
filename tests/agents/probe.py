#!/usr/bin/env python3
"""Measures how each agent behaves when typed into through tmux (for /tmp/agents-report.md):
screens of its states, paste + Enter with several settle delays, leading `/`, `!`, `#`,
where the prompt is recorded, Enter under `extended-keys always`, how it exits.

Needs the fake model server running (FAKE_MODEL_URL) and `npm ci --prefix tests/agents`.
Usage: tests/agents/probe.py [AGENT ...] [--out DIR] [--tries N]
Writes DIR/AGENT-*.txt (screens) and DIR/AGENT.json (results); DIR is /tmp/agents-screens.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

# Per agent: text that shows it busy, a permission dialog, the empty input box.
MARKERS = {
    "claude-code": {"busy": "esc to interrupt", "dialog": "Do you want to proceed?",
                    "ready": re.compile(r"^❯", re.M)},
    "codex": {"busy": "esc to interrupt", "dialog": "Would you like to run the following command?",
              "ready": re.compile(r"^› ", re.M)},
    "gemini-cli": {"busy": "esc to cancel", "dialog": "Allow execution of",
                   "ready": re.compile(r"Type your message", re.M)},
    "opencode": {"busy": "esc interrupt", "dialog": "Permission required",
                 "ready": re.compile(r"Ask anything", re.M)},
}

API = {"claude-code": "anthropic-messages", "codex": "openai-responses",
       "gemini-cli": "gemini", "opencode": "openai-chat"}
SETTLES = [int(ms) for ms in os.environ.get("SETTLES", "0,50,100,200,400").split(",")]
LEADING = ["/koruprobe slash text", "!echo koru-bang", "#koru hash note",
           " /koruprobe after a space", " !echo koru-space-bang", " #koru space hash"]


class Probe:
    def __init__(self, agent, out, tries):
        self.agent = agent
        self.out = out
        self.tries = tries
        self.marks = MARKERS[agent]
        self.result = {"agent": agent}
        self.counter = 0

    def save(self, name, screen=None):
        screen = h.capture(self.pane) if screen is None else screen
        with open(os.path.join(self.out, f"{self.agent}-{name}.txt"), "w") as f:
            f.write(screen)
        return screen

    def busy(self, screen=None):
        screen = h.capture(self.pane) if screen is None else screen
        return self.marks["busy"] in screen

    def wait_idle(self, timeout=30):
        """Until the busy marker has been absent for 1 s."""
        quiet_since = None
        deadline = time.time() + timeout
        while time.time() < deadline:
            screen = h.capture(self.pane)
            if self.busy(screen) or self.marks["dialog"] in screen:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.time()
            elif time.time() - quiet_since >= 1.0:
                return True
            time.sleep(0.1)
        return False

    def clear_box(self):
        """Empties the input box whatever it holds (a draft left by a lost Enter may span
        lines): end of text, delete to line start, join with the line above; repeated."""
        for _ in range(6):
            h.keys(self.pane, "C-e")
            h.keys(self.pane, "C-u")
            h.keys(self.pane, "BSpace")
            time.sleep(0.05)
        time.sleep(0.3)

    def received(self, text):
        """The prompts with exactly this text that this agent's API brought."""
        return [p for p in h.prompts() if p["prompt"] == text and p["api"] == API[self.agent]]

    def submit(self, text, settle_ms, wait=8.0):
        """Types text (paste, settle, Enter); returns what the server got and when."""
        before = len(self.received(text))
        sent = h.type_prompt(self.pane, text, settle_ms)
        got = h.wait_for(lambda: len(self.received(text)) > before and self.received(text),
                         timeout=wait, step=0.05)
        entry = {"settle_ms": settle_ms, "text": text, "received": bool(got),
                 "count": len(got) - before if got else 0,
                 "latency_s": round(got[-1]["time"] - sent, 3) if got else None}
        return entry, sent

    def start(self):
        self.workdir = tempfile.mkdtemp(prefix=f"koru-probe-{self.agent}-work-")
        subprocess.run(["git", "init", "-q", self.workdir], check=True)
        with open(os.path.join(self.workdir, "notes.txt"), "w") as f:
            f.write("hello\n")
        env = {}
        if self.agent == "opencode":
            env["OPENCODE_PORT"] = os.environ.get("OPENCODE_PORT", "4197")
        self.pane, took, err = h.start_agent(self.agent, self.workdir, **env)
        self.home = re.search(r"HOME (\S+)", err).group(1)
        self.result.update(pane=self.pane, ready_s=round(took, 2), start_log=err.strip(),
                           workdir=self.workdir, home=self.home,
                           launch=open(os.path.join(os.path.dirname(self.home),
                                                    "launch.sh")).read())
        self.save("ready")

    def first_prompt(self):
        """A prompt typed the moment the input box shows (100 ms settle)."""
        entry, _ = self.submit("koru first prompt right after ready", 100)
        self.result["first_prompt"] = entry
        if not entry["received"]:
            self.save("first-prompt-lost")
            h.keys(self.pane, "C-u")
        self.wait_idle()

    def states(self):
        time.sleep(0.5)
        self.save("idle")
        h.keys(self.pane, "hello draft", literal=True)
        time.sleep(0.7)
        self.save("draft")
        h.keys(self.pane, "C-u")
        time.sleep(0.7)
        self.save("draft-cleared")
        # Busy: a reply that streams over ~6 s.
        text = "Please reply slowly, koru busy probe."
        entry, sent = self.submit(text, 200)
        samples = []
        for _ in range(40):
            screen = h.capture(self.pane)
            samples.append((round(time.time() - sent, 2), self.busy(screen)))
            if len(samples) == 12:
                self.save("busy", screen)
            time.sleep(0.25)
        self.result["busy"] = {"prompt": entry, "busy_marker_samples": samples}
        self.wait_idle()
        self.save("after-reply")
        # Permission dialog.
        entry, sent = self.submit("This needs permission: koru permission probe.", 200)
        dialog = h.wait_for(lambda: self.marks["dialog"] in h.capture(self.pane), timeout=15)
        time.sleep(0.5)
        self.save("permission")
        self.result["permission"] = {"prompt": entry, "dialog_seen": bool(dialog),
                                     "dialog_after_s": round(time.time() - sent, 2)}
        h.keys(self.pane, "Escape")
        time.sleep(1.5)
        self.save("permission-escaped")
        self.wait_idle()
        if self.agent == "opencode" and self.marks["dialog"] in h.capture(self.pane):
            h.keys(self.pane, "Escape")
            self.wait_idle()

    def settles(self):
        rows = []
        for settle in SETTLES:
            for attempt in range(self.tries):
                self.counter += 1
                if attempt % 2 == 0:
                    text = f"koru one-line probe {self.agent} {self.counter} settle {settle} äöü ✓"
                else:
                    text = f"Zeile eins äöü {self.agent} {self.counter} settle {settle}\nline two 日本語 ✓"
                entry, _ = self.submit(text, settle)
                if not entry["received"]:
                    entry["screen"] = f"settle-{settle}-{attempt}-lost"
                    self.save(entry["screen"])
                    self.clear_box()
                    self.wait_idle()
                else:
                    self.wait_idle()
                rows.append(entry)
        self.result["settles"] = rows

    def transcripts(self):
        """Which files under HOME hold a unique prompt, and how soon after Enter."""
        tag = f"koru-transcript-tag-{int(time.time())}"
        text = f"Remember this: {tag}"
        first = {}
        sent = h.type_prompt(self.pane, text, 200)
        deadline = sent + 12
        while time.time() < deadline:
            for path in self.scan(tag):
                first.setdefault(path, round(time.time() - sent, 3))
            time.sleep(0.1)
        self.result["transcripts"] = {"text": text, "files": first}
        self.wait_idle()

    def scan(self, tag):
        found = []
        for root, dirs, files in os.walk(self.home):
            dirs[:] = [d for d in dirs if d not in ("packages", "node_modules", "bin", ".cache",
                                                    "snapshot")]
            for name in files:
                path = os.path.join(root, name)
                try:
                    if os.path.getsize(path) > 20_000_000:
                        continue
                    with open(path, "rb") as f:
                        if tag.encode() in f.read():
                            found.append(path)
                except OSError:
                    pass
        return found

    def leading(self):
        rows = []
        for text in LEADING:
            h.paste(self.pane, text)
            time.sleep(0.4)
            before = self.save(f"leading-{len(rows)}-typed")
            h.enter(self.pane)
            got = h.wait_for(lambda: self.received(text) or self.received(text.strip()),
                             timeout=5, step=0.1)
            # (a prompt that arrived without its leading space is found by the second)
            time.sleep(1.0)
            after = self.save(f"leading-{len(rows)}-entered")
            rows.append({"text": text, "reached_model": bool(got),
                         "as": got[-1]["prompt"] if got else None,
                         "typed_screen": f"leading-{len(rows)}-typed",
                         "entered_screen": f"leading-{len(rows)}-entered"})
            h.keys(self.pane, "Escape")
            time.sleep(0.4)
            self.clear_box()  # an input left in the box (a refused command)
            self.wait_idle()
            time.sleep(0.5)
            self.save(f"leading-{len(rows) - 1}-cleared")
        self.result["leading"] = rows

    def extended_keys(self):
        h.tmux("set-option", "-s", "extended-keys", "always")
        try:
            entry, _ = self.submit("koru extended-keys always probe äöü", 200)
            if not entry["received"]:
                self.save("extended-keys-lost")
                h.keys(self.pane, "C-u")
            self.result["extended_keys_always"] = entry
            self.wait_idle()
        finally:
            h.tmux("set-option", "-s", "extended-keys", "off")

    def dead(self):
        return h.tmux("display-message", "-p", "-t", self.pane, "#{pane_dead}").strip() == "1"

    def exit(self):
        """Tries, in turn: Ctrl-C twice 0.3 s apart, Ctrl-D, `/exit` + Enter, `/quit` + Enter;
        the first after which the pane's process is gone is the one that worked."""
        def ctrl_c_twice():
            h.keys(self.pane, "C-c")
            time.sleep(0.3)
            h.keys(self.pane, "C-c")

        def command(text):
            return lambda: (h.keys(self.pane, "C-u"), time.sleep(0.3),
                            h.type_prompt(self.pane, text, 300))

        tried = []
        for name, action in (("C-c C-c", ctrl_c_twice), ("C-d", lambda: h.keys(self.pane, "C-d")),
                             ("/exit", command("/exit")), ("/quit", command("/quit"))):
            action()
            tried.append(name)
            if h.wait_for(self.dead, timeout=4):
                break
            self.save(f"exit-attempt-{len(tried)}")
        time.sleep(0.5)
        self.save("exited")
        status = h.tmux("display-message", "-p", "-t", self.pane, "#{pane_dead_status}").strip()
        self.result["exit"] = {"keys": tried, "pane_dead": self.dead(), "status": status}

    def run(self):
        self.start()
        self.first_prompt()
        self.states()
        self.settles()
        self.transcripts()
        self.leading()
        self.extended_keys()
        self.exit()
        with open(os.path.join(self.out, f"{self.agent}.json"), "w") as f:
            json.dump(self.result, f, indent=2, ensure_ascii=False)
        return self.result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("agents", nargs="*", default=list(MARKERS))
    parser.add_argument("--out", default="/tmp/agents-screens")
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for agent in args.agents:
        started = time.time()
        result = Probe(agent, args.out, args.tries).run()
        lost = [r for r in result["settles"] if not r["received"] or r["count"] != 1]
        print(f"{agent}: ready {result['ready_s']}s, {len(lost)} settle failures, "
              f"{time.time() - started:.0f}s", flush=True)


if __name__ == "__main__":
    main()
