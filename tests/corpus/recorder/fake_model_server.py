#!/usr/bin/env python3
"""A fake model server: the real Codex CLI, Gemini CLI, Claude Code, Cline CLI and
opencode talk to it instead of their vendors' APIs. It records the corpus (record.sh beside
it: the agents write their real history files) and serves the interactive agents of
tests/agents/ (tmux drives), which need a slow reply, a permission prompt and a log of the
prompts received.

It speaks just enough of each wire protocol, streamed as the real APIs stream it:
- OpenAI Responses (`POST /v1/responses`, Server-Sent Events `response.*`), for Codex;
- Anthropic Messages (`POST /v1/messages`, SSE `message_start` … `message_stop`, or one
  JSON message when `stream` is false; `POST /v1/messages/count_tokens`), for Claude Code;
- Gemini (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` and
  `:generateContent`, `:countTokens`), for Gemini CLI;
- OpenAI Chat Completions (`POST /v1/chat/completions`, SSE `chat.completion.chunk` …
  `[DONE]`, or one `chat.completion` when `stream` is false), for the Cline CLI's
  `openai-compatible` provider (3.x, native tool calls) and `openai` provider (1.x/2.x,
  Cline's classic core: no `tools` in the request, tools called in XML in the text), and
  opencode's `@ai-sdk/openai-compatible` provider (its shell tool is `bash`).

What the fake model answers is scripted, not generated:
- when the last thing in the conversation is a tool's result, a final answer quoting the
  result's first line;
- when the latest prompt asks to run `ls` (the words "run ls") and the request offers a
  shell tool, a call of that tool with the command `ls`;
- when it contains "needs permission", a call of the shell tool with
  `touch koru-permission-probe`, which the agents ask the user's permission for in their
  default modes (for Codex with `sandbox_permissions: "require_escalated"`, since its
  sandbox would let a write in the workspace run unasked);
- when it contains "reply slowly", a longer answer streamed over `SLOW_SECONDS` (a third
  of it as a pause before the text starts, as a model "thinking");
- when the latest prompt asks a question back (the words "ask me"), Cline's classic
  `ask_followup_question`;
- otherwise the canned answer of `ANSWERS` for the prompt, or a sentence repeating it
  (for Cline's classic core, inside `attempt_completion`, since it requires a tool in
  every answer).
Side requests (titles, next-speaker checks, routing) get the same text rules; a request
with a JSON response schema gets an object that fills the schema.

Every request is appended to the log file given with `--log` (path, headers, body and how
it was classified), which is how the shapes the tools send were checked.

What it received, for tests (`classify` tells the kinds apart):
- `GET /koru/prompts`: the user prompts, in order, once each: `[{"seq", "time", "api",
  "session", "prompt", "requests"}]`. A prompt is the text of the latest user message of a
  main request (one that offers tools) whose conversation ends with it; requests after a
  tool's result ("continuation") and side requests (no tools, or a JSON schema: titles,
  routing, next-speaker checks) are left out. A retried request counts once (`requests`
  says how often it came).
- `GET /koru/requests`: every model request with its kind.
- `POST /koru/reset`: forget both.

Usage: fake_model_server.py --port 8765 --log /tmp/fake-model.log
"""

import argparse
import hashlib
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWERS = {
    "What is the capital of France? Answer in one sentence.": "The capital of France is Paris.",
    "And of Italy? One sentence too.": "The capital of Italy is Rome.",
    "Now say it in French.": "La capitale de l'Italie est Rome.",
}

SHELL_TOOLS = ("shell_command", "shell", "exec_command", "Bash", "run_shell_command",
               "run_commands")

LOG_LOCK = threading.Lock()
LOG_PATH = None


