//! The chat's own evidence of a drive in the journal: a drive matched in a real Claude Code session log (written by the fake window as Claude Code writes it) gets `drive_prompt_recorded` and `drive_outcome_recorded` entries whose places and SHA-256 digests check against the log's own bytes; `koru drives` shows them, a restart keeps them (the index), `koru verify` covers the reply's blob, and `--journal-prompts digest` keeps no reply text on disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use koru_system_tests::{files_under, stdout_json, Sandbox};
use serde_json::Value;
use sha2::{Digest, Sha256};

const CLAUDE: &str = "chat_history_claude_code_jsonl";

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn start_window(
    sandbox: &Sandbox,
    workspace: &Path,
    reply_file: &Path,
) -> koru_system_tests::Plugin {
    let project = sandbox.claude_project_dir(workspace);
    sandbox.start_fake_plugin(&[
        "--workspace",
        workspace.to_str().unwrap(),
        "--claude-store",
        project.to_str().unwrap(),
        "--reply-delay-ms",
        "50",
        "--reply-file",
        reply_file.to_str().unwrap(),
    ])
}

/// Sends `prompt` and waits for the reply; the drive's id.
fn send(sandbox: &Sandbox, workspace: &Path, prompt: &str) -> String {
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait-reply",
        "--json",
        "--timeout",
        "20",
        prompt,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let shown = stdout_json(&output);
    assert_eq!(shown["state"], "done", "{shown:#}");
    shown["drive_id"].as_str().unwrap().to_string()
}

/// The drive as `koru drives --all --json` lists it, once its evidence has an outcome.
fn drive_with_outcome(sandbox: &Sandbox, drive_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let all = stdout_json(&sandbox.run(&["drives", "--all", "--json"]));
        let drive = all
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["drive_id"] == drive_id)
            .cloned();
        if let Some(drive) = drive.filter(|d| !d["evidence"]["outcome"].is_null()) {
            return drive;
        }
        assert!(
            Instant::now() < deadline,
            "drive {drive_id} got no outcome evidence: {all:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The line a `kind: line` record names, checked against the file: its offset and length,
/// and its bytes' digest.
fn check_line(record: &Value, file: &Path) -> String {
    assert_eq!(record["kind"], "line", "{record:#}");
    let content = std::fs::read(file).unwrap();
    let line_number = record["line"].as_u64().unwrap() as usize;
    let line = content
        .split(|b| *b == b'\n')
        .nth(line_number - 1)
        .unwrap_or_else(|| panic!("{} has no line {line_number}", file.display()));
    let offset = record["offset"].as_u64().unwrap() as usize;
    assert_eq!(&content[offset..offset + line.len()], line, "offset");
    assert_eq!(record["bytes"], line.len() as u64);
    assert_eq!(record["sha256"], sha256_hex(line), "the line's digest");
    String::from_utf8(line.to_vec()).unwrap()
}

fn verify(sandbox: &Sandbox) -> (i32, String) {
    let output = sandbox.run(&["verify"]);
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn a_drive_matched_in_a_real_store_has_its_prompt_and_reply_records_in_the_journal_after_a_restart_too(
) {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("evidence");
    let reply = "The parser reads records ✓\nand nothing else.";
    let reply_file = sandbox.path().join("reply.txt");
    std::fs::write(&reply_file, reply).unwrap();
    let mut daemon = sandbox.start_daemon(&[]);
    let _plugin = start_window(&sandbox, &workspace, &reply_file);
    let prompt = "Explain the parser, evidence please";
    let drive_id = send(&sandbox, &workspace, prompt);

    let drive = drive_with_outcome(&sandbox, &drive_id);
    let evidence = &drive["evidence"];
    let found = &evidence["prompt"];
    assert_eq!(found["store"], CLAUDE, "{evidence:#}");
    assert_eq!(found["chat_id"], drive["observation"]["chat_id"]);
    assert_eq!(found["turn"], 0);
    let file = PathBuf::from(found["file"].as_str().unwrap());
    assert!(
        file.starts_with(sandbox.claude_project_dir(&workspace)),
        "{file:?}"
    );
    // The record is the line holding the prompt, byte for byte.
    let line = check_line(&found["record"], &file);
    assert!(line.contains(prompt), "{line}");
    assert!(found["store_at_ms"].as_u64().is_some(), "{found:#}");
    // The outcome: the record Claude Code ended the turn with (its reply asking for no
    // tool, `stop_reason: end_turn`), and the reply's digest.
    let outcome = &evidence["outcome"];
    assert_eq!(outcome["stage"], "replied", "{outcome:#}");
    assert_eq!(outcome["basis"], "explicit");
    let end = check_line(&outcome["record"]["record"], &file);
    assert!(
        end.contains(r#""stop_reason":"end_turn""#) && end.contains("The parser reads records"),
        "{end}"
    );
    assert_eq!(outcome["reply"]["sha256"], sha256_hex(reply.as_bytes()));
    assert_eq!(outcome["reply"]["bytes"], reply.len() as u64);
    assert_eq!(outcome["reply"]["chars"], reply.chars().count() as u64);

    // `koru drives --evidence` says where each record is, with its digest.
    let output = sandbox.run(&["drives", "--evidence"]);
    let text = String::from_utf8_lossy(&output.stdout);
    let prompt_sha = found["record"]["sha256"].as_str().unwrap();
    assert!(
        text.contains(&format!("prompt on record: {CLAUDE} chat "))
            && text.contains(&format!(
                "line {} (offset {}",
                found["record"]["line"], found["record"]["offset"]
            ))
            && text.contains(prompt_sha),
        "{text}"
    );
    assert!(
        text.contains("replied on record (the store's end record)")
            && text.contains(&format!(
                "reply {} chars, sha256 {}",
                reply.chars().count(),
                sha256_hex(reply.as_bytes())
            )),
        "{text}"
    );

    // In the journal, under the chain: one entry each, tied to the drive.
    let entries = sandbox.journal_entries();
    let of_kind = |kind: &str| -> Vec<&Value> {
        entries
            .iter()
            .filter(|e| e["kind"] == kind && e["drive_id"] == drive_id.as_str())
            .collect()
    };
    let prompts = of_kind("drive_prompt_recorded");
    assert_eq!(prompts.len(), 1, "{entries:#?}");
    assert_eq!(prompts[0]["record"], found["record"]);
    assert_eq!(prompts[0]["file"], found["file"]);
    let outcomes = of_kind("drive_outcome_recorded");
    assert_eq!(outcomes.len(), 1, "{entries:#?}");
    assert_eq!(outcomes[0]["reply"], outcome["reply"]);
    assert_eq!(outcomes[0]["record"], outcome["record"]);
    // The reply's text is kept as prompts are (`full`): its blob, checked by verify.
    let blob = sandbox
        .path()
        .join("state/koru/journal/blobs/sha256")
        .join(sha256_hex(reply.as_bytes()));
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read(&blob).map(|b| b.is_empty()).unwrap_or(true) {
        assert!(
            Instant::now() < deadline,
            "no reply blob {}",
            blob.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&blob).unwrap(), reply);
    let (code, out) = verify(&sandbox);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("texts (prompts, replies): 2 named, 2 kept"),
        "{out}"
    );

    // After a restart the drive is answered from the journal's index: the same evidence.
    daemon
        .terminate(Duration::from_secs(5))
        .expect("the daemon stops");
    let _daemon = sandbox.start_daemon(&[]);
    let restarted = drive_with_outcome(&sandbox, &drive_id);
    assert_eq!(restarted["evidence"], drive["evidence"]);

    // A changed reply blob is tampering verify names.
    std::fs::write(&blob, "The parser reads records ✗\nand nothing else.").unwrap();
    let (code, out) = verify(&sandbox);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&sha256_hex(reply.as_bytes())), "{out}");
}

