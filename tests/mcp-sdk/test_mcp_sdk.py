"""Drives `koru mcp` (stdio) and the daemon's streamable HTTP endpoint with the official Python MCP SDK: tools and schemas, send_prompt to `koru dev fake-plugin`, get_drive, cancel_drive, a controller's loop reading a whole 20 KB reply from a Claude Code session log (send_prompt wait=replied, wait_for_reply, read_chat paged), and the error cases — unknown session, daemon down, bad arguments, missing or wrong token, foreign Origin.

Usage: test_mcp_sdk.py KORU_BIN   (run.sh sets up the virtualenv). Exit 0 only when every check holds.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

KORU = sys.argv[1]
TOOLS = ["list_sessions", "send_prompt", "get_drive", "cancel_drive", "wait_for_reply", "read_chat", "doctor", "list_interfaces", "recover", "verify_journal", "audit_chat"]
failures = []
passed = 0


def check(condition, what):
    global passed
    if condition:
        passed += 1
    else:
        failures.append(what)
        print(f"FAIL: {what}", flush=True)


def text(result):
    return "\n".join(getattr(block, "text", "") for block in result.content)


def structured(result):
    """A tool result's structured content, whatever the SDK version calls the field."""
    value = getattr(result, "structured_content", None)
    return value if value is not None else getattr(result, "structuredContent", None)


def long_reply():
    """About 20 KB over many lines: Unicode, quotes, backslashes, JSON-looking text."""
    lines = ["Summary ✓", ""]
    n = 0
    while sum(len(line.encode()) + 1 for line in lines) < 20_000:
        n += 1
        lines.append(f"{n:04} — 日本語, emoji 🦀, \"quotes\" and 'x', backslash \\ and {{\"json\": [1]}}")
    return "\n".join(lines) + "\nno newline at the end"


REPLY = long_reply()


