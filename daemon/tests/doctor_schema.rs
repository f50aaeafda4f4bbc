//! Keeps docs/doctor.schema.json equal to the schema of `koru doctor --json` generated from the report types (refresh with `UPDATE_SCHEMA=1 cargo test -p koru-daemon --test doctor_schema`).

use std::path::PathBuf;

#[test]
fn the_committed_doctor_schema_is_current() {
    let mut generated =
        serde_json::to_string_pretty(&koru_daemon::doctor::report_schema()).unwrap();
    generated.push('\n');
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/doctor.schema.json");
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: run `UPDATE_SCHEMA=1 cargo test -p koru-daemon --test doctor_schema` and commit it",
        path.display()
    );
}
