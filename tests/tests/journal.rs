//! The drive journal against the real daemon: a drive flood cut by `kill -9` loses no accepted drive and sends none twice, history answers after restarts and pages back, rotation and retention keep `koru verify` green, digest mode keeps no prompt text on disk, and `koru verify` exits 0/1/2 with the first bad seq (keyed journals too).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use koru_system_tests::{controller_hello, files_under, signal, stdout_json, Raw, Sandbox};
use serde_json::{json, Value};

const TERMINAL: [&str; 4] = ["done", "failed", "cancelled", "timed_out"];

fn journal_dir(sandbox: &Sandbox) -> PathBuf {
    sandbox.path().join("state").join("koru").join("journal")
}

fn controller(sandbox: &Sandbox) -> Raw {
    let mut raw = Raw::connect(&sandbox.socket());
    raw.send(&controller_hello());
    raw.recv_type("welcome");
    raw
}

/// `drive.get` over the socket: the drive, or the error's code.
fn get_drive(raw: &mut Raw, id: u64, drive_id: &str) -> Result<Value, String> {
    raw.send(&json!({"v": 1, "type": "drive.get", "id": id, "drive_id": drive_id}));
    loop {
        let line = raw.recv().expect("an answer to drive.get");
        if line["id"] == id || line["ref"] == id {
            return match line["type"].as_str() {
                Some("drive.result") => Ok(line["drive"].clone()),
                _ => Err(line["code"].as_str().unwrap_or("?").to_string()),
            };
        }
    }
}

fn send(sandbox: &Sandbox, workspace: &Path, prompt: &str) -> Value {
    let output = sandbox.run(&[
        "send",
        "--workspace",
        workspace.to_str().unwrap(),
        "--wait",
        "--json",
        prompt,
    ]);
    assert!(output.status.success(), "{output:?}");
    stdout_json(&output)
}

/// The drive ids `koru drives ARGS --json` lists, oldest first.
fn listed_ids(sandbox: &Sandbox, args: &[&str]) -> Vec<String> {
    let mut command = vec!["drives"];
    command.extend_from_slice(args);
    command.push("--json");
    stdout_json(&sandbox.run(&command))
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["drive_id"].as_str().unwrap().to_string())
        .collect()
}

fn verify(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut command = sandbox.koru();
    command.arg("verify").args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("koru verify runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr),
    )
}

