//! Turns the built-in registry (`default.yaml`) into what a start reads instead of its YAML: the same document as JSON, and the position of every key and list item as a table sorted by path. The daemon parsed the YAML twice at every start (once for values, once for positions): a tenth of a restart's instructions.
//!
//! Nothing is judged here: a document that does not convert is written as `null`, and
//! the registry then reads the YAML itself, with its diagnostics (`load::parse_layer`).

#[allow(dead_code)]
#[path = "src/spans.rs"]
mod spans;

use std::fmt::Write as _;

fn main() {
    println!("cargo::rerun-if-changed=default.yaml");
    println!("cargo::rerun-if-changed=src/spans.rs");
    let text = std::fs::read_to_string("default.yaml").expect("registry/default.yaml is readable");
    let json = serde_yaml_ng::from_str::<serde_json::Value>(&text).unwrap_or_default();
    let mut positions: Vec<(String, spans::Position)> = spans::SpanIndex::build(&text)
        .positions
        .into_iter()
        .collect();
    positions.sort_by(|a, b| a.0.cmp(&b.0));
    let mut table = String::from("&[\n");
    for (path, position) in &positions {
        let _ = writeln!(
            table,
            "    ({path:?}, Position {{ line: {}, column: {} }}),",
            position.line, position.column
        );
    }
    table.push_str("]\n");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("default_registry.json"), json.to_string())
        .expect("OUT_DIR is writable");
    std::fs::write(out.join("default_spans.rs"), table).expect("OUT_DIR is writable");
}