def log(entry):
    if LOG_PATH is None:
        return
    with LOG_LOCK, open(LOG_PATH, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def answer_for(prompt):
    prompt = (prompt or "").strip()
    for question, answer in ANSWERS.items():
        if prompt.startswith(question):
            return answer
    first = prompt.splitlines()[0] if prompt else ""
    return f"You asked: {first[:60]}. This is the fake model's answer."


def wants_ls(prompt):
    return "run ls" in (prompt or "").lower()


PERMISSION_PROBE = "touch koru-permission-probe"


def wanted_command(prompt):
    """The shell command the latest prompt asks for: `ls` ("run ls"), or a command that
    changes the folder, which the agents ask the user's permission for in their default
    modes ("needs permission"); None otherwise."""
    if wants_ls(prompt):
        return "ls"
    if "needs permission" in (prompt or "").lower():
        return PERMISSION_PROBE
    return None


def wants_slow(prompt):
    return "reply slowly" in (prompt or "").lower()


SLOW_SECONDS = 6.0
SLOW_ANSWER = ("I am replying slowly, a few words at a time, so that you can watch me "
               "write: one, two, three, four, five, six, seven, eight, nine, ten. Done.")

PREAMBLE = "I'll run `ls` to see what is in the folder."


def preamble(command):
    return PREAMBLE if command in (None, "ls") else f"I'll run `{command}`."


def final_answer(prompt, output):
    """The answer after a command ran."""
    if wanted_command(prompt) == PERMISSION_PROBE:
        return "I ran `touch koru-permission-probe`: the file is there now."
    return after_tool(output)


def text_answer(prompt):
    return SLOW_ANSWER if wants_slow(prompt) else answer_for(prompt)


def after_tool(output):
    """The final answer after a command ran: the command's output lines, without the
    headers the tools wrap them in (Codex's `Output:`, Gemini CLI's `<untrusted_context>`
    and `Process Group PGID:`)."""
    lines = [line.strip() for line in str(output).splitlines() if line.strip()]
    collecting = not any(line.startswith("Output:") for line in lines)
    listed = []
    for line in lines:
        if line.startswith("Output:"):
            collecting = True
            line = line[len("Output:"):].strip()
            if not line:
                continue
        elif line.startswith("<") or re.match(r"^[A-Z][A-Za-z ]+: ", line):
            if listed:
                break
            continue
        if collecting:
            listed.append(line)
    return f"`ls` printed: {', '.join(listed[:10]) or 'nothing'}."


def schema_value(schema):
    """An object that fills a JSON schema (enough for the tools' side requests)."""
    if not isinstance(schema, dict):
        return "user"
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema and schema["enum"]:
        return schema["enum"][-1] if "user" not in schema["enum"] else "user"
    if kind == "object":
        return {name: schema_value(sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    return "user"


# --- OpenAI Responses (Codex) -------------------------------------------------------

def responses_scan(body):
    """What a Responses request holds: the latest prompt, what came last (a "prompt", a
    "tool_output", a "tool_call"), the last tool output, and the tools offered."""
    items = body.get("input") or []
    tools = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    prompt = None
    prompts = 0
    last_kind = None
    last_output = None
    for item in items:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            texts = [part.get("text", "") for part in item.get("content") or []
                     if isinstance(part, dict) and part.get("type") == "input_text"]
            text = "\n".join(texts)
            # Codex puts its environment context in user messages too.
            if text and not text.lstrip().startswith("<") and "AGENTS.md" not in text[:200]:
                prompt = text
                prompts += 1
                last_kind = "prompt"
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            last_kind = "tool_output"
            last_output = item.get("output")
            if isinstance(last_output, dict):
                last_output = last_output.get("content") or json.dumps(last_output)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            last_kind = "tool_call"
    return {"prompt": prompt, "prompts": prompts, "last_kind": last_kind,
            "last_output": last_output, "tools": tools}


def responses_decide(body):
    """(kind, value): ("text", str) or ("call", (tool name, arguments json))."""
    scan = responses_scan(body)
    prompt, tools = scan["prompt"], scan["tools"]
    if scan["last_kind"] == "tool_output":
        return "text", final_answer(prompt, scan["last_output"])
    shell = next((name for name in SHELL_TOOLS if name in tools), None)
    command = wanted_command(prompt)
    if command and shell:
        if shell == "shell":
            arguments = {"command": ["bash", "-lc", command]}
        elif shell == "exec_command":
            arguments = {"cmd": command}
        else:
            arguments = {"command": command}
        if command == PERMISSION_PROBE:
            # Codex runs commands in its sandbox without asking (a file written inside
            # the workspace is allowed); asking to run outside it is what needs approval.
            arguments["sandbox_permissions"] = "require_escalated"
            arguments["justification"] = "Koru's test asks for a permission prompt."
        return "call", (shell, json.dumps(arguments))
    return "text", text_answer(prompt)


def responses_events(body):
    response_id = "resp_" + uuid.uuid4().hex[:24]
    model = body.get("model", "fake-model")
    kind, value = responses_decide(body)
    created = {"id": response_id, "object": "response", "created_at": int(time.time()),
               "status": "in_progress", "model": model, "output": []}
    yield "response.created", {"type": "response.created", "response": created}
    texts = [value] if kind == "text" else [preamble(call_command(value))]
    output = []
    for text in texts:
        index = len(output)
        item_id = "msg_" + uuid.uuid4().hex[:24]
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress",
                "content": []}
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "output_index": index, "item": item}
        for piece in chunks(text):
            yield "response.output_text.delta", {"type": "response.output_text.delta",
                                                 "item_id": item_id, "output_index": index,
                                                 "content_index": 0, "delta": piece}
        done = dict(item, status="completed",
                    content=[{"type": "output_text", "text": text, "annotations": []}])
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "output_index": index, "item": done}
        output.append(done)
    if kind == "call":
        name, arguments = value
        index = len(output)
        done = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:24],
                "call_id": "call_" + uuid.uuid4().hex[:24], "name": name,
                "arguments": arguments, "status": "completed"}
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "output_index": index,
                                             "item": dict(done, arguments="",
                                                          status="in_progress")}
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "output_index": index, "item": done}
        output.append(done)
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 120}
    yield "response.completed", {"type": "response.completed",
                                 "response": dict(created, status="completed",
                                                  output=output, usage=usage)}