class Sandbox:
    """A private runtime/state/config dir, a daemon with --http, and fake plugins."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="koru-mcp-sdk-")
        for sub in ["run", "state", "config", "home", "ws/fast", "ws/slow", "ws/agent"]:
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        os.chmod(os.path.join(self.dir, "run"), 0o700)
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.path.join(self.dir, "home"),
            "XDG_RUNTIME_DIR": os.path.join(self.dir, "run"),
            "XDG_STATE_HOME": os.path.join(self.dir, "state"),
            "XDG_CONFIG_HOME": os.path.join(self.dir, "config"),
            "RUST_LOG": "warn",
        }
        self.fast = os.path.join(self.dir, "ws/fast")
        self.slow = os.path.join(self.dir, "ws/slow")
        self.agent = os.path.realpath(os.path.join(self.dir, "ws/agent"))
        # The window whose agent is Claude Code writes its session log here (made before the
        # daemon starts, so that what is written there is news).
        self.claude_project = os.path.join(self.dir, "home/.claude/projects", self.agent.replace("/", "-"))
        os.makedirs(self.claude_project, exist_ok=True)
        self.reply_file = os.path.join(self.dir, "reply.txt")
        with open(self.reply_file, "w", encoding="utf-8") as f:
            f.write(REPLY)
        self.processes = []

    def koru(self, *args):
        return subprocess.run([KORU, *args], env=self.env, capture_output=True, text=True, timeout=30)

    def spawn(self, *args):
        log = open(os.path.join(self.dir, f"{args[0]}-{len(self.processes)}.log"), "w")
        process = subprocess.Popen([KORU, *args], env=self.env, stdout=subprocess.DEVNULL, stderr=log)
        self.processes.append(process)
        return process

    def wait_until(self, predicate, what, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise RuntimeError(f"timed out waiting for {what}")

    def start(self):
        self.spawn("daemon", "--http", "127.0.0.1:0")
        self.wait_until(lambda: self.koru("status").returncode == 0, "the daemon")
        # A product whose routes the fake plugin can finish by command (a Cursor window's submit
        # is a daemon key press, which needs a display).
        self.spawn("dev", "fake-plugin", "--product", "code-server", "--workspace", self.fast)
        self.spawn("dev", "fake-plugin", "--product", "vscode", "--workspace", self.slow, "--behaviour", "slow", "--delay-ms", "5000")
        self.spawn("dev", "fake-plugin", "--product", "vscode", "--workspace", self.agent, "--claude-store", self.claude_project,
                   "--reply-file", self.reply_file, "--tool-call", "echo checked", "--reply-delay-ms", "50")
        self.wait_until(lambda: len(json.loads(self.koru("sessions", "--json").stdout or "[]")) == 3, "three plugin sessions")
        status = json.loads(self.koru("status", "--json").stdout)
        self.url = status["http"]["mcp_url"]
        self.token = status["http"]["token"]
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])

    def stop(self):
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()


async def exercise(session, sandbox, label):
    init = await session.initialize()
    check(init.server_info.name == "koru", f"{label}: server name koru")
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    check(sorted(tools) == sorted(TOOLS), f"{label}: exactly the tools {TOOLS}, got {sorted(tools)}")
    send_schema = tools["send_prompt"].input_schema
    check(send_schema.get("required") == ["target", "prompt"], f"{label}: send_prompt requires target and prompt: {send_schema.get('required')}")
    check(set(send_schema["properties"]) == {"target", "prompt", "submit", "wait", "timeout_s", "host", "max_chars", "agent_command"}, f"{label}: send_prompt properties")
    check(all(tools[name].description for name in TOOLS), f"{label}: every tool has a description")

    result = await session.call_tool("list_sessions", {})
    lines = text(result).splitlines()
    check(not result.is_error and len(lines) == 3, f"{label}: list_sessions gives one line per window: {lines}")
    check(any("code-server" in line and sandbox.fast in line for line in lines), f"{label}: the code-server window and its folder")
    filtered = await session.call_tool("list_sessions", {"product": "code-server"})
    check(len(text(filtered).splitlines()) == 1, f"{label}: list_sessions filters by product")

    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    result = await session.call_tool(
        "send_prompt",
        {"target": sandbox.fast, "prompt": f"hello from the Python SDK over {label} ✓", "wait": "submitted", "timeout_s": 15},
        progress_callback=on_progress,
    )
    body = text(result)
    check(not result.is_error and "done: reached submitted by" in body, f"{label}: send_prompt reaches submitted: {body}")
    check(progress and progress[0].endswith(" queued") and progress[-1].endswith(" done"), f"{label}: progress notifications, in order, while waiting: {progress}")
    drive_id = body.split()[1]
    result = await session.call_tool("get_drive", {"drive_id": drive_id})
    check(not result.is_error and f"drive {drive_id} done" in text(result), f"{label}: get_drive: {text(result)}")

    # A drive still running (the slow plugin) can be cancelled.
    result = await session.call_tool("send_prompt", {"target": sandbox.slow, "prompt": "slow one", "wait": "none"})
    running = text(result).split()[1]
    check(not result.is_error and running.startswith("d_"), f"{label}: send_prompt wait=none returns at once: {text(result)}")
    result = await session.call_tool("cancel_drive", {"drive_id": running})
    check(not result.is_error and f"drive {running} cancelled" in text(result), f"{label}: cancel_drive: {text(result)}")

    # A controller's loop: push, wait for the reply, read the whole answer and the agent's
    # step, page through it.
    result = await session.call_tool(
        "send_prompt",
        {"target": sandbox.agent, "prompt": f"Review the parser ({label})", "wait": "replied", "timeout_s": 20},
    )
    body = text(result)
    check(not result.is_error and body.endswith("\nreply:\n" + REPLY), f"{label}: send_prompt wait=replied ends with the whole reply: {body[:300]}")
    check("\n- Bash echo checked → ok" in body, f"{label}: the agent's step: {body[:400]}")
    read = structured(result)
    check(read is not None and read["turns"][0]["reply"] == REPLY, f"{label}: the turn as structured content")
    drive_id = body.split()[1]
    result = await session.call_tool("wait_for_reply", {"drive_id": drive_id, "timeout_s": 5})
    check(not result.is_error and text(result).endswith("\nreply:\n" + REPLY), f"{label}: wait_for_reply returns the whole reply")
    pieces, offset, pages = [], 0, 0
    while True:
        result = await session.call_tool("read_chat", {"drive_id": drive_id, "reply_offset": offset, "max_chars": 4000})
        turn = structured(result)["turns"][0]
        pieces.append(turn["reply"])
        pages += 1
        if turn.get("reply_next_offset") is None:
            break
        offset = turn["reply_next_offset"]
    check("".join(pieces) == REPLY and pages == -(-len(REPLY) // 4000), f"{label}: read_chat pages return every character once ({pages} pages)")
    result = await session.call_tool("read_chat", {"chat_id": "no-such-chat"})
    check(result.is_error and text(result).startswith("error unknown_chat:"), f"{label}: read_chat of an unknown chat: {text(result)}")

    # Failures are tool results with isError and a code.
    result = await session.call_tool("send_prompt", {"target": "s_nosuchsession", "prompt": "x", "timeout_s": 5})
    check(result.is_error and text(result).startswith("error no_target:") and "s_nosuchsession" in text(result), f"{label}: unknown session: {text(result)}")
    result = await session.call_tool("send_prompt", {"target": sandbox.fast, "prompt": 7})
    check(result.is_error and "`prompt`" in text(result), f"{label}: bad argument type names the field: {text(result)}")
    result = await session.call_tool("send_prompt", {"target": sandbox.fast, "prompt": "x", "wait": "sometime"})
    check(result.is_error and "`wait`" in text(result), f"{label}: bad enum value names the field: {text(result)}")
    result = await session.call_tool("send_prompt", {"target": sandbox.fast, "prompt": "x", "timeout_s": -1})
    check(result.is_error and "timeout_s" in text(result), f"{label}: bad timeout: {text(result)}")
    result = await session.call_tool("send_prompt", {"target": sandbox.fast, "prompt": "y" * 300_000})
    check(result.is_error and text(result).startswith("error prompt_too_large:"), f"{label}: oversized prompt: {text(result)[:120]}")
    result = await session.call_tool("get_drive", {"drive_id": "d_unknown"})
    check(result.is_error and text(result).startswith("error unknown_drive:"), f"{label}: unknown drive")
    result = await session.call_tool("get_drive", {})
    check(result.is_error and "drive_id" in text(result), f"{label}: a missing argument: {text(result)}")


def raw_initialize(port, headers):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


async def main():
    sandbox = Sandbox()
    try:
        sandbox.start()
        async with stdio_client(StdioServerParameters(command=KORU, args=["mcp"], env=sandbox.env)) as (read, write):
            async with ClientSession(read, write) as session:
                await exercise(session, sandbox, "stdio")
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {sandbox.token}"}, timeout=30) as http:
            async with streamable_http_client(sandbox.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await exercise(session, sandbox, "http")
        check(raw_initialize(sandbox.port, {}) == 401, "HTTP without a token: 401")
        check(raw_initialize(sandbox.port, {"Authorization": "Bearer not-the-token-0000000000"}) == 401, "HTTP with a wrong token: 401")
        check(raw_initialize(sandbox.port, {"Authorization": f"Bearer {sandbox.token}", "Origin": "http://evil.example"}) == 403, "HTTP from a foreign Origin: 403")
        check(raw_initialize(sandbox.port, {"Authorization": f"Bearer {sandbox.token}"}) == 200, "HTTP with the token: 200")
    finally:
        sandbox.stop()

    # With the daemon gone, koru mcp still answers, each tool with a clear tool error.
    async with stdio_client(StdioServerParameters(command=KORU, args=["mcp"], env=sandbox.env)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("list_sessions", {})
            check(result.is_error and "no daemon at" in text(result) and "koru daemon" in text(result), f"daemon down: {text(result)}")


asyncio.run(main())
print(f"mcp-sdk: {passed} checks hold, {len(failures)} do not")
sys.exit(1 if failures else 0)
