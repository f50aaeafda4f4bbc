//! Replays the real Cursor workspace database of `tests/corpus/cursor/` where Cursor writes it, on the real daemon: in place before it starts, copied in while it runs, grown one turn per SQLite write, and grown one chat per write with the chats' own time gaps; checks every chat `state.vscdb.expect.json` lists, and that the daemon never wrote a byte or a side file.
//!
//! A database cannot be appended line by line. What replaces it: the database is placed
//! with its two chat values emptied (every other row as Cursor wrote it), then grown
//! through SQLite, as Cursor writes it (a rollback journal, one transaction per write), in
//! states taken from the file itself: its composers one turn at a time (each state is one
//! Cursor passed through: a composer whose first turns are answered and `completed`), or
//! one whole chat at a time at the chats' own (scaled) times. The last write puts back the
//! file's own values, byte for byte.
//!
//! Checked at each placement: every chat is listed (its id, workspace, last prompt, state,
//! last activity from the store's own times), no other chat of the store is; for a
//! database written while the daemon runs, the exact events of each chat in order (so
//! exactly one end per turn) with the reply excerpts; for one already there at start,
//! that nothing is published as news. Afterwards the database's bytes, and its folder's
//! listing, are what the test wrote: no `-wal`, `-shm` or `-journal` appeared.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use koru_system_tests::{observed_kind, Observer, Sandbox};
use rusqlite::Connection;
use serde_json::Value;

/// The sum of the scaled gaps when the chats are written at their own times.
const OWN_TIMING_BUDGET: Duration = Duration::from_millis(400);
/// The daemon's quiet period while chats are written at their own (scaled) times.
const OWN_TIMING_QUIET_MS: &str = "100";
/// The daemon's quiet period otherwise.
const QUIET_MS: &str = "300";
/// How long the stream must stay silent after the expected events.
const SILENCE: Duration = Duration::from_millis(1_500);
/// The per-workspace composer list and the legacy chat panel: the values that hold chats.
const COMPOSERS_KEY: &str = "composer.composerData";
const PANEL_KEY: &str = "workbench.panel.aichat.view.aichat.chatdata";

/// What reading the database by hand says (`state.vscdb.expect.json`).
struct Expect {
    store: String,
    place: PathBuf,
    beside: BTreeMap<PathBuf, String>,
    workspace: String,
    chats: Vec<ExpectedChat>,
}

struct ExpectedChat {
    chat_id: String,
    last_prompt: Option<String>,
    state: String,
    last_activity_ms: u64,
    events: Vec<String>,
    replies: Vec<String>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/cursor")
}

fn expectations() -> Expect {
    let path = corpus_dir().join("state.vscdb.expect.json");
    let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let text = |value: &Value, key: &str| -> String {
        value[key]
            .as_str()
            .unwrap_or_else(|| panic!("`{key}` is a string"))
            .to_string()
    };
    let texts = |value: &Value, key: &str| -> Vec<String> {
        value[key]
            .as_array()
            .unwrap_or_else(|| panic!("`{key}` is an array"))
            .iter()
            .map(|item| item.as_str().unwrap().to_string())
            .collect()
    };
    let chats: Vec<ExpectedChat> = value["chats"]
        .as_array()
        .expect("`chats` is an array")
        .iter()
        .map(|chat| ExpectedChat {
            chat_id: text(chat, "chat_id"),
            last_prompt: chat["last_prompt"].as_str().map(str::to_string),
            state: text(chat, "state"),
            last_activity_ms: koru_daemon::observe::text::parse_ts(&text(chat, "last_activity"))
                .expect("last_activity is an RFC 3339 time"),
            events: texts(chat, "events"),
            replies: texts(chat, "replies"),
        })
        .collect();
    assert!(!chats.is_empty(), "the expectation lists chats");
    Expect {
        store: text(&value, "store"),
        place: PathBuf::from(text(&value, "place")),
        beside: value["beside"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(place, source)| (PathBuf::from(place), source.as_str().unwrap().to_string()))
            .collect(),
        workspace: text(&value, "workspace"),
        chats,
    }
}

/// A corpus place (under the sandbox's `XDG_CONFIG_HOME`, where Cursor keeps its user data).
fn on_disk(sandbox: &Sandbox, place: &Path) -> PathBuf {
    let under = place
        .strip_prefix("$XDG_CONFIG_HOME")
        .expect("Cursor's files are placed under $XDG_CONFIG_HOME");
    sandbox.xdg_config_home().join(under)
}

/// How the database reaches its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Already there when the daemon starts: history.
    BeforeStart,
    /// Copied in whole while the daemon runs.
    CopiedIn,
    /// Grown through SQLite one composer turn (or one panel tab) per write.
    TurnByTurn,
    /// Grown through SQLite one whole chat per write, at the chats' own scaled times.
    WithOwnTiming,
}