# --- Anthropic Messages (Claude Code) ----------------------------------------------

def blocks_of(content):
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def messages_scan(body):
    tools = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    prompt = None
    prompts = 0
    last_kind = None
    last_output = None
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            continue  # Claude Code 2.1.3xx sends its environment as a system message last
        if message.get("role") != "user":
            last_kind = "assistant"
            continue
        for block in blocks_of(message.get("content")):
            if block.get("type") == "tool_result":
                last_kind = "tool_output"
                output = block.get("content")
                if isinstance(output, list):
                    output = "\n".join(part.get("text", "") for part in output
                                       if isinstance(part, dict))
                last_output = output
            elif block.get("type") == "text":
                text = block.get("text", "")
                if text.lstrip().startswith("<"):
                    continue  # system reminders and command wrappers
                prompt = text
                prompts += 1
                last_kind = "prompt"
    return {"prompt": prompt, "prompts": prompts, "last_kind": last_kind,
            "last_output": last_output, "tools": tools}


def messages_decide(body):
    scan = messages_scan(body)
    prompt, tools = scan["prompt"], scan["tools"]
    if scan["last_kind"] == "tool_output":
        return "text", final_answer(prompt, scan["last_output"])
    command = wanted_command(prompt)
    if command and "Bash" in tools:
        description = "List the files" if command == "ls" else "Create a probe file"
        return "call", ("Bash", {"command": command, "description": description})
    if not tools:
        # A side request (a title, a summary): short text.
        return "text", answer_for(prompt)
    return "text", text_answer(prompt)


