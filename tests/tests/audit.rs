//! `koru audit` on the real binary: every real transcript of tests/corpus audited offline into a ledger that `koru verify` accepts and whose `chat_item` entries are the items its `.items.json` expects; a grown copy re-audited extends the same chain; an edited imported line (and a rewritten document's element) is reported as `source_rewritten` with its item, exit 1, nothing imported; and through the daemon, the most recent chat observed in the sandbox's home.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use koru_system_tests::{stdout_json, Sandbox};
use serde_json::{json, Value};

const CLAUDE: &str = "chat_history_claude_code_jsonl";

/// The corpus folder of each store whose files have `.items.json` expectations.
const STORES: &[(&str, &str)] = &[
    ("claude_code", CLAUDE),
    ("codex", "chat_history_codex_jsonl"),
    ("gemini", "chat_history_gemini_cli"),
    ("copilot", "chat_history_copilot_json"),
    ("cline_tasks", "chat_history_cline_tasks"),
    ("cline_sessions", "chat_history_cline_sessions"),
    ("cursor", "chat_history_cursor_legacy_sqlite"),
    ("opencode", "opencode_server_events"),
];

/// Files of several chats whose `.items.json` lists one chat's items: the chat.
const ONE_CHAT_OF: &[(&str, &str)] = &[("opencode.db", "ses_daf089fc7ffebgMQewxN9P5YPj")];

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Every entry of the ledger in `dir`, in order.
fn entries(dir: &Path) -> Vec<Value> {
    koru_system_tests::chain_entries(dir)
}