#[test]
fn a_flood_cut_by_kill_9_loses_no_accepted_drive_and_sends_none_twice() {
    let sandbox = Sandbox::new();
    let mut daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("flood");
    let record = sandbox.path().join("delivered.ndjson");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
        "--record",
        record.to_str().unwrap(),
    ]);
    // A controller floods up to 5,000 drives, one at a time, noting each drive.result.
    let (accepted_tx, accepted_rx) = mpsc::channel::<String>();
    let socket = sandbox.socket();
    let target = workspace.to_str().unwrap().to_string();
    let flood = std::thread::spawn(move || {
        let mut raw = Raw::connect(&socket);
        raw.send(&controller_hello());
        raw.recv_type("welcome");
        for i in 0..5_000u64 {
            let create = json!({"v": 1, "type": "drive.create", "id": i + 10,
                "target": {"workspace": target}, "prompt": format!("flood drive {i}")});
            let mut line = serde_json::to_vec(&create).unwrap();
            line.push(b'\n');
            if std::io::Write::write_all(&mut raw.stream, &line).is_err() {
                return;
            }
            loop {
                let Some(reply) = raw.recv() else { return };
                if reply["id"] == i + 10 {
                    if reply["type"] == "drive.result" {
                        let _ =
                            accepted_tx.send(reply["drive"]["drive_id"].as_str().unwrap().into());
                    }
                    break;
                }
            }
        }
    });
    let mut accepted = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while accepted.len() < 1_000 && Instant::now() < deadline {
        if let Ok(id) = accepted_rx.recv_timeout(Duration::from_millis(100)) {
            accepted.push(id);
        }
    }
    assert!(
        accepted.len() >= 1_000,
        "only {} drives accepted in 120 s",
        accepted.len()
    );
    signal(daemon.pid(), nix::sys::signal::Signal::SIGKILL);
    // Restarted at once, as a shell does after `kill -9`: the killed daemon may still be
    // tearing itself down (its locks held) and is reaped only afterwards.
    let restarted = sandbox.start_daemon(&[]);
    sandbox.wait_until_served_by(&restarted);
    let _ = daemon.child.wait();
    flood.join().unwrap();
    accepted.extend(accepted_rx.try_iter());
    assert!(
        accepted.len() < 5_000,
        "the kill came after the flood ended"
    );

    let mut raw = controller(&sandbox);
    let mut states: HashMap<String, usize> = HashMap::new();
    for (i, drive_id) in accepted.iter().enumerate() {
        let drive = get_drive(&mut raw, i as u64 + 1, drive_id)
            .unwrap_or_else(|code| panic!("{drive_id} is unknown after the restart: {code}"));
        let state = drive["state"].as_str().unwrap().to_string();
        assert!(TERMINAL.contains(&state.as_str()), "{drive_id}: {drive}");
        if state != "done" {
            assert_eq!(drive["blocker"]["code"], "daemon_restarted", "{drive}");
        }
        *states.entry(state).or_default() += 1;
    }
    assert!(states.get("done").copied().unwrap_or(0) > 0, "{states:?}");
    // Nothing reached the plugin twice.
    let mut delivered: HashMap<String, usize> = HashMap::new();
    for line in std::fs::read_to_string(&record).unwrap().lines() {
        if let Ok(entry) = serde_json::from_str::<Value>(line) {
            if let Some(id) = entry["drive_id"].as_str() {
                *delivered.entry(id.to_string()).or_default() += 1;
            }
        }
    }
    assert!(!delivered.is_empty());
    assert!(
        delivered.values().all(|&n| n == 1),
        "a drive was delivered twice"
    );
    // History beyond memory, after the restart.
    let all = stdout_json(&sandbox.run(&["drives", "--all", "--json"]));
    assert!(all.as_array().unwrap().len() >= accepted.len());
    let (code, out) = verify(&sandbox, &[], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("✓ journal intact"), "{out}");
    // Every accepted prompt's text was in a file when its drive was answered: the restart
    // wrote the texts the kill left in the pending-text log to their blob files.
    assert!(out.contains(" kept and matching, 0 absent"), "{out}");
    let journal_dir = sandbox.path().join("state/koru/journal");
    let blobs: Vec<String> = std::fs::read_dir(journal_dir.join("blobs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !blobs.iter().any(|name| name.starts_with("pending-")),
        "the restart removed the pending-text logs it replayed: {blobs:?}"
    );
    eprintln!(
        "{} drives accepted before kill -9: {states:?}",
        accepted.len()
    );
}

#[test]
fn history_pages_back_and_survives_a_restart() {
    let sandbox = Sandbox::new();
    let mut daemon = sandbox.start_daemon(&[]);
    let workspace = sandbox.workspace("history");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    let ids: Vec<String> = (0..12)
        .map(|i| {
            send(&sandbox, &workspace, &format!("history {i}"))["drive_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // Each drive as the daemon that ran it answers for it (from memory).
    let mut raw = controller(&sandbox);
    let ran: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| get_drive(&mut raw, 100 + i as u64, id).unwrap())
        .collect();
    drop(raw);
    daemon
        .terminate(Duration::from_secs(5))
        .expect("the daemon stops");
    let mut daemon = sandbox.start_daemon(&[]);
    // A new run holds none of them in memory; `koru drives` shows them from the journal.
    let listed = stdout_json(&sandbox.run(&["drives", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 12, "{listed}");
    let newest = listed_ids(&sandbox, &["--limit", "5"]);
    assert_eq!(newest, ids[7..]);
    let older = listed_ids(&sandbox, &["--before", &newest[0], "--limit", "5"]);
    assert_eq!(older, ids[2..7]);
    let all = stdout_json(&sandbox.run(&["drives", "--all", "--json"]));
    assert_eq!(all.as_array().unwrap().len(), 12);
    let table = String::from_utf8(sandbox.run(&["drives", "--limit", "3"]).stdout).unwrap();
    assert!(
        table.contains("older drives: koru drives --before"),
        "{table}"
    );
    // drive.get of the first drive, from disk, with its prompt excerpt.
    let mut raw = controller(&sandbox);
    let first = get_drive(&mut raw, 1, &ids[0]).unwrap();
    assert_eq!(first["state"], "done");
    assert_eq!(first["prompt_excerpt"], "history 0");
    assert_eq!(
        get_drive(&mut raw, 2, "d_000000000000"),
        Err("unknown_drive".into())
    );
    let since = stdout_json(&sandbox.run(&["drives", "--since", "1h", "--json"]));
    assert_eq!(since.as_array().unwrap().len(), 12);
    let status = stdout_json(&sandbox.run(&["status", "--json"]));
    let (code, out) = verify(&sandbox, &["--json"], &[]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report["head"], status["journal"]["head"],
        "status shows the head verify proves"
    );
    // From the journal, each drive is what the daemon that ran it answered: every stage
    // with its time (most of them folded into a lean drive_ended), the attempts, the
    // evidence — from the index kept, and from one rebuilt from the journal alone.
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            get_drive(&mut raw, 200 + i as u64, id).unwrap(),
            ran[i],
            "{id}"
        );
    }
    drop(raw);
    daemon
        .terminate(Duration::from_secs(5))
        .expect("the daemon stops");
    // `$XDG_CACHE_HOME/koru/journal-index` (the sandbox's `XDG_CACHE_HOME` is `cache/`).
    let index = sandbox
        .path()
        .join("cache")
        .join("koru")
        .join("journal-index");
    std::fs::remove_dir_all(&index).expect("the drive index is where docs/journal.md says");
    let _daemon = sandbox.start_daemon(&[]);
    let mut raw = controller(&sandbox);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            get_drive(&mut raw, 300 + i as u64, id).unwrap(),
            ran[i],
            "{id}"
        );
    }
}