def messages_message(body):
    kind, value = messages_decide(body)
    if kind == "text":
        content = [{"type": "text", "text": value}]
        stop = "end_turn"
    else:
        name, arguments = value
        content = [{"type": "text", "text": preamble(arguments.get("command"))},
                   {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": name,
                    "input": arguments}]
        stop = "tool_use"
    return {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
            "model": body.get("model", "fake-model"), "content": content,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def messages_events(body):
    message = messages_message(body)
    start = dict(message, content=[], stop_reason=None,
                 usage=dict(message["usage"], output_tokens=1))
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            for piece in chunks(block["text"]):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": piece}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": dict(block, input={})}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": json.dumps(block["input"])}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"],
                                      "stop_sequence": None},
                            "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}


# --- Gemini (Gemini CLI) --------------------------------------------------------------

def gemini_scan(body):
    tools = []
    for tool in body.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or []:
            tools.append(declaration.get("name"))
    prompt = None
    prompts = 0
    last_kind = None
    last_output = None
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "functionResponse" in part:
                last_kind = "tool_output"
                response = part["functionResponse"].get("response") or {}
                last_output = response.get("output", json.dumps(response))
            elif content.get("role") == "user" and "text" in part:
                text = part["text"]
                if text.lstrip().startswith("<") or text.startswith("This is the Gemini CLI"):
                    continue  # the session context Gemini CLI sends first
                prompt = text
                prompts += 1
                last_kind = "prompt"
            elif content.get("role") == "model":
                last_kind = "model"
    return {"prompt": prompt, "prompts": prompts, "last_kind": last_kind,
            "last_output": last_output, "tools": tools}


def gemini_decide(body):
    scan = gemini_scan(body)
    prompt, tools = scan["prompt"], scan["tools"]
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if config.get("responseMimeType") == "application/json":
        return "json", schema_value(schema or {})
    if scan["last_kind"] == "tool_output":
        return "text", final_answer(prompt, scan["last_output"])
    command = wanted_command(prompt)
    if command and "run_shell_command" in tools:
        description = "List the files" if command == "ls" else "Create a probe file"
        return "call", ("run_shell_command", {"command": command, "description": description})
    if not tools:
        return "text", answer_for(prompt)
    return "text", text_answer(prompt)


def gemini_chunks(body):
    kind, value = gemini_decide(body)
    usage = {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}
    if kind == "json":
        parts_list = [[{"text": json.dumps(value)}]]
    elif kind == "text":
        parts_list = [[{"text": piece}] for piece in chunks(value)]
    else:
        name, arguments = value
        parts_list = [[{"text": preamble(arguments.get("command"))}],
                      [{"functionCall": {"name": name, "args": arguments}}]]
    for index, parts in enumerate(parts_list):
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk = {"candidates": [candidate], "modelVersion": "fake-model",
                 "responseId": uuid.uuid4().hex[:20]}
        if index == len(parts_list) - 1:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = usage
        yield chunk


# --- OpenAI Chat Completions (Cline CLI) -------------------------------------------