fn kinds(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

fn ok(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} exited {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `koru verify DIR --json`, which must find the ledger intact; its report.
fn verified(sandbox: &Sandbox, dir: &Path) -> Value {
    let output = sandbox.run(&["verify", "--json", dir.to_str().unwrap()]);
    ok(&output, &format!("koru verify {}", dir.display()));
    let report = stdout_json(&output);
    assert_eq!(report["verdict"], "intact", "{report}");
    report
}

/// An item of `.items.json` as its `chat_item` entry records it.
fn as_entry(index: usize, item: &Value) -> Value {
    let mut entry =
        json!({"index": index, "turn": item["turn"], "part": item["part"], "item": item["kind"]});
    let mut source = item["source"].clone();
    source.as_object_mut().unwrap().remove("file");
    entry["source"] = source;
    if item["text_sha256"].is_string() {
        entry["text"] = json!({"sha256": item["text_sha256"], "chars": item["text_chars"]});
    }
    for (from, to) in [
        ("at_ms", "store_at_ms"),
        ("tool", "tool"),
        ("call_id", "call_id"),
        ("outcome", "outcome"),
    ] {
        if !item[from].is_null() {
            entry[to] = item[from].clone();
        }
    }
    entry
}

/// A `chat_item` entry without the envelope and without the file its source names (the
/// expectations name only other files).
fn item_of(entry: &Value) -> Value {
    let mut item = entry.clone();
    let object = item.as_object_mut().unwrap();
    for key in ["seq", "at_ms", "kind", "prev_hash", "entry_hash"] {
        object.remove(key);
    }
    object["source"].as_object_mut().unwrap().remove("file");
    item
}

/// A copy of the corpus file `transcript` of `folder` (and the files beside it that share
/// its name up to the first `.`, such as a Cline 4 session's messages) in the sandbox,
/// last modified an hour ago: a document whose last turn has no end is audited whole only
/// once it has not been written for a while, and a fresh checkout's files are new.
fn aged_copy(sandbox: &Sandbox, folder: &str, transcript: &Path) -> PathBuf {
    let name = transcript.file_name().unwrap().to_str().unwrap();
    let stem = name.split('.').next().unwrap();
    let into = sandbox.path().join("corpus").join(folder);
    std::fs::create_dir_all(&into).unwrap();
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for entry in std::fs::read_dir(corpus().join(folder)).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_str().unwrap().to_string();
        let expectation = [".items.json", ".turns.json", ".expect.json"]
            .iter()
            .any(|e| file.ends_with(e));
        if !path.is_file() || expectation || file.split('.').next() != Some(stem) {
            continue;
        }
        std::fs::copy(&path, into.join(&file)).unwrap();
        std::fs::File::options()
            .write(true)
            .open(into.join(&file))
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
    }
    into.join(name)
}

/// `koru audit --json --source FILE --store STORE --out DIR [CHAT]`.
fn audit_offline(
    sandbox: &Sandbox,
    source: &Path,
    store: &str,
    chat: Option<&str>,
    out: &Path,
) -> Output {
    audit_offline_with(sandbox, source, store, chat, out, &["--json"])
}

/// `koru audit FLAGS --source FILE --store STORE --out DIR [CHAT]`.
fn audit_offline_with(
    sandbox: &Sandbox,
    source: &Path,
    store: &str,
    chat: Option<&str>,
    out: &Path,
    flags: &[&str],
) -> Output {
    let mut args = vec!["audit"];
    args.extend_from_slice(flags);
    args.extend([
        "--source",
        source.to_str().unwrap(),
        "--store",
        store,
        "--out",
        out.to_str().unwrap(),
    ]);
    args.extend(chat);
    sandbox.run(&args)
}

#[test]
fn every_corpus_transcript_audits_into_a_ledger_that_verifies_with_the_items_it_expects() {
    let sandbox = Sandbox::new();
    let mut audited = 0;
    let mut differences = Vec::new();
    for (folder, store) in STORES {
        let dir = corpus().join(folder);
        let mut expectations: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_str().unwrap().ends_with(".items.json"))
            .collect();
        expectations.sort();
        assert!(!expectations.is_empty(), "no .items.json in {folder}");
        for expected_path in expectations {
            let transcript = PathBuf::from(
                expected_path
                    .to_str()
                    .unwrap()
                    .trim_end_matches(".items.json"),
            );
            let expected: Value =
                serde_json::from_slice(&std::fs::read(&expected_path).unwrap()).unwrap();
            let chats: Vec<(Option<String>, Vec<Value>)> = match expected {
                Value::Array(items) => {
                    let file = transcript.file_name().unwrap().to_str().unwrap();
                    let chat = ONE_CHAT_OF
                        .iter()
                        .find(|(f, _)| *f == file)
                        .map(|(_, c)| c.to_string());
                    vec![(chat, items)]
                }
                Value::Object(chats) => chats
                    .into_iter()
                    .map(|(id, items)| (Some(id), items.as_array().unwrap().clone()))
                    .collect(),
                other => panic!("{}: {other}", expected_path.display()),
            };
            for (chat, items) in chats {
                audited += 1;
                let name = format!(
                    "{folder}/{}{}",
                    transcript.file_name().unwrap().to_str().unwrap(),
                    chat.as_deref().map(|c| format!(" {c}")).unwrap_or_default()
                );
                let out = sandbox.path().join("ledgers").join(audited.to_string());
                let copy = aged_copy(&sandbox, folder, &transcript);
                let output = audit_offline(&sandbox, &copy, store, chat.as_deref(), &out);
                ok(&output, &format!("koru audit {name}"));
                let result = stdout_json(&output);
                assert_eq!(result["opened"], true, "{name}: {result}");
                assert_eq!(result["items_added"], items.len(), "{name}: {result}");
                let report = verified(&sandbox, &out);
                assert_eq!(report["ledger"]["store"], *store, "{name}");
                assert_eq!(report["ledger"]["items"], items.len(), "{name}");
                assert_eq!(report["head"], result["head"], "{name}");
                let entries = entries(&out);
                assert_eq!(entries[0]["kind"], "ledger_opened", "{name}");
                assert_eq!(entries[0]["format"], "koru-audit-ledger/1", "{name}");
                assert_eq!(entries.last().unwrap()["kind"], "audit_run", "{name}");
                let recorded: Vec<Value> = entries
                    .iter()
                    .filter(|e| e["kind"] == "chat_item")
                    .map(item_of)
                    .collect();
                let wanted: Vec<Value> = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| as_entry(index, item))
                    .collect();
                if recorded != wanted {
                    let first = recorded
                        .iter()
                        .zip(&wanted)
                        .position(|(a, b)| a != b)
                        .unwrap_or(recorded.len().min(wanted.len()));
                    differences.push(format!(
                        "{name}: item {first}: ledger {} / expected {} ({} vs {} items)",
                        recorded.get(first).cloned().unwrap_or_default(),
                        wanted.get(first).cloned().unwrap_or_default(),
                        recorded.len(),
                        wanted.len()
                    ));
                }
            }
        }
    }
    assert!(audited >= 28 + 30, "{audited} chats audited");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// A copy of the corpus transcript `name` of Claude Code in `dir`, cut after its first