/// The database's two chat values as Cursor wrote them (the exact text).
struct RealValues {
    composers: String,
    panel: String,
}

fn real_values(database: &Path) -> RealValues {
    let connection = Connection::open_with_flags(
        format!("file:{}?immutable=1", database.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    let value = |key: &str| -> String {
        connection
            .query_row("SELECT value FROM ItemTable WHERE key = ?1", [key], |row| {
                row.get(0)
            })
            .unwrap()
    };
    RealValues {
        composers: value(COMPOSERS_KEY),
        panel: value(PANEL_KEY),
    }
}

/// One write of a growing database: the two values' states and when (ms of the store's
/// own time, for the own-timing placement).
struct Step {
    composers: String,
    panel: String,
    at_ms: u64,
}

/// The composer list with `composers` (each possibly cut to its first turns), and the
/// panel with `tabs`, in the file's own order.
fn grown_value(real: &Value, list: &str, items: Vec<Value>) -> String {
    let mut value = real.clone();
    value[list] = Value::Array(items);
    value.to_string()
}

/// The successive states of the two values, ending with the file's own text.
fn steps(real: &RealValues, placement: Placement) -> Vec<Step> {
    let composers: Value = serde_json::from_str(&real.composers).unwrap();
    let panel: Value = serde_json::from_str(&real.panel).unwrap();
    let all_composers = composers["allComposers"].as_array().unwrap().clone();
    let all_tabs = panel["tabs"].as_array().unwrap().clone();
    // Each chat, whole, with the store's own time of its last write.
    let mut chats: Vec<(u64, bool, usize)> = Vec::new();
    for (index, composer) in all_composers.iter().enumerate() {
        let at = composer["lastUpdatedAt"]
            .as_u64()
            .or(composer["createdAt"].as_u64())
            .unwrap();
        chats.push((at, true, index));
    }
    for (index, tab) in all_tabs.iter().enumerate() {
        chats.push((tab["lastSendTime"].as_u64().unwrap(), false, index));
    }
    chats.sort();
    let mut composers_in: Vec<Option<Value>> = vec![None; all_composers.len()];
    let mut tabs_in: Vec<bool> = vec![false; all_tabs.len()];
    let state = |composers_in: &[Option<Value>], tabs_in: &[bool], at_ms: u64| Step {
        composers: grown_value(
            &composers,
            "allComposers",
            composers_in.iter().flatten().cloned().collect(),
        ),
        panel: grown_value(
            &panel,
            "tabs",
            all_tabs
                .iter()
                .zip(tabs_in)
                .filter(|(_, placed)| **placed)
                .map(|(tab, _)| tab.clone())
                .collect(),
        ),
        at_ms,
    };
    let mut out = Vec::new();
    for (at_ms, is_composer, index) in chats {
        if !is_composer {
            tabs_in[index] = true;
            out.push(state(&composers_in, &tabs_in, at_ms));
            continue;
        }
        let composer = &all_composers[index];
        let conversation = composer["conversation"].as_array().unwrap();
        let cuts: Vec<usize> = if placement == Placement::TurnByTurn {
            // After each answered turn: the bubbles up to the next prompt.
            (1..conversation.len())
                .filter(|&end| conversation[end]["type"] == 1)
                .chain([conversation.len()])
                .collect()
        } else {
            vec![conversation.len()]
        };
        for cut in cuts {
            let mut partial = composer.clone();
            partial["conversation"] = Value::Array(conversation[..cut].to_vec());
            composers_in[index] = Some(partial);
            out.push(state(&composers_in, &tabs_in, at_ms));
        }
    }
    // The last write is the file's own text, byte for byte.
    let last = out.last_mut().unwrap();
    last.composers = real.composers.clone();
    last.panel = real.panel.clone();
    out
}

/// The gap before each step: the store's own gaps scaled to `OWN_TIMING_BUDGET`, or 2 ms.
fn gaps(steps: &[Step], placement: Placement) -> Vec<Duration> {
    if placement != Placement::WithOwnTiming {
        return vec![Duration::from_millis(2); steps.len()];
    }
    let raw: Vec<u64> = steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            index.checked_sub(1).map_or(0, |previous| {
                step.at_ms.saturating_sub(steps[previous].at_ms)
            })
        })
        .collect();
    let total: u64 = raw.iter().sum();
    let factor = OWN_TIMING_BUDGET.as_secs_f64() * 1000.0 / total.max(1) as f64;
    raw.iter()
        .map(|gap| Duration::from_secs_f64(*gap as f64 * factor.min(1.0) / 1000.0))
        .collect()
}