def chat_text(content):
    """The text of a Chat Completions message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or []
                     if isinstance(part, dict) and part.get("type") == "text")


def classic_cline(body):
    """Whether the request comes from Cline's classic core (CLI 1.x/2.x, the extension):
    no native tools, and a system prompt that teaches XML tool use."""
    messages = body.get("messages") or []
    system = chat_text(messages[0].get("content")) if messages else ""
    return not body.get("tools") and "attempt_completion" in system


CLASSIC_PROMPT_TAGS = ("task", "feedback", "user_message", "answer")


def classic_cline_decide(body):
    """Cline's classic core: the last user message is either a tool's result
    (`[execute_command for 'ls'] Result:`) or carries the user's words in one of
    `CLASSIC_PROMPT_TAGS`; the answer is one XML tool use."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    text = chat_text(users[-1].get("content")) if users else ""
    if text.lstrip().startswith("[execute_command for"):
        # The result is the message's first part (reminders and the environment follow).
        content = users[-1].get("content")
        result = chat_text(content[:1] if isinstance(content, list) else content)
        result = result.split("Output:", 1)[1] if "Output:" in result else result
        return f"<attempt_completion>\n<result>\n{after_tool(result)}\n</result>\n</attempt_completion>"
    prompt = ""
    last_at = -1
    for tag in CLASSIC_PROMPT_TAGS:
        at = text.rfind(f"<{tag}>")
        end = text.find(f"</{tag}>", at)
        if at > last_at and end > at:
            last_at = at
            prompt = text[at + len(tag) + 2:end].strip()
    if wants_ls(prompt):
        return (f"{PREAMBLE}\n\n<execute_command>\n<command>ls</command>\n"
                "<requires_approval>false</requires_approval>\n</execute_command>")
    if "ask me" in prompt.lower():
        return ("<ask_followup_question>\n<question>Which file should I look at first?"
                "</question>\n<options>[\"hello.py\", \"notes.txt\"]</options>\n"
                "</ask_followup_question>")
    return (f"<attempt_completion>\n<result>\n{answer_for(prompt)}\n</result>\n"
            "</attempt_completion>")


def chat_scan(body):
    tools = [tool.get("function", {}).get("name") for tool in body.get("tools") or []
             if isinstance(tool, dict)]
    prompt = None
    prompts = 0
    last_kind = None
    last_output = None
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "tool":
            last_kind = "tool_output"
            last_output = chat_text(message.get("content"))
        elif role == "user":
            text = chat_text(message.get("content"))
            if text and not text.lstrip().startswith("<"):
                prompt = text
                prompts += 1
                last_kind = "prompt"
        elif role == "assistant":
            last_kind = "assistant"
    return {"prompt": prompt, "prompts": prompts, "last_kind": last_kind,
            "last_output": last_output, "tools": tools}


def chat_decide(body):
    if classic_cline(body):
        return "text", classic_cline_decide(body)
    scan = chat_scan(body)
    prompt, tools = scan["prompt"], scan["tools"]
    if scan["last_kind"] == "tool_output":
        return "text", final_answer(prompt, tool_output_text(scan["last_output"]))
    command = wanted_command(prompt)
    if command and "run_commands" in tools:
        return "call", ("run_commands", json.dumps({"commands": [command]}))
    if command and "bash" in tools:  # opencode
        description = "List the files" if command == "ls" else "Create a probe file"
        return "call", ("bash", json.dumps({"command": command, "description": description}))
    if not tools:
        return "text", answer_for(prompt)
    return "text", text_answer(prompt)


def tool_output_text(output):
    """A tool result as text: Cline sends its tools' results as JSON (a list of
    `{query, result}` objects); other tools send plain text."""
    try:
        value = json.loads(output)
    except (TypeError, ValueError):
        return output
    if isinstance(value, list):
        return "\n".join(str(item.get("result", item.get("output", "")))
                         if isinstance(item, dict) else str(item) for item in value)
    if isinstance(value, dict):
        return str(value.get("result", value.get("output", output)))
    return output