/// `lines` lines; the lines left out.
fn claude_copy(dir: &Path, name: &str, lines: usize) -> (PathBuf, Vec<String>) {
    let text = std::fs::read_to_string(corpus().join("claude_code").join(name)).unwrap();
    let all: Vec<String> = text.lines().map(str::to_string).collect();
    let copy = dir.join(name);
    std::fs::write(&copy, all[..lines].join("\n") + "\n").unwrap();
    (copy, all[lines..].to_vec())
}

#[test]
fn a_grown_transcript_extends_its_ledger_and_an_edited_line_is_reported_with_its_item() {
    let sandbox = Sandbox::new();
    let name = "tool_heavy.jsonl";
    let (copy, rest) = claude_copy(sandbox.path(), name, 6);
    let out = sandbox.path().join("ledger");
    let html = sandbox.path().join("ledger.html");

    let first = audit_offline(&sandbox, &copy, CLAUDE, None, &out);
    ok(&first, "the first audit");
    let first = stdout_json(&first);
    let imported = first["items_total"].as_u64().unwrap();
    assert!(imported > 0, "{first}");
    let before = entries(&out);

    // Grown: the rest of the transcript appended.
    let mut text = std::fs::read_to_string(&copy).unwrap();
    text.push_str(&(rest.join("\n") + "\n"));
    std::fs::write(&copy, &text).unwrap();
    let second = audit_offline_with(
        &sandbox,
        &copy,
        CLAUDE,
        None,
        &out,
        &["--json", "--html", html.to_str().unwrap()],
    );
    ok(&second, "the second audit");
    let second = stdout_json(&second);
    assert_eq!(second["opened"], false);
    let whole: Vec<Value> = serde_json::from_slice(
        &std::fs::read(corpus().join(format!("claude_code/{name}.items.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(second["items_total"], whole.len());
    assert_eq!(
        second["items_added"].as_u64().unwrap(),
        whole.len() as u64 - imported
    );
    let after = entries(&out);
    // The same chain, continued: the first run's entries unchanged, the next links to them.
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(
        after[before.len()]["prev_hash"],
        before.last().unwrap()["entry_hash"]
    );
    assert_eq!(
        kinds(&after)[before.len()..]
            .iter()
            .filter(|k| **k == "chat_item")
            .count() as u64,
        whole.len() as u64 - imported
    );
    let run = after.last().unwrap();
    assert_eq!(run["kind"], "audit_run");
    assert_eq!(run["run"], 2);
    assert_eq!(run["through"]["offset"], text.len());
    // Checked as an independent verifier would, with coreutils: the whole file was
    // imported, and a line's digest is the line without its newline.
    assert_eq!(
        run["prefix_sha256"],
        shell(&format!("sha256sum < '{}'", copy.display()))
    );
    let some = &whole[whole.len() / 2]["source"];
    assert_eq!(
        some["sha256"],
        shell(&format!(
            "sed -n {}p '{}' | head -c -1 | sha256sum",
            some["line"],
            copy.display()
        ))
    );
    let report = verified(&sandbox, &out);
    assert_eq!(report["ledger"]["items"], whole.len());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("koru-audit-ledger/1"),
        "the page says it is a ledger"
    );

    // An imported line edited (one character of its text): named, nothing imported, exit 1.
    let lines: Vec<&str> = text.lines().collect();
    let (edited_at, edited_line) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.contains(r#""type":"text""#))
        .expect("a line with assistant text");
    let changed = edited_line.replacen(r#""text":""#, r#""text":"X"#, 1);
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[edited_at] = changed;
    std::fs::write(&copy, edited.join("\n") + "\n").unwrap();
    let third = audit_offline(&sandbox, &copy, CLAUDE, None, &out);
    assert_eq!(third.status.code(), Some(1), "{third:?}");
    let third = stdout_json(&third);
    let finding = &third["finding"];
    assert_eq!(finding["kind"], "source_rewritten", "{third}");
    let item = finding["item"].as_u64().unwrap() as usize;
    assert_eq!(whole[item]["source"]["line"], edited_at + 1, "{finding}");
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains(&format!("line {}", edited_at + 1)),
        "{finding}"
    );
    assert_eq!(third["items_added"], 0);
    let last = entries(&out);
    assert_eq!(last.len(), after.len() + 1, "only the finding was appended");
    let recorded = last.last().unwrap();
    assert_eq!(recorded["kind"], "source_rewritten");
    assert_eq!(recorded["item"]["index"], item);
    assert_eq!(recorded["old_sha256"], whole[item]["source"]["sha256"]);
    assert_ne!(recorded["new_sha256"], recorded["old_sha256"]);
    verified(&sandbox, &out);
    // The text output says so too.
    let again = audit_offline_with(&sandbox, &copy, CLAUDE, None, &out, &[]);
    assert_eq!(again.status.code(), Some(1));
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(
        said.contains("rewritten") && said.contains(&format!("item {item}")),
        "{said}"
    );
}

#[test]
fn a_rewritten_document_is_compared_item_by_item() {
    let sandbox = Sandbox::new();
    let task = sandbox.path().join("1795620714110");
    std::fs::create_dir_all(&task).unwrap();
    let source = task.join("ui_messages.json");
    let original =
        std::fs::read(corpus().join("cline_tasks/1795620714110.ui_messages.json")).unwrap();
    std::fs::write(&source, &original).unwrap();
    let out = sandbox.path().join("ledger");
    let store = "chat_history_cline_tasks";
    ok(
        &audit_offline(&sandbox, &source, store, None, &out),
        "the first audit",
    );
    // The same document written again, pretty-printed: every element's bytes differ.
    let document: Value = serde_json::from_slice(&original).unwrap();
    let messages = document.as_array().unwrap().clone();
    std::fs::write(&source, serde_json::to_vec(&messages).unwrap()).unwrap();
    let unchanged = audit_offline(&sandbox, &source, store, None, &out);
    // serde_json's compact form may or may not be the store's: either it matches, or the
    // first element already differs — never a silent import.
    let code = unchanged.status.code();
    let result = stdout_json(&unchanged);
    match code {
        Some(0) => assert_eq!(result["items_added"], 0, "{result}"),
        Some(1) => assert_eq!(result["finding"]["kind"], "source_rewritten"),
        other => panic!("exit {other:?}: {result}"),
    }
    // Put the original back, then change the text of one message from the middle on: the
    // first whose text the file spells as serde_json does (so it can be found and edited
    // in place, the rest of the file byte for byte the same).
    std::fs::write(&source, &original).unwrap();
    let mut text = String::from_utf8(original.clone()).unwrap();
    let said = messages[messages.len() / 2..]
        .iter()
        .filter_map(|m| m["text"].as_str())
        .find(|said| !said.is_empty() && text.contains(&serde_json::to_string(said).unwrap()))
        .expect("a message with a text in the corpus task")
        .to_string();
    let quoted = serde_json::to_string(&said).unwrap();
    let edited = serde_json::to_string(&format!("{said} (edited)")).unwrap();
    text = text.replacen(&quoted, &edited, 1);
    assert_ne!(text.as_bytes(), original.as_slice());
    std::fs::write(&source, &text).unwrap();
    let rewritten = audit_offline(&sandbox, &source, store, None, &out);
    assert_eq!(rewritten.status.code(), Some(1), "{rewritten:?}");
    let result = stdout_json(&rewritten);
    assert_eq!(result["finding"]["kind"], "source_rewritten", "{result}");
    assert!(result["finding"]["item"].is_u64(), "{result}");
    verified(&sandbox, &out);
}

#[test]
fn offline_audit_refuses_what_it_cannot_use_with_a_clear_message() {
    let sandbox = Sandbox::new();
    let missing = sandbox.run(&[
        "audit",
        "--source",
        "/nonexistent/x.jsonl",
        "--store",
        CLAUDE,
    ]);
    assert_ne!(missing.status.code(), Some(0));
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("/nonexistent/x.jsonl"), "{said}");
    let unknown = sandbox.run(&[
        "audit",
        "--source",
        "/nonexistent/x.jsonl",
        "--store",
        "no_such_store",
    ]);
    assert_ne!(unknown.status.code(), Some(0));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains("--store no_such_store: not a store") && said.contains(CLAUDE),
        "{said}"
    );
    let garbage = sandbox.path().join("garbage.jsonl");
    std::fs::write(&garbage, "not json\n{\"also\": \"not a record\"\n").unwrap();
    let out = sandbox.path().join("g");
    let refused = audit_offline(&sandbox, &garbage, CLAUDE, None, &out);
    assert_ne!(refused.status.code(), Some(0));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("garbage.jsonl"), "{said}");
    // A ledger of one chat is not extended with another's items.
    let (copy, _) = claude_copy(sandbox.path(), "short.jsonl", 2);
    let ledger = sandbox.path().join("one");
    ok(
        &audit_offline(&sandbox, &copy, CLAUDE, Some("first"), &ledger),
        "the first audit",
    );
    let other = audit_offline(&sandbox, &copy, CLAUDE, Some("second"), &ledger);
    assert_ne!(other.status.code(), Some(0));
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(said.contains("holds the ledger of chat first"), "{said}");
}

/// The first word `sh -c SCRIPT` prints (a digest from `sha256sum`).
fn shell(script: &str) -> String {
    let output = std::process::Command::new("sh")
        .args(["-c", script])
        .output()
        .unwrap();
    ok(&output, script);
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Waits until `koru chats --json` lists `chat_id`.
fn wait_for_chat(sandbox: &Sandbox, chat_id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let output = sandbox.run(&["chats", "--json"]);
        if output.status.success() && String::from_utf8_lossy(&output.stdout).contains(chat_id) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon never listed {chat_id}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn through_the_daemon_the_most_recent_chat_is_audited_into_the_default_folder_and_extended() {
    let sandbox = Sandbox::new();
    let project = sandbox.home().join(".claude/projects/-w");
    std::fs::create_dir_all(&project).unwrap();
    let _daemon = sandbox.start_daemon(&[]);
    let chat = "51338f86-daed-485f-b2d7-951286da47a3";
    let name = format!("{chat}.jsonl");
    let (copy, rest) = claude_copy(&project, &name, 4);
    wait_for_chat(&sandbox, chat);

    let first = sandbox.run(&["audit", "--json"]);
    ok(&first, "koru audit");
    let first = stdout_json(&first);
    assert_eq!(first["chat_id"], chat);
    assert_eq!(first["store"], CLAUDE);
    assert_eq!(first["opened"], true);
    let default_dir = sandbox
        .path()
        .join("state/koru/audits")
        .join(CLAUDE)
        .join(chat);
    assert_eq!(first["dir"], default_dir.to_str().unwrap());
    verified(&sandbox, &default_dir);

    let mut text = std::fs::read_to_string(&copy).unwrap();
    text.push_str(&(rest.join("\n") + "\n"));
    std::fs::write(&copy, &text).unwrap();
    let second = sandbox.run(&["audit", "--json", chat, "--store", CLAUDE]);
    ok(&second, "koru audit CHAT");
    let second = stdout_json(&second);
    let whole: Vec<Value> = serde_json::from_slice(
        &std::fs::read(corpus().join(format!("claude_code/{name}.items.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(second["items_total"], whole.len(), "{second}");
    assert_eq!(
        second["items_added"].as_u64().unwrap(),
        whole.len() as u64 - first["items_total"].as_u64().unwrap()
    );
    let printed = sandbox.run(&["verify", default_dir.to_str().unwrap()]);
    ok(&printed, "koru verify");
    let said = String::from_utf8_lossy(&printed.stdout);
    assert!(said.contains("audit ledger intact"), "{said}");

    let unknown = sandbox.run(&["audit", "no-such-chat"]);
    assert_ne!(unknown.status.code(), Some(0));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        said.contains("unknown_chat") || said.contains("no chat no-such-chat"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_tool_audit_chat_audits_into_the_default_folder_with_its_page_and_observers_are_not_offered_it(
) {
    use koru_system_tests::mcp::{call, tool_text};
    use rmcp::transport::TokioChildProcess;
    use rmcp::ServiceExt;

    let sandbox = Sandbox::new();
    let project = sandbox.home().join(".claude/projects/-w");
    std::fs::create_dir_all(&project).unwrap();
    let _daemon = sandbox.start_daemon(&["--http", "127.0.0.1:0"]);
    let chat = "51338f86-daed-485f-b2d7-951286da47a3";
    claude_copy(&project, &format!("{chat}.jsonl"), 4);
    wait_for_chat(&sandbox, chat);

    let start = |role: &'static str| {
        let mut command = tokio::process::Command::from(sandbox.koru());
        command
            .args(["mcp", "--role", role])
            .env("RUST_LOG", "warn");
        async move {
            ().serve(TokioChildProcess::new(command).expect("koru mcp starts"))
                .await
                .expect("the MCP handshake")
        }
    };
    let client = start("drive").await;
    let result = call(
        &client,
        "audit_chat",
        json!({"chat_id": chat, "html": true}),
    )
    .await;
    let text = tool_text(&result);
    assert_ne!(result.is_error, Some(true), "{text}");
    let answer = result
        .structured_content
        .clone()
        .expect("structured content");
    let dir = sandbox
        .path()
        .join("state/koru/audits")
        .join(CLAUDE)
        .join(chat);
    assert_eq!(answer["dir"], dir.to_str().unwrap());
    assert_eq!(answer["html"], dir.join("ledger.html").to_str().unwrap());
    assert!(dir.join("ledger.html").is_file());
    assert!(
        text.contains("✓ audited chat") && text.contains(answer["head"].as_str().unwrap()),
        "{text}"
    );
    let report = verified(&sandbox, &dir);
    assert_eq!(report["head"], answer["head"]);
    client.cancel().await.unwrap();

    let observer = start("observe").await;
    let tools = observer.list_all_tools().await.unwrap();
    assert!(
        tools.iter().all(|t| t.name != "audit_chat"),
        "an observer is offered audit_chat"
    );
    let refused = call(&observer, "audit_chat", json!({"chat_id": chat})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        tool_text(&refused).contains("forbidden_role"),
        "{}",
        tool_text(&refused)
    );
    observer.cancel().await.unwrap();
}
