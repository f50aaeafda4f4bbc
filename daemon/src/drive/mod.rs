//! Delivering a prompt: which routes a drive can take (`planner.rs`), the fallback chain's decisions between them (`fallback.rs`, pure), and how the daemon itself delivers by OS injection (`inject.rs`; through the desktop portal with the plugin's focus reports: `portal.rs`). The state machine in `app/` applies the decisions.

pub mod fallback;
pub mod inject;
pub mod planner;
pub mod portal;
