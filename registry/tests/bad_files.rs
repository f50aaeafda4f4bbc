//! A corpus of bad registry files (tests/bad/*.yaml), each carrying its expected diagnostics in `# expect:` lines; set UPDATE_BAD=1 to rewrite them from the actual output for review.

use std::path::PathBuf;

use koru_registry::{load, Layer, LayerSource};

#[test]
fn every_bad_file_gets_exactly_its_located_diagnostics() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("bad");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "the corpus is missing: {files:?}");
    let mut failures = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let expected: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect: ").map(str::to_string))
            .collect();
        let loaded = load(&[
            LayerSource::built_in(),
            LayerSource {
                layer: Layer::User,
                name: name.clone(),
                path: None,
                text: text.clone(),
            },
        ]);
        let actual: Vec<String> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
        assert!(!actual.is_empty(), "{name}: no diagnostics at all");
        if std::env::var_os("UPDATE_BAD").is_some() {
            let body: String = text
                .lines()
                .filter(|l| !l.starts_with("# expect: "))
                .map(|l| format!("{l}\n"))
                .collect();
            let header: String = actual.iter().map(|d| format!("# expect: {d}\n")).collect();
            std::fs::write(&path, header + &body).unwrap();
            continue;
        }
        if actual != expected {
            failures.push(format!(
                "{name}:\n  expected:\n    {}\n  actual:\n    {}",
                expected.join("\n    "),
                actual.join("\n    ")
            ));
        }
        // The built-in layer must still be applied: a bad user file never loses it.
        assert!(
            loaded.registry.get("cli").is_some(),
            "{name}: built-in layer lost"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