#[test]
fn digest_mode_records_the_replys_digest_and_keeps_none_of_its_text() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace("private");
    let reply = "secret-reply-text-7373 and more";
    let reply_file = sandbox.path().join("reply.txt");
    std::fs::write(&reply_file, reply).unwrap();
    let mut daemon = sandbox.start_daemon(&["--journal-prompts", "digest"]);
    let _plugin = start_window(&sandbox, &workspace, &reply_file);
    let drive_id = send(&sandbox, &workspace, "secret-prompt-text-5151");
    let drive = drive_with_outcome(&sandbox, &drive_id);
    // Memory still shows the excerpt to its owner while the daemon runs.
    assert_eq!(drive["observation"]["reply_excerpt"], reply);
    assert_eq!(
        drive["evidence"]["outcome"]["reply"]["sha256"],
        sha256_hex(reply.as_bytes())
    );
    daemon
        .terminate(Duration::from_secs(5))
        .expect("the daemon stops");
    // The journal and its index hold neither text (the chat's own log in the home folder
    // is the agent's, and the observers' cache is of that log).
    let kept = files_under(&sandbox.path().join("state"))
        .into_iter()
        .chain(files_under(
            &sandbox.path().join("cache/koru/journal-index"),
        ));
    for file in kept {
        {
            let bytes = std::fs::read(&file).unwrap_or_default();
            for secret in [&b"secret-reply"[..], &b"secret-prom"[..]] {
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret),
                    "{} holds {}",
                    file.display(),
                    String::from_utf8_lossy(secret)
                );
            }
        }
    }
    let outcomes: Vec<Value> = sandbox
        .journal_entries()
        .into_iter()
        .filter(|e| e["kind"] == "drive_outcome_recorded")
        .collect();
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0]["reply"]["sha256"], sha256_hex(reply.as_bytes()));
    let _daemon = sandbox.start_daemon(&["--journal-prompts", "digest"]);
    let (code, out) = verify(&sandbox);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 absent"), "{out}");
}
