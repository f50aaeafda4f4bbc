//! Reading MCP tool results in tests: the text a tool answered, as an MCP client shows it.

use rmcp::model::CallToolResult;

/// The text parts of a tool's result, one per line.
pub fn tool_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
