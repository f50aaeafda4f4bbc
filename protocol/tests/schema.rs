//! Keeps docs/protocol.schema.json equal to the schema generated from the protocol types (refresh with `UPDATE_SCHEMA=1 cargo test -p koru-protocol --test schema`).

use std::path::PathBuf;

fn schema_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("protocol.schema.json")
}

#[test]
fn the_committed_json_schema_is_current() {
    let mut generated = serde_json::to_string_pretty(&koru_protocol::json_schema()).unwrap();
    generated.push('\n');
    let path = schema_file();
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: run `UPDATE_SCHEMA=1 cargo test -p koru-protocol --test schema` and commit it",
        path.display()
    );
}

#[test]
fn the_schema_names_every_message_type() {
    let schema = serde_json::to_string(&koru_protocol::json_schema()).unwrap();
    for type_name in koru_protocol::KNOWN_MESSAGE_TYPES {
        assert!(
            schema.contains(&format!("\"const\":\"{type_name}\"")),
            "message type {type_name} missing from the schema"
        );
    }
}
