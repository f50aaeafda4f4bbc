//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.json` and, since 0.39, `*.jsonl`): pure readers from bytes to `ChatSnapshot`.
