"""Small helpers to drive an agent in a tmux pane and read the fake model server, for the
measurements in probe.py (and for tests that want them). Standard library only.

Environment: TMUX_SOCKET (default /tmp/koru-agents.tmux), FAKE_MODEL_URL (default
http://127.0.0.1:8765).
"""

import json
import os
import subprocess
import time
import urllib.request

SOCKET = os.environ.get("TMUX_SOCKET", "/tmp/koru-agents.tmux")
SERVER = os.environ.get("FAKE_MODEL_URL", "http://127.0.0.1:8765").rstrip("/")
HERE = os.path.dirname(os.path.abspath(__file__))


def tmux(*args, stdin=None):
    return subprocess.run(["tmux", "-S", SOCKET, *args], input=stdin, capture_output=True,
                          check=True).stdout.decode("utf-8", "replace")


def capture(pane):
    """The visible screen, wrapped lines joined (`capture-pane -p -J`)."""
    return tmux("capture-pane", "-p", "-J", "-t", pane)


def paste(pane, text, name="koru-probe"):
    """Bracketed paste of `text`, LF kept (`load-buffer` from stdin, `paste-buffer -p -r -d`)."""
    tmux("load-buffer", "-b", name, "-", stdin=text.encode("utf-8"))
    tmux("paste-buffer", "-p", "-r", "-d", "-b", name, "-t", pane)


def enter(pane):
    tmux("send-keys", "-t", pane, "Enter")


def type_prompt(pane, text, settle_ms):
    paste(pane, text)
    time.sleep(settle_ms / 1000)
    enter(pane)
    return time.time()


def keys(pane, *names, literal=False):
    tmux("send-keys", *(["-l"] if literal else []), "-t", pane, *names)


def wait_for(predicate, timeout=20.0, step=0.1):
    """The first truthy value of predicate() within timeout seconds, else None."""
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.time() >= deadline:
            return None
        time.sleep(step)


def get(path):
    with urllib.request.urlopen(SERVER + path, timeout=5) as response:
        return json.loads(response.read())


def prompts():
    """The user prompts the fake model received (`GET /koru/prompts`)."""
    return get("/koru/prompts")


def requests():
    return get("/koru/requests")


def reset():
    request = urllib.request.Request(SERVER + "/koru/reset", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def start_agent(agent, workdir, **env):
    """Runs start-agent.sh; returns (pane, seconds to ready, stderr)."""
    started = time.time()
    result = subprocess.run([os.path.join(HERE, "start-agent.sh"), agent, workdir],
                            capture_output=True, text=True,
                            env=dict(os.environ, TMUX_SOCKET=SOCKET, FAKE_MODEL_URL=SERVER,
                                     **env))
    if result.returncode != 0:
        raise RuntimeError(f"start-agent {agent} failed: {result.stderr}")
    return result.stdout.strip(), time.time() - started, result.stderr
