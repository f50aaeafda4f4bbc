#!/usr/bin/env python3
"""A fake model server, used only to record the corpus: the real Codex CLI, Gemini CLI,
Claude Code and Cline CLI talk to it instead of their vendors' APIs, and write their real
history files.

It speaks just enough of each wire protocol, streamed as the real APIs stream it:
- OpenAI Responses (`POST /v1/responses`, Server-Sent Events `response.*`), for Codex;
- Anthropic Messages (`POST /v1/messages`, SSE `message_start` … `message_stop`, or one
  JSON message when `stream` is false; `POST /v1/messages/count_tokens`), for Claude Code;
- Gemini (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` and
  `:generateContent`, `:countTokens`), for Gemini CLI;
- OpenAI Chat Completions (`POST /v1/chat/completions`, SSE `chat.completion.chunk` …
  `[DONE]`, or one `chat.completion` when `stream` is false), for the Cline CLI's
  `openai-compatible` provider (3.x, native tool calls) and `openai` provider (1.x/2.x,
  Cline's classic core: no `tools` in the request, tools called in XML in the text).

What the fake model answers is scripted, not generated:
- when the last thing in the conversation is a tool's result, a final answer quoting the
  result's first line;
- when the latest prompt asks to run `ls` (the words "run ls") and the request offers a
  shell tool, a call of that tool with the command `ls`;
- when the latest prompt asks a question back (the words "ask me"), Cline's classic
  `ask_followup_question`;
- otherwise the canned answer of `ANSWERS` for the prompt, or a sentence repeating it
  (for Cline's classic core, inside `attempt_completion`, since it requires a tool in
  every answer).
Side requests (titles, next-speaker checks, routing) get the same text rules; a request
with a JSON response schema gets an object that fills the schema.

Every request is appended to the log file given with `--log` (path and body), which is how
the shapes the tools send were checked.

Usage: fake_model_server.py --port 8765 --log /tmp/fake-model.log
"""

import argparse
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


PREAMBLE = "I'll run `ls` to see what is in the folder."


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

def responses_decide(body):
    """(kind, value): ("text", str) or ("call", (tool name, arguments json))."""
    items = body.get("input") or []
    tools = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    prompt = None
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
                last_kind = "prompt"
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            last_kind = "tool_output"
            last_output = item.get("output")
            if isinstance(last_output, dict):
                last_output = last_output.get("content") or json.dumps(last_output)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            last_kind = "tool_call"
    if last_kind == "tool_output":
        return "text", after_tool(last_output)
    shell = next((name for name in SHELL_TOOLS if name in tools), None)
    if wants_ls(prompt) and shell:
        if shell == "shell":
            arguments = {"command": ["bash", "-lc", "ls"]}
        elif shell == "exec_command":
            arguments = {"cmd": "ls"}
        else:
            arguments = {"command": "ls"}
        return "call", (shell, json.dumps(arguments))
    return "text", answer_for(prompt)


def responses_events(body):
    response_id = "resp_" + uuid.uuid4().hex[:24]
    model = body.get("model", "fake-model")
    kind, value = responses_decide(body)
    created = {"id": response_id, "object": "response", "created_at": int(time.time()),
               "status": "in_progress", "model": model, "output": []}
    yield "response.created", {"type": "response.created", "response": created}
    texts = [value] if kind == "text" else [PREAMBLE]
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


def messages_decide(body):
    tools = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    prompt = None
    last_kind = None
    last_output = None
    for message in body.get("messages") or []:
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
                last_kind = "prompt"
    if last_kind == "tool_output":
        return "text", after_tool(last_output)
    if wants_ls(prompt) and "Bash" in tools:
        return "call", ("Bash", {"command": "ls", "description": "List the files"})
    if not tools:
        # A side request (a title, a summary): short text.
        return "text", answer_for(prompt)
    return "text", answer_for(prompt)


def messages_message(body):
    kind, value = messages_decide(body)
    if kind == "text":
        content = [{"type": "text", "text": value}]
        stop = "end_turn"
    else:
        name, arguments = value
        content = [{"type": "text", "text": PREAMBLE},
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

def gemini_decide(body):
    tools = []
    for tool in body.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or []:
            tools.append(declaration.get("name"))
    prompt = None
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
                last_kind = "prompt"
            elif content.get("role") == "model":
                last_kind = "model"
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if config.get("responseMimeType") == "application/json":
        return "json", schema_value(schema or {})
    if last_kind == "tool_output":
        return "text", after_tool(last_output)
    if wants_ls(prompt) and "run_shell_command" in tools:
        return "call", ("run_shell_command", {"command": "ls", "description": "List the files"})
    return "text", answer_for(prompt)


def gemini_chunks(body):
    kind, value = gemini_decide(body)
    usage = {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}
    if kind == "json":
        parts_list = [[{"text": json.dumps(value)}]]
    elif kind == "text":
        parts_list = [[{"text": piece}] for piece in chunks(value)]
    else:
        name, arguments = value
        parts_list = [[{"text": PREAMBLE}], [{"functionCall": {"name": name, "args": arguments}}]]
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


def chat_decide(body):
    if classic_cline(body):
        return "text", classic_cline_decide(body)
    tools = [tool.get("function", {}).get("name") for tool in body.get("tools") or []
             if isinstance(tool, dict)]
    prompt = None
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
                last_kind = "prompt"
        elif role == "assistant":
            last_kind = "assistant"
    if last_kind == "tool_output":
        return "text", after_tool(tool_output_text(last_output))
    if wants_ls(prompt) and "run_commands" in tools:
        return "call", ("run_commands", json.dumps({"commands": ["ls"]}))
    return "text", answer_for(prompt)


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

    text = value if kind == "text" else PREAMBLE
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


def chunks(text, size=12):
    return [text[start:start + size] for start in range(0, len(text), size)] or [""]


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

    def send_sse(self, events, named=True, done=False):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            frame = (f"event: {name}\n" if named else "") + f"data: {json.dumps(data)}\n\n"
            self.wfile.write(frame.encode())
            self.wfile.flush()
            time.sleep(0.02)
        if done:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        log({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models") or "/models?" in self.path:
            self.send_json({"object": "list", "data": [], "models": []})
        else:
            self.send_json({"error": {"message": "not found"}}, 404)

    def do_POST(self):
        body = self.read_body()
        path = self.path.split("?")[0]
        log({"method": "POST", "path": self.path, "body": body})
        if path.endswith("/responses"):
            self.send_sse(responses_events(body))
        elif path.endswith("/messages/count_tokens"):
            self.send_json({"input_tokens": 100})
        elif path.endswith("/messages"):
            if body.get("stream"):
                self.send_sse(messages_events(body))
            else:
                self.send_json(messages_message(body))
        elif path.endswith("/chat/completions"):
            streamed, whole = chat_completion_parts(body)
            if body.get("stream"):
                self.send_sse((("", chunk) for chunk in streamed), named=False, done=True)
            else:
                self.send_json(whole)
        elif path.endswith(":streamGenerateContent"):
            self.send_sse((("", chunk) for chunk in gemini_chunks(body)), named=False)
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
