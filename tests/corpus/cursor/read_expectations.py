# Writes state.vscdb.expect.json by reading state.vscdb with Python's sqlite3 and applying the rules of docs/observers.md ("Cursor"): an independent reading, not Koru's output.
"""Usage: python3 read_expectations.py  (in tests/corpus/cursor/)

Rules applied (docs/observers.md, Cursor):
- ItemTable `composer.composerData`: each composer of `allComposers` with an inline
  `conversation` array is a chat (id `composerId`). A bubble of `type` 1 starts a turn,
  the last bubble of `type` 2 with text after it is the turn's reply. Every turn but the
  last is complete; the last one's state is the composer's `status` (`completed` with an
  answer: complete). The chat's time is `lastUpdatedAt`, else `createdAt`.
- ItemTable `workbench.panel.aichat.view.aichat.chatdata`: each tab is a chat (id `tabId`);
  trailing user bubbles with no text are the input box, not prompts; a `user` bubble starts
  a turn, the last `ai` bubble with text is its reply; the panel records no state, so the
  last answered turn ends by inference after the quiet period. The tab's time is
  `lastSendTime`.
- Excerpts: whitespace runs collapsed to one space; longer than 80 characters: the first
  79 and an ellipsis.
"""
import datetime
import json
import sqlite3

PLACE_DIR = "$XDG_CONFIG_HOME/Cursor/User/workspaceStorage/6ae6eb0531606929850a78b0a04649f1"
WORKSPACE = "/home/ydebray/Documents/mobilechat"
STORE = "chat_history_cursor_legacy_sqlite"


def excerpt(text):
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:79] + "\u2026"


def iso(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def turns_of(bubbles, is_user, is_answer):
    turns = []
    for bubble in bubbles:
        text = bubble.get("text") or ""
        if is_user(bubble):
            turns.append({"prompt": text, "reply": ""})
        elif is_answer(bubble) and turns and text.strip():
            turns[-1]["reply"] = text
    return turns


def chat(chat_id, source, turns, last_ms, last_inferred):
    events = ["chat_seen"]
    replies = []
    for index, turn in enumerate(turns):
        events += ["prompt_seen", "reply_started"]
        last = index == len(turns) - 1
        events.append("reply_completed (inferred)" if last and last_inferred else "reply_completed")
        replies.append(excerpt(turn["reply"]))
    return {
        "chat_id": chat_id,
        "source": source,
        "turns": len(turns),
        "last_prompt": excerpt(turns[-1]["prompt"]) if turns else None,
        "state": "idle",
        "last_activity": iso(last_ms),
        "events": events,
        "replies": replies,
    }


def main():
    db = sqlite3.connect("file:state.vscdb?immutable=1", uri=True)
    values = dict(db.execute("SELECT key, value FROM ItemTable"))
    chats = []
    composers = json.loads(values["composer.composerData"])
    for composer in composers["allComposers"]:
        if not isinstance(composer.get("conversation"), list):
            continue
        assert composer["status"] == "completed", composer["composerId"]
        turns = turns_of(composer["conversation"], lambda b: b.get("type") == 1,
                         lambda b: b.get("type") == 2)
        assert turns and turns[-1]["reply"], composer["composerId"]
        last_ms = composer.get("lastUpdatedAt") or composer["createdAt"]
        chats.append(chat(composer["composerId"], "composer.composerData", turns, last_ms, False))
    panel = json.loads(values["workbench.panel.aichat.view.aichat.chatdata"])
    for tab in panel["tabs"]:
        bubbles = list(tab["bubbles"])
        while bubbles and bubbles[-1].get("type") == "user" and not (bubbles[-1].get("text") or "").strip():
            bubbles.pop()
        turns = turns_of(bubbles, lambda b: b.get("type") == "user", lambda b: b.get("type") == "ai")
        assert turns and turns[-1]["reply"], tab["tabId"]
        chats.append(chat(tab["tabId"], "workbench.panel.aichat.view.aichat.chatdata", turns,
                          tab["lastSendTime"], True))
    expect = {
        "store": STORE,
        "place": PLACE_DIR + "/state.vscdb",
        "beside": {PLACE_DIR + "/workspace.json": "workspace.json"},
        "workspace": WORKSPACE,
        "chats": chats,
    }
    with open("state.vscdb.expect.json", "w", encoding="utf-8") as out:
        json.dump(expect, out, indent=2, ensure_ascii=False)
        out.write("\n")


main()
