//! GitHub Copilot Chat sessions in the VS Code family's workspaceStorage (`chatSessions/*.json` whole files and `*.jsonl` mutation logs): pure readers from bytes to `ChatSnapshot`.