#[test]
fn rotation_and_retention_keep_verify_green() {
    let sandbox = Sandbox::new();
    let flags = [
        "--journal-segment-bytes",
        "8192",
        "--journal-retain",
        "24KiB",
    ];
    let mut daemon = sandbox.start_daemon(&flags);
    let workspace = sandbox.workspace("rotate");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    for i in 0..30 {
        send(&sandbox, &workspace, &format!("rotation {i}"));
    }
    let dir = journal_dir(&sandbox);
    let segments: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("seg-"))
        .collect();
    assert!(segments.len() >= 3, "{segments:?}");
    assert!(
        !segments.contains(&"seg-0000000000000001.ndjson".to_string()),
        "the oldest segment was pruned: {segments:?}"
    );
    let (code, out) = verify(&sandbox, &["--json"], &[]);
    assert_eq!(code, 0, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert!(report["pruned_through"].as_u64().unwrap() > 0, "{report}");
    // After a restart (memory empty), what retention pruned is gone; the rest is there.
    daemon
        .terminate(Duration::from_secs(5))
        .expect("the daemon stops");
    let _daemon = sandbox.start_daemon(&flags);
    let all = stdout_json(&sandbox.run(&["drives", "--all", "--json"]));
    let kept = all.as_array().unwrap().len();
    assert!(
        kept > 0 && kept < 30,
        "pruned drives are gone, recent ones kept: {kept}"
    );
}

#[test]
fn digest_mode_writes_no_prompt_text_anywhere_on_disk() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&["--journal-prompts", "digest"]);
    let workspace = sandbox.workspace("private");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    let drive = send(&sandbox, &workspace, "secret-prompt-text-5151");
    // Memory still shows it to its owner while the daemon runs.
    assert_eq!(drive["prompt_excerpt"], "secret-prompt-text-5151");
    for root in [sandbox.path().join("state"), sandbox.path().join("home")] {
        for file in files_under(&root) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(
                !bytes.windows(11).any(|w| w == b"secret-prom"),
                "{} holds the prompt text",
                file.display()
            );
        }
    }
    let (code, out) = verify(&sandbox, &[], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 absent"), "{out}");
}

