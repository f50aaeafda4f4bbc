//! Developer tools shipped in the binary: the reference fake plugin.

pub mod fake_plugin;