/// Writes one state through SQLite, in one transaction, as Cursor writes its values.
fn write_values(writer: &Connection, composers: &str, panel: &str) {
    writer
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the writer gets its lock");
    for (key, value) in [(COMPOSERS_KEY, composers), (PANEL_KEY, panel)] {
        writer
            .execute(
                "UPDATE ItemTable SET value = ?2 WHERE key = ?1",
                (key, value),
            )
            .unwrap();
    }
    writer.execute_batch("COMMIT").unwrap();
}

/// Places the database the way `placement` says (after its `workspace.json`); returns the
/// database's path.
fn place(sandbox: &Sandbox, expect: &Expect, placement: Placement) -> PathBuf {
    for (beside, source) in &expect.beside {
        let target = on_disk(sandbox, beside);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(corpus_dir().join(source), &target).unwrap();
    }
    let source = corpus_dir().join("state.vscdb");
    let target = on_disk(sandbox, &expect.place);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    match placement {
        Placement::BeforeStart => {
            // On disk since Cursor's last write: the file's mtime is the latest own time.
            std::fs::copy(&source, &target).unwrap();
            let last_ms = expect
                .chats
                .iter()
                .map(|chat| chat.last_activity_ms)
                .max()
                .unwrap();
            std::fs::File::options()
                .write(true)
                .open(&target)
                .and_then(|out| {
                    out.set_modified(SystemTime::UNIX_EPOCH + Duration::from_millis(last_ms))
                })
                .unwrap();
        }
        Placement::CopiedIn => {
            std::fs::copy(&source, &target).unwrap();
        }
        Placement::TurnByTurn | Placement::WithOwnTiming => {
            let real = real_values(&source);
            let steps = steps(&real, placement);
            // The database as it was before its first chat: every other row as Cursor
            // wrote it, the two chat values empty. Prepared aside, then copied in.
            let scratch = tempfile::tempdir().unwrap();
            let empty = scratch.path().join("state.vscdb");
            std::fs::copy(&source, &empty).unwrap();
            let prepare = Connection::open(&empty).unwrap();
            let composers: Value = serde_json::from_str(&real.composers).unwrap();
            let panel: Value = serde_json::from_str(&real.panel).unwrap();
            write_values(
                &prepare,
                &grown_value(&composers, "allComposers", Vec::new()),
                &grown_value(&panel, "tabs", Vec::new()),
            );
            drop(prepare);
            std::fs::copy(&empty, &target).unwrap();
            let writer = Connection::open(&target).unwrap();
            writer.busy_timeout(Duration::from_secs(5)).unwrap();
            let mode: String = writer
                .query_row("PRAGMA journal_mode", [], |row| row.get(0))
                .unwrap();
            assert_eq!(mode, "delete", "Cursor's own journal mode, kept");
            for (step, gap) in steps.iter().zip(gaps(&steps, placement)) {
                std::thread::sleep(gap);
                write_values(&writer, &step.composers, &step.panel);
            }
            drop(writer);
            assert_eq!(
                real_values(&target).composers,
                real.composers,
                "the last write is the file's own value"
            );
        }
    }
    target
}

/// Every file in the database's folder: name, size, mtime and bytes.
fn folder_state(database: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, Vec<u8>)> {
    std::fs::read_dir(database.parent().unwrap())
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let meta = std::fs::metadata(&path).unwrap();
            let state = (
                meta.len(),
                meta.modified().unwrap(),
                std::fs::read(&path).unwrap(),
            );
            (path, state)
        })
        .collect()
}

/// The stream's events by chat until `expected` arrived (at most 30 s), then whatever else
/// comes before the stream has been silent for `SILENCE`.
fn events_by_chat(observer: &Observer, expected: usize) -> BTreeMap<String, Vec<Value>> {
    let mut by_chat: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut received = 0;
    while received < expected {
        let Some(event) = observer.try_next(deadline.saturating_duration_since(Instant::now()))
        else {
            break;
        };
        received += 1;
        let chat = event["chat_id"].as_str().unwrap_or("").to_string();
        by_chat.entry(chat).or_default().push(event);
    }
    while let Some(event) = observer.try_next(SILENCE) {
        let chat = event["chat_id"].as_str().unwrap_or("").to_string();
        by_chat.entry(chat).or_default().push(event);
    }
    by_chat
}