#[test]
fn verify_exits_0_1_2_and_a_keyed_journal_needs_its_key() {
    let sandbox = Sandbox::new();
    let journal = sandbox.path().join("my-journal");
    let mut daemon = sandbox.start_daemon_with_env(
        &["--journal", journal.to_str().unwrap()],
        &[("KORU_JOURNAL_HMAC_KEY", "correct horse")],
    );
    let workspace = sandbox.workspace("keyed");
    let _plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        workspace.to_str().unwrap(),
    ]);
    for i in 0..3 {
        send(&sandbox, &workspace, &format!("keyed {i}"));
    }
    // Without a folder, verify checks the running daemon's journal.
    let key = [("KORU_JOURNAL_HMAC_KEY", "correct horse")];
    let (code, out) = verify(&sandbox, &[], &key);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(journal.to_str().unwrap()) && out.contains("HMAC"),
        "{out}"
    );
    daemon
        .terminate(Duration::from_secs(5))
        .expect("the daemon stops");
    let dir = journal.to_str().unwrap();
    let (code, out) = verify(&sandbox, &[dir], &[]);
    assert_eq!(code, 2, "no key for a keyed journal: {out}");
    let (code, out) = verify(&sandbox, &[dir], &[("KORU_JOURNAL_HMAC_KEY", "wrong")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("wrong_key"), "{out}");
    // One value changed in a copy.
    let copy = sandbox.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    let segment = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("seg-"))
        .unwrap();
    let text = std::fs::read_to_string(segment.path()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let target = lines
        .iter()
        .position(|l| l.contains(r#""kind":"drive_accepted""#))
        .unwrap();
    let seq = serde_json::from_str::<Value>(&lines[target]).unwrap()["seq"]
        .as_u64()
        .unwrap();
    lines[target] = lines[target].replace(r#""uid":"#, r#""uid":1"#);
    std::fs::write(copy.join(segment.file_name()), lines.join("\n") + "\n").unwrap();
    let (code, out) = verify(&sandbox, &[copy.to_str().unwrap()], &key);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("seq {seq}")) && out.contains("edited"),
        "{out}"
    );
    let (code, out) = verify(
        &sandbox,
        &[sandbox.path().join("nowhere").to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 2, "{out}");
}

/// Every journal entry about `drive_id`, in order, as (kind, the entry).
fn entries_of(sandbox: &Sandbox, drive_id: &str) -> Vec<(String, Value)> {
    sandbox
        .journal_entries()
        .into_iter()
        .filter(|entry| entry["drive_id"] == drive_id)
        .map(|entry| (entry["kind"].as_str().unwrap().to_string(), entry))
        .collect()
}

#[test]
fn a_drive_that_ends_within_a_tick_is_two_entries_and_a_slow_one_records_its_stages_as_it_runs() {
    let sandbox = Sandbox::new();
    let _daemon = sandbox.start_daemon(&[]);
    let fast = sandbox.workspace("fast");
    let slow = sandbox.workspace("slow");
    let _fast_plugin =
        sandbox.start_fake_plugin(&["--product", "vscode", "--workspace", fast.to_str().unwrap()]);
    let _slow_plugin = sandbox.start_fake_plugin(&[
        "--product",
        "vscode",
        "--workspace",
        slow.to_str().unwrap(),
        "--behaviour",
        "slow",
        "--delay-ms",
        "600",
    ]);
    // Acked at once: sent, received and submitted fold into the drive's end. (A tick of
    // the daemon, every 100 ms, can fall inside a drive of a few ms and write its stage
    // first: most drives, not all, are two entries; before the fold every one was four.)
    let mut folded = Vec::new();
    for n in 0..10 {
        let drive = send(&sandbox, &fast, &format!("folded stages {n}"));
        let id = drive["drive_id"].as_str().unwrap().to_string();
        let kinds: Vec<String> = entries_of(&sandbox, &id)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            kinds.first().map(String::as_str),
            Some("drive_accepted"),
            "{kinds:?}"
        );
        assert_eq!(
            kinds.last().map(String::as_str),
            Some("drive_ended"),
            "{kinds:?}"
        );
        assert!(
            kinds.len() <= 3,
            "at most one tick inside a fast drive: {kinds:?}"
        );
        if kinds.len() == 2 {
            folded.push(id);
        }
    }
    assert!(
        folded.len() >= 5,
        "{} of 10 fast drives were two entries",
        folded.len()
    );
    let id = folded[0].as_str();
    let ended = &entries_of(&sandbox, id)[1].1;
    assert!(
        ended.get("drive").is_none(),
        "lean, not the whole drive: {ended}"
    );
    let stages: Vec<&str> = ended["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["state"].as_str().unwrap())
        .collect();
    for stage in ["sent", "received", "submitted", "done"] {
        assert!(
            stages.contains(&stage),
            "{stage} in the ended drive's stages: {stages:?}"
        );
    }
    // `drive.get` answers the same history, with the times the stages carry.
    let mut raw = controller(&sandbox);
    let drive = get_drive(&mut raw, 1, id).unwrap();
    assert_eq!(drive["history"][0]["state"], "queued");
    assert_eq!(
        drive["history"].as_array().unwrap()[1..],
        ended["stages"].as_array().unwrap()[..]
    );
    drop(raw);
    // 600 ms between stages: each is on record while the drive runs, long before its end.
    let drive = send(&sandbox, &slow, "stages as they come");
    let id = drive["drive_id"].as_str().unwrap();
    let entries = entries_of(&sandbox, id);
    let states: Vec<&str> = entries
        .iter()
        .filter(|(kind, _)| kind == "drive_state")
        .map(|(_, entry)| entry["state"].as_str().unwrap())
        .collect();
    assert!(states.contains(&"sent"), "{states:?}");
    assert!(states.contains(&"received"), "{states:?}");
    let ended_at = entries.last().unwrap().1["at_ms"].as_u64().unwrap();
    let received_at = entries
        .iter()
        .find(|(kind, entry)| kind == "drive_state" && entry["state"] == "received")
        .unwrap()
        .1["at_ms"]
        .as_u64()
        .unwrap();
    assert!(
        ended_at >= received_at + 400,
        "received on record {} ms before the end",
        ended_at - received_at
    );
    let (code, out) = verify(&sandbox, &[], &[]);
    assert_eq!(code, 0, "{out}");
}

/// A second daemon of the same user on another socket (its own runtime dir, the same state
/// dir, as a sandbox or a second machine simulated on one would run) starts with a journal of
/// its own instead of being refused by the first one's lock; each `koru verify` finds and
/// proves its own daemon's chain.
#[test]
fn a_second_daemon_on_another_socket_keeps_a_journal_of_its_own() {
    let sandbox = Sandbox::new();
    let mut first = sandbox.start_daemon(&[]);
    let run_b = sandbox.path().join("run-b");
    std::fs::create_dir_all(&run_b).unwrap();
    koru_system_tests::set_mode(&run_b, 0o700);
    let socket_b = run_b.join("koru").join("koru.sock");
    let env_b = [
        ("XDG_RUNTIME_DIR", run_b.to_str().unwrap()),
        ("KORU_SOCKET", socket_b.to_str().unwrap()),
    ];
    let log_b = std::fs::File::create(sandbox.path().join("daemon-b.log")).unwrap();
    let mut second = sandbox
        .koru()
        .arg("daemon")
        .envs(env_b)
        .stdout(std::process::Stdio::null())
        .stderr(log_b)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket_b.exists() {
        if let Ok(Some(status)) = second.try_wait() {
            panic!(
                "the second daemon exited ({status}): {}",
                std::fs::read_to_string(sandbox.path().join("daemon-b.log")).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the second daemon did not listen in 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status_of = |env: &[(&str, &str)]| {
        let mut command = sandbox.koru();
        command.args(["status", "--json"]).envs(env.iter().copied());
        stdout_json(&command.output().unwrap())["journal"]["dir"]
            .as_str()
            .expect("the status names the journal folder")
            .to_string()
    };
    let dir_a = status_of(&[]);
    let dir_b = status_of(&env_b);
    assert_eq!(PathBuf::from(&dir_a), journal_dir(&sandbox));
    assert_ne!(dir_a, dir_b, "two daemons never share one chain");
    assert!(
        dir_b.starts_with(
            sandbox
                .path()
                .join("state")
                .join("koru")
                .join("journals")
                .to_str()
                .unwrap()
        ),
        "{dir_b}"
    );
    let (code_a, out_a) = verify(&sandbox, &[], &[]);
    assert_eq!(code_a, 0, "{out_a}");
    let (code_b, out_b) = verify(&sandbox, &[], &env_b);
    assert_eq!(code_b, 0, "{out_b}");
    // Both stopped: each `koru verify` (no daemon to ask) still picks its own socket's folder.
    signal(second.id() as i32, nix::sys::signal::Signal::SIGTERM);
    koru_system_tests::wait_exit(&mut second, Duration::from_secs(10))
        .expect("the second daemon stops");
    first.terminate(Duration::from_secs(10));
    let (code_b, out_b) = verify(&sandbox, &["--json"], &env_b);
    assert_eq!(code_b, 0, "{out_b}");
    assert!(out_b.contains("journals"), "{out_b}");
    let (code_a, out_a) = verify(&sandbox, &["--json"], &[]);
    assert_eq!(code_a, 0, "{out_a}");
    assert!(!out_a.contains("journals"), "{out_a}");
}
