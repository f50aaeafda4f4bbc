//! The drive planner and its OS-injection executor: which routes a drive can take (`planner.rs`) and how the daemon itself delivers by OS injection (`inject.rs`). The state machine in `app/` runs the fallback chain.

pub mod inject;
pub mod planner;