def chat_completion_parts(body):
    """(chunks, message): the streamed `chat.completion.chunk`s and the whole message."""
    completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
    model = body.get("model", "fake-model")
    created = int(time.time())
    kind, value = chat_decide(body)

    def chunk(delta, finish=None):
        return {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text = value if kind == "text" else preamble(call_command(value))
    streamed = [chunk({"role": "assistant", "content": ""})]
    streamed += [chunk({"content": piece}) for piece in chunks(text)]
    message = {"role": "assistant", "content": text}
    if kind == "call":
        name, arguments = value
        call = {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                "function": {"name": name, "arguments": arguments}}
        streamed.append(chunk({"tool_calls": [dict(call, index=0)]}))
        message["tool_calls"] = [call]
        finish = "tool_calls"
    else:
        finish = "stop"
    streamed.append(chunk({}, finish))
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    streamed.append({"id": completion_id, "object": "chat.completion.chunk",
                     "created": created, "model": model, "choices": [], "usage": usage})
    whole = {"id": completion_id, "object": "chat.completion", "created": created,
             "model": model, "usage": usage,
             "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    return streamed, whole


def call_command(call):
    """The shell command of a ("call", value) decision's value, for the preamble."""
    _, arguments = call
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    command = arguments.get("command", arguments.get("cmd", arguments.get("commands")))
    if isinstance(command, list):
        command = command[-1]
    return command


def chunks(text, size=12):
    return [text[start:start + size] for start in range(0, len(text), size)] or [""]


# --- What the server was asked (`GET /koru/prompts`, `GET /koru/requests`) -----------

RECORD_LOCK = threading.Lock()
REQUESTS = []  # every model request, classified
PROMPTS = []   # one entry per user prompt, in the order they arrived
PROMPT_KEYS = {}


def request_session(api, body, headers):
    """The agent's conversation id, where the request carries one."""
    if api == "anthropic-messages":
        user = (body.get("metadata") or {}).get("user_id") or ""
        try:
            return json.loads(user).get("session_id") or user
        except (ValueError, AttributeError):
            found = re.search(r"session_([0-9a-f-]{36})", user)
            return found.group(1) if found else user or None
    # Codex: session-id (and prompt_cache_key); opencode: x-session-id; Gemini CLI: none.
    for name in ("session-id", "session_id", "x-session-id", "x-claude-code-session-id",
                 "conversation_id"):
        if headers.get(name):
            return headers.get(name)
    found = body.get("prompt_cache_key") or body.get("user_prompt_id")
    if found:
        return found
    # None sent (Gemini CLI): the conversation's first item stands for it. Gemini CLI's is
    # its session context, which names the date, the folder and the HOME's temporary
    # folder, so two sessions differ unless they share all three.
    first = (body.get("contents") or body.get("messages") or body.get("input") or [None])[0]
    if first is None:
        return None
    digest = hashlib.sha1(json.dumps(first, sort_keys=True).encode()).hexdigest()[:16]
    return "first-item-" + digest


def classify(api, path, body, headers):
    """One model request as Koru's tests see it:
    - "prompt": a main request whose conversation ends with the user's prompt, the request
      an agent sends right after the user submitted;
    - "continuation": a main request that goes on after a tool's result (same prompt);
    - "side": a request without tools (titles, summaries, Gemini CLI's next-speaker check
      and routing, Claude Code's quota check), or one asking for JSON;
    - "other": token counting, embeddings, Cline's classic core."""
    scan = None
    if api == "openai-responses":
        scan = responses_scan(body)
    elif api == "anthropic-messages" and path.endswith("/messages"):
        scan = messages_scan(body)
    elif api == "gemini" and path.endswith("enerateContent"):
        scan = gemini_scan(body)
    elif api == "openai-chat" and not classic_cline(body):
        scan = chat_scan(body)
    if scan is None:
        return {"kind": "other"}
    config = body.get("generationConfig") or {}
    if not scan["tools"] or config.get("responseMimeType") == "application/json":
        kind = "side"
    elif scan["last_kind"] == "prompt":
        kind = "prompt"
    else:
        kind = "continuation"
    return {"kind": kind, "prompt": scan["prompt"], "prompts": scan["prompts"],
            "session": request_session(api, body, headers)}


def record(api, path, body, headers):
    entry = dict(classify(api, path, body, headers), api=api, path=path, time=time.time())
    with RECORD_LOCK:
        entry["seq"] = len(REQUESTS) + 1
        REQUESTS.append(entry)
        if entry["kind"] == "prompt":
            # A retried request (same conversation, same number of prompts, same text)
            # counts once; `requests` tells how often it came.
            key = (api, entry["session"], entry["prompts"], entry["prompt"])
            if key in PROMPT_KEYS:
                PROMPT_KEYS[key]["requests"] += 1
            else:
                prompt = {"seq": entry["seq"], "time": entry["time"], "api": api,
                          "session": entry["session"], "prompt": entry["prompt"],
                          "requests": 1}
                PROMPT_KEYS[key] = prompt
                PROMPTS.append(prompt)
    return entry


# --- HTTP ---------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "zstd":
            return {"_undecoded": "zstd"}
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def send_json(self, value, status=200):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events, named=True, done=False, pace=None):
        """`pace`: seconds over which to spread the events (a slow reply): a third of it
        before the second event (the model "thinking"), the rest between the others."""
        delay = 0.02
        pause = 0.0
        if pace:
            events = list(events)
            pause = pace / 3
            delay = (pace - pause) / max(len(events) - 1, 1)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for index, (name, data) in enumerate(events):
            frame = (f"event: {name}\n" if named else "") + f"data: {json.dumps(data)}\n\n"
            self.wfile.write(frame.encode())
            self.wfile.flush()
            time.sleep(pause if index == 0 and pause else delay)
        if done:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        log({"method": "GET", "path": self.path})
        if self.path.split("?")[0] == "/koru/prompts":
            with RECORD_LOCK:
                self.send_json(list(PROMPTS))
        elif self.path.split("?")[0] == "/koru/requests":
            with RECORD_LOCK:
                self.send_json(list(REQUESTS))
        elif self.path.rstrip("/").endswith("/models") or "/models?" in self.path:
            self.send_json({"object": "list", "data": [], "models": []})
        else:
            self.send_json({"error": {"message": "not found"}}, 404)

    def do_POST(self):
        body = self.read_body()
        path = self.path.split("?")[0]
        if path == "/koru/reset":
            with RECORD_LOCK:
                REQUESTS.clear()
                PROMPTS.clear()
                PROMPT_KEYS.clear()
            self.send_json({"ok": True})
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        api = api_of(path)
        entry = record(api, path, body, headers) if api else {"kind": "other"}
        log({"method": "POST", "path": self.path, "body": body, "headers": headers,
             "koru": entry})
        pace = SLOW_SECONDS if (entry["kind"] == "prompt"
                                and wants_slow(entry.get("prompt"))) else None
        if path.endswith("/responses"):
            self.send_sse(responses_events(body), pace=pace)
        elif path.endswith("/messages/count_tokens"):
            self.send_json({"input_tokens": 100})
        elif path.endswith("/messages"):
            if body.get("stream"):
                self.send_sse(messages_events(body), pace=pace)
            else:
                self.send_json(messages_message(body))
        elif path.endswith("/chat/completions"):
            streamed, whole = chat_completion_parts(body)
            if body.get("stream"):
                self.send_sse((("", chunk) for chunk in streamed), named=False, done=True,
                              pace=pace)
            else:
                self.send_json(whole)
        elif path.endswith(":streamGenerateContent"):
            self.send_sse((("", chunk) for chunk in gemini_chunks(body)), named=False,
                          pace=pace)
        elif path.endswith(":generateContent"):
            merged = list(gemini_chunks(body))
            parts = [part for chunk in merged for part in chunk["candidates"][0]["content"]["parts"]]
            if parts and all("text" in part for part in parts):
                parts = [{"text": "".join(part["text"] for part in parts)}]
            last = merged[-1]
            last["candidates"][0]["content"]["parts"] = parts
            self.send_json(last)
        elif path.endswith(":countTokens"):
            self.send_json({"totalTokens": 100})
        elif path.endswith(":embedContent") or path.endswith(":batchEmbedContents"):
            self.send_json({"embeddings": [{"values": [0.0] * 8}]})
        else:
            self.send_json({"error": {"message": f"the fake model has no {path}"}}, 404)


def api_of(path):
    if path.endswith("/responses"):
        return "openai-responses"
    if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
        return "anthropic-messages"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    return None


def main():
    global LOG_PATH
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--log")
    args = parser.parse_args()
    LOG_PATH = args.log
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"fake model server on http://127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
