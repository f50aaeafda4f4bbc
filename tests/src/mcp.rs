//! MCP tool calls in tests: calling a tool with JSON arguments, and the text a tool answered, as an MCP client shows it.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RunningService, Service};
use rmcp::RoleClient;
use serde_json::Value;

/// Calls `tool` with `arguments` (a JSON object); a protocol error fails the test.
pub async fn call<S: Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    tool: &'static str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|error| panic!("{tool} answered with a protocol error: {error}"))
}

/// The text parts of a tool's result, one per line.
pub fn tool_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}