/// The store's chats in `koru chats --json` once every expected one is listed (at most
/// 30 s).
fn listed_chats(sandbox: &Sandbox, expect: &Expect) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let chats: Vec<Value> = sandbox
            .chats()
            .into_iter()
            .filter(|chat| chat["store"] == expect.store.as_str())
            .collect();
        let all_there = expect
            .chats
            .iter()
            .all(|wanted| chats.iter().any(|chat| chat["chat_id"] == wanted.chat_id));
        if all_there || Instant::now() >= deadline {
            return chats;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn check_listing(sandbox: &Sandbox, expect: &Expect, placement: Placement) {
    let chats = listed_chats(sandbox, expect);
    assert_eq!(
        chats.len(),
        expect.chats.len(),
        "{placement:?}: exactly the database's chats are listed: {chats:#?}"
    );
    for wanted in &expect.chats {
        let what = format!("{placement:?}: chat {}", wanted.chat_id);
        let chat = chats
            .iter()
            .find(|chat| chat["chat_id"] == wanted.chat_id)
            .unwrap_or_else(|| panic!("{what} is not listed"));
        assert_eq!(chat["workspace"], expect.workspace.as_str(), "{what}");
        assert_eq!(
            chat["last_prompt"].as_str(),
            wanted.last_prompt.as_deref(),
            "{what}"
        );
        assert_eq!(chat["state"], wanted.state.as_str(), "{what}");
        assert_eq!(
            chat["last_activity_ms"].as_u64(),
            Some(wanted.last_activity_ms),
            "{what}: last activity is the store's own time"
        );
    }
}

fn replay(placement: Placement) {
    let expect = expectations();
    let sandbox = Sandbox::new();
    let mut database = None;
    if placement == Placement::BeforeStart {
        database = Some(place(&sandbox, &expect, placement));
    }
    let quiet = if placement == Placement::WithOwnTiming {
        OWN_TIMING_QUIET_MS
    } else {
        QUIET_MS
    };
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", quiet]);
    let observer = Observer::start(&sandbox);
    if placement == Placement::BeforeStart {
        // History: listed at once with its state from its own times, never news.
        check_listing(&sandbox, &expect, placement);
        // Each chat reads back, through the daemon, as its hand-written turns say.
        let expected: Value = serde_json::from_slice(
            &std::fs::read(corpus_dir().join("state.vscdb.turns.json")).unwrap(),
        )
        .unwrap();
        let mut differences = Vec::new();
        for (chat_id, turns) in expected["chats"].as_object().unwrap() {
            differences.extend(koru_system_tests::read_back_differences(
                &sandbox.socket(),
                &expect.store,
                chat_id,
                turns,
            ));
        }
        assert!(
            differences.is_empty(),
            "read back:\n{}",
            differences.join("\n")
        );
        let published = events_by_chat(&observer, 0);
        assert!(
            published.is_empty(),
            "history published as live events: {:?}",
            published.keys().collect::<Vec<_>>()
        );
    } else {
        database = Some(place(&sandbox, &expect, placement));
        let expected: usize = expect.chats.iter().map(|chat| chat.events.len()).sum();
        let mut events = events_by_chat(&observer, expected);
        for wanted in &expect.chats {
            let what = format!("{placement:?}: chat {}", wanted.chat_id);
            let chat_events = events.remove(&wanted.chat_id).unwrap_or_default();
            let kinds: Vec<String> = chat_events.iter().map(observed_kind).collect();
            assert_eq!(kinds, wanted.events, "{what}: the live events");
            for event in &chat_events {
                assert_eq!(event["store"], expect.store.as_str(), "{what}");
                assert_eq!(event["workspace"], expect.workspace.as_str(), "{what}");
            }
            let replies: Vec<&str> = chat_events
                .iter()
                .filter(|event| event["kind"] == "reply_completed")
                .map(|event| event["excerpt"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(replies, wanted.replies, "{what}: the reply excerpts");
        }
        assert!(
            events.is_empty(),
            "{placement:?}: events of chats the database does not hold: {:?}",
            events.keys().collect::<Vec<_>>()
        );
        check_listing(&sandbox, &expect, placement);
    }

    // Read-only: what the test wrote is what is on disk, a while after the last write.
    let database = database.unwrap();
    let written = folder_state(&database);
    let mut names: Vec<String> = written
        .keys()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["state.vscdb", "workspace.json"],
        "no -wal, -shm or -journal was left"
    );
    if matches!(placement, Placement::BeforeStart | Placement::CopiedIn) {
        assert!(
            written[&database].2 == std::fs::read(corpus_dir().join("state.vscdb")).unwrap(),
            "the database is the corpus file, byte for byte"
        );
    }
    std::thread::sleep(SILENCE);
    assert!(
        written == folder_state(&database),
        "the daemon changed the database or its folder"
    );
}

#[test]
fn a_workspace_database_in_place_before_start_is_listed_from_its_own_times_and_not_published() {
    replay(Placement::BeforeStart);
}

#[test]
fn a_workspace_database_copied_in_while_running_gives_each_turn_once() {
    replay(Placement::CopiedIn);
}

#[test]
fn a_workspace_database_grown_one_turn_per_write_gives_each_turn_once() {
    replay(Placement::TurnByTurn);
}

#[test]
fn a_workspace_database_grown_at_its_chats_own_times_gives_each_turn_once() {
    replay(Placement::WithOwnTiming);
}
