//! Koru as an MCP server for controller LLMs: the tools (`server`), what they do through the daemon (`backend`), and their compact text (`format`). Served over stdio by `koru mcp` and over streamable HTTP by `koru daemon --http`.

pub mod backend;
pub mod format;
pub mod server;
