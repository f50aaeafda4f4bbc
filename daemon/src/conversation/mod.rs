//! Conversations read back from the chat stores on request: one model of a chat (turns: prompt, whole reply, steps with outcomes, times, model, usage) for every store Koru observes, built from the store's files when asked (`chat.read`) and never kept, so the daemon's memory does not grow with replies or history. `model` is the model and the collector that keeps only the turns asked for; `stores/` the pure readers, one per format.

pub mod answer;
pub mod items;
pub mod model;
pub mod read;
pub mod redact;
pub mod stores;

pub use answer::{evidence_lines, record_place, step_line, wire_turn, Paging};
pub use items::{ConversationItem, Item, ItemKind, ItemOutcome, SourceRecord};
pub use model::{Keep, Turn, TurnCollector};
pub use read::{
    read_chat, read_items, ChatReadFinished, ChatReader, ChatTurns, ItemsSummary, ReadError,
    ReadRequest,
};
