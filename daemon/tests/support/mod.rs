//! Helpers shared by the daemon's integration tests and benchmarks: stand-in desktop services.

pub mod portal;
