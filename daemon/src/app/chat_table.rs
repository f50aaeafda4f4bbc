//! The chats table: one row per chat the observers (or an agent's hook) reported, found by its store and chat id, with the file it was last read from.

use std::path::Path;
use std::sync::Arc;

use koru_protocol::ChatInfo;

/// One chat: what is known of it, and where it was last read.
#[derive(Debug)]
pub(super) struct ChatRow {
    pub(super) info: ChatInfo,
    /// The file the observers last read the chat from: where `chat.read` reads it back
    /// (shared between the chats of one file, such as a database). `None`: reported by a
    /// client (a terminal agent's hook) only.
    pub(super) source: Option<Arc<Path>>,
}

/// The chats, each row keyed by its own store and chat id. Neither is copied into a key
/// (a heavy user's 10,000 chats of history arrive at every start: a map keyed by both
/// and a second one for the sources took six allocations per chat), and the rows are
/// hashed, not ordered (`chats.list` sorts what it returns).
#[derive(Default)]
pub(super) struct ChatTable {
    rows: hashbrown::HashTable<ChatRow>,
    hasher: foldhash::fast::RandomState,
}

impl std::fmt::Debug for ChatTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTable")
            .field("rows", &self.rows.len())
            .finish()
    }
}

impl ChatTable {
    fn hash(hasher: &foldhash::fast::RandomState, store: &str, chat_id: &str) -> u64 {
        use std::hash::BuildHasher;
        hasher.hash_one((store, chat_id))
    }

    /// The row of `chat_id` in `store`.
    pub(super) fn get(&self, store: &str, chat_id: &str) -> Option<&ChatRow> {
        let hash = Self::hash(&self.hasher, store, chat_id);
        self.rows.find(hash, |row| {
            row.info.chat_id == chat_id && row.info.store == store
        })
    }

    /// The row of `chat_id` in `store`, made by `make` when there is none.
    pub(super) fn row_or_insert_with(
        &mut self,
        store: &str,
        chat_id: &str,
        make: impl FnOnce() -> ChatInfo,
    ) -> &mut ChatRow {
        let hasher = &self.hasher;
        let hash = Self::hash(hasher, store, chat_id);
        self.rows
            .entry(
                hash,
                |row| row.info.chat_id == chat_id && row.info.store == store,
                |row| Self::hash(hasher, &row.info.store, &row.info.chat_id),
            )
            .or_insert_with(|| ChatRow {
                info: make(),
                source: None,
            })
            .into_mut()
    }

    /// A chat restored from the observers' summary cache, read from `source`: its row
    /// unless the table holds a newer one (which only gets the workspace it lacked).
    pub(super) fn restore(&mut self, chat: ChatInfo, source: &Arc<Path>) {
        let hasher = &self.hasher;
        let hash = Self::hash(hasher, &chat.store, &chat.chat_id);
        let entry = self.rows.entry(
            hash,
            |row| row.info.chat_id == chat.chat_id && row.info.store == chat.store,
            |row| Self::hash(hasher, &row.info.store, &row.info.chat_id),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut known) => {
                let known = known.get_mut();
                if known.info.last_activity_ms > chat.last_activity_ms {
                    if known.info.workspace.is_none() {
                        known.info.workspace = chat.workspace;
                    }
                } else {
                    known.info = chat;
                }
                known.source = Some(source.clone());
            }
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                vacant.insert(ChatRow {
                    info: chat,
                    source: Some(source.clone()),
                });
            }
        }
    }

    /// Room for `additional` more rows.
    pub(super) fn reserve(&mut self, additional: usize) {
        let hasher = &self.hasher;
        self.rows.reserve(additional, |row| {
            Self::hash(hasher, &row.info.store, &row.info.chat_id)
        });
    }

    /// Every row, in no particular order.
    pub(super) fn rows(&self) -> impl Iterator<Item = &ChatRow> {
        self.rows.iter()
    }

    /// Every chat, in no particular order.
    pub(super) fn values(&self) -> impl Iterator<Item = &ChatInfo> {
        self.rows.iter().map(|row| &row.info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koru_protocol::ObservedChatState;

    fn chat(store: &str, chat_id: &str, at: u64, workspace: Option<&str>) -> ChatInfo {
        ChatInfo {
            store: store.into(),
            chat_id: chat_id.into(),
            workspace: workspace.map(str::to_string),
            state: ObservedChatState::Idle,
            last_activity_ms: at,
            last_prompt: None,
        }
    }

    #[test]
    fn rows_are_found_by_store_and_chat_id_and_a_restored_row_never_replaces_a_newer_one() {
        let mut table = ChatTable::default();
        let file: Arc<Path> = Arc::from(Path::new("/h/a.jsonl"));
        table.restore(chat("s1", "a", 10, None), &file);
        table.restore(chat("s2", "a", 5, Some("/w2")), &file);
        table.row_or_insert_with("s1", "b", || chat("s1", "b", 7, None));
        // Known already: `make` is not used.
        table
            .row_or_insert_with("s1", "b", || chat("s1", "b", 99, None))
            .info
            .state = ObservedChatState::Replying;
        assert_eq!(table.values().count(), 3);
        assert_eq!(table.get("s1", "a").unwrap().info.last_activity_ms, 10);
        assert_eq!(
            table.get("s2", "a").unwrap().info.workspace.as_deref(),
            Some("/w2")
        );
        let b = &table.get("s1", "b").unwrap();
        assert_eq!(
            (b.info.last_activity_ms, b.info.state),
            (7, ObservedChatState::Replying)
        );
        assert!(b.source.is_none());
        assert!(table.get("s1", "c").is_none());
        assert!(table.get("s3", "a").is_none());

        // An older restored row fills only the workspace; a newer one replaces the row.
        let other: Arc<Path> = Arc::from(Path::new("/h/b.jsonl"));
        table.restore(chat("s1", "a", 3, Some("/w")), &other);
        let a = &table.get("s1", "a").unwrap();
        assert_eq!(
            (a.info.last_activity_ms, a.info.workspace.as_deref()),
            (10, Some("/w"))
        );
        assert_eq!(a.source.as_deref(), Some(Path::new("/h/b.jsonl")));
        table.restore(chat("s1", "a", 20, None), &file);
        let a = &table.get("s1", "a").unwrap();
        assert_eq!(
            (a.info.last_activity_ms, a.info.workspace.as_deref()),
            (20, None)
        );
        assert_eq!(table.rows().count(), 3);
    }
}
