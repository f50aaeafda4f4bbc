//! Cursor's composer chats in `state.vscdb` (SQLite, WAL): read-only access and a pure mapping from composer and bubble rows to `ChatSnapshot`.
