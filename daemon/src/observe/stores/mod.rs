//! The store formats, one pure reader each: Claude Code JSONL, Codex rollouts, Copilot chat sessions, Cursor's SQLite databases, Cline/Roo/Kilo task folders, Cline 4 SDK sessions, Gemini CLI sessions, and opencode's event stream (with its follower). Which store a path belongs to is `locations.rs`'s; following files is `follow.rs`'s.

pub mod claude_code;
pub mod cline;
pub mod cline_sdk;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod opencode;
