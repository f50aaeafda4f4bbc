//! Replays the real store files of `tests/corpus/<store>/` where the tools write them, under a sandbox HOME, on the real daemon: in place before it starts, copied in while it runs, appended line by line, and appended with the records' own time gaps; checks what each file's `<file>.expect.json` (written by hand) says, and that nothing on disk changed.
//!
//! Checked at each placement: the chat is found (its id, workspace), its last prompt, its
//! state and last activity (`koru chats`), and — for files written while the daemon runs —
//! the exact events on the live stream in order (so exactly one end per turn) with the
//! reply excerpts; for files already there at start, that nothing is published as news.
//! Afterwards every placed file's bytes and its folder's listing are what the test wrote:
//! the daemon only reads.
//!
//! A file its tool rewrites whole (Cline's `ui_messages.json`) can come with its real
//! successive states (`rewrites`): appended, it is written as the tool writes it, each
//! state whole to a temporary file renamed over it, in order.
//!
//! The records' own timing is scaled so that a file's gaps add up to at most
//! `OWN_TIMING_BUDGET` (a long session's minutes become a few hundred milliseconds), and
//! the daemon's quiet period is scaled with it (`OWN_TIMING_QUIET_MS`), so a pause that
//! was long next to the quiet period in real life is long next to it here too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use koru_system_tests::{observed_kind, Observer, Sandbox};
use serde_json::Value;

/// The sum of a file's scaled gaps when it is appended with its records' own timing.
const OWN_TIMING_BUDGET: Duration = Duration::from_millis(400);
/// The daemon's quiet period while files are appended with their own (scaled) timing.
const OWN_TIMING_QUIET_MS: &str = "100";
/// The daemon's quiet period otherwise.
const QUIET_MS: &str = "300";
/// The pause between two successive states of a rewritten file placed "line by line":
/// long enough for the daemon to read each one (a state it never read is not news).
const REWRITE_GAP: Duration = Duration::from_millis(100);
/// How long the stream must stay silent after the expected events (several quiet
/// periods: a late inferred end would show up).
const SILENCE: Duration = Duration::from_millis(1_500);

/// One corpus file and what reading it by hand says.
struct CorpusFile {
    source: PathBuf,
    bytes: Vec<u8>,
    /// The file's successive states as its tool wrote them, oldest first (the last is
    /// `bytes`), for a file rewritten whole; empty otherwise.
    states: Vec<Vec<u8>>,
    expect: Expect,
}

struct Expect {
    store: String,
    /// Where the tool writes it: relative to HOME, or to the sandbox's `XDG_CONFIG_HOME`
    /// when it starts with `$XDG_CONFIG_HOME/` (the VS Code family's user data).
    place: PathBuf,
    /// Files the tool writes beside it (place, as `place` → file name in the same corpus
    /// folder), placed first: Gemini CLI's `.project_root`, VS Code's `workspace.json`.
    beside: BTreeMap<PathBuf, String>,
    chat_id: String,
    workspace: Option<String>,
    last_prompt: Option<String>,
    state: String,
    last_activity_ms: u64,
    /// For a file rewritten through its successive states: the last activity the daemon
    /// lists when it read the state before the last, whose successor adds records but no
    /// news, and why (a known gap: the chats table takes its last activity from events
    /// only). Either that or `last_activity_ms` is accepted.
    last_activity_appended: Option<(u64, String)>,
    /// The live events, in order, when the file is written while the daemon runs.
    events: Vec<String>,
    /// The excerpt of each `reply_completed`, in order.
    replies: Vec<String>,
    /// For a store that records a turn's state in place (a snapshot store), the events
    /// and excerpts when the file is appended line by line, if they differ from those of
    /// the whole file: a state the file passes through (a confirmation awaited) is news
    /// only to a reader that sees it.
    events_appended: Option<Vec<String>>,
    replies_appended: Option<Vec<String>>,
    /// Why the file is left out of the line-by-line placement (each line its own write),
    /// when the tool never writes it that way and the daemon is known to read a split
    /// write wrongly: a known gap, named in the expectation, not a pass.
    not_line_by_line: Option<String>,
    /// A folder, in the same corpus folder, of the file's successive states (one whole
    /// file each, in name order), for a file its tool rewrites whole.
    rewrites: Option<String>,
}

impl Expect {
    /// The live events and reply excerpts expected for `placement`.
    fn live(&self, placement: Placement) -> (&[String], &[String]) {
        let appended = matches!(placement, Placement::LineByLine | Placement::WithOwnTiming);
        match (appended, &self.events_appended, &self.replies_appended) {
            (true, Some(events), Some(replies)) => (events, replies),
            _ => (&self.events, &self.replies),
        }
    }
}

fn corpus() -> Vec<CorpusFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files = Vec::new();
    for store in std::fs::read_dir(&root).expect("tests/corpus exists") {
        let store = store.unwrap().path();
        if store.file_name().is_some_and(|name| name == "recorder") {
            // The script and fake model server that recorded some of the files.
            continue;
        }
        if store.file_name().is_some_and(|name| name == "cursor") {
            // A database of many chats, replayed by observe_replay_cursor.rs.
            continue;
        }
        assert!(
            store.join("PROVENANCE.md").is_file(),
            "{} has no PROVENANCE.md",
            store.display()
        );
        for entry in std::fs::read_dir(&store).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let Some(file_name) = name.strip_suffix(".expect.json") else {
                continue;
            };
            let source = store.join(file_name);
            let bytes = std::fs::read(&source)
                .unwrap_or_else(|error| panic!("{}: {error}", source.display()));
            assert!(bytes.len() < 200_000, "{} is too big", source.display());
            let expect: Value = serde_json::from_slice(&std::fs::read(&path).unwrap())
                .unwrap_or_else(|error| panic!("{name}: {error}"));
            let expect = Expect::from_json(&expect, &name);
            for source in expect.beside.values() {
                assert!(
                    store.join(source).is_file(),
                    "{name}: `beside` names {source}, which is not in {}",
                    store.display()
                );
            }
            let states = match &expect.rewrites {
                Some(folder) => successive_states(&store.join(folder), &bytes, &name),
                None => Vec::new(),
            };
            files.push(CorpusFile {
                source,
                bytes,
                states,
                expect,
            });
        }
    }
    files.sort_by(|a, b| a.source.cmp(&b.source));
    assert!(!files.is_empty(), "the corpus has files");
    files
}

/// The files of `folder` in name order: a rewritten file's states, the last of which is
/// the file itself.
fn successive_states(folder: &Path, file: &[u8], name: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|error| panic!("{name}: rewrites {}: {error}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let states: Vec<Vec<u8>> = paths
        .iter()
        .map(|path| std::fs::read(path).unwrap())
        .collect();
    assert!(
        states.last().is_some_and(|last| last == file),
        "{name}: the last of the rewrites is the file itself"
    );
    states
}

impl Expect {
    fn from_json(value: &Value, name: &str) -> Expect {
        let text = |key: &str| {
            value[key]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: `{key}` is a string"))
                .to_string()
        };
        let texts = |key: &str| -> Vec<String> {
            value[key]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: `{key}` is an array"))
                .iter()
                .map(|item| item.as_str().unwrap().to_string())
                .collect()
        };
        let last_activity = text("last_activity");
        Expect {
            store: text("store"),
            place: PathBuf::from(text("place")),
            beside: value["beside"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(place, source)| {
                    let source = source
                        .as_str()
                        .unwrap_or_else(|| panic!("{name}: `beside` values are file names"));
                    (PathBuf::from(place), source.to_string())
                })
                .collect(),
            chat_id: text("chat_id"),
            workspace: value["workspace"].as_str().map(str::to_string),
            last_prompt: value["last_prompt"].as_str().map(str::to_string),
            state: text("state"),
            last_activity_ms: koru_daemon::observe::text::parse_ts(&last_activity)
                .unwrap_or_else(|| panic!("{name}: last_activity {last_activity}")),
            last_activity_appended: value.get("last_activity_appended").map(|_| {
                let appended = text("last_activity_appended");
                let at = koru_daemon::observe::text::parse_ts(&appended)
                    .unwrap_or_else(|| panic!("{name}: last_activity_appended {appended}"));
                (at, text("known_gap"))
            }),
            events: texts("events"),
            replies: texts("replies"),
            events_appended: value
                .get("events_appended")
                .map(|_| texts("events_appended")),
            replies_appended: value
                .get("replies_appended")
                .map(|_| texts("replies_appended")),
            not_line_by_line: value
                .get("not_line_by_line")
                .map(|_| text("not_line_by_line")),
            rewrites: value.get("rewrites").map(|_| text("rewrites")),
        }
    }
}

/// How a file reaches its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// Already there when the daemon starts: history.
    BeforeStart,
    /// Copied in whole while the daemon runs.
    CopiedIn,
    /// Appended one line at a time.
    LineByLine,
    /// Appended one line at a time with the records' own gaps, scaled.
    WithOwnTiming,
}

/// A file's lines (each with its newline).
fn lines_of(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|byte| *byte == b'\n').collect()
}

/// A record's own time: its top-level `timestamp` (an RFC 3339 string: Claude Code, Codex,
/// Gemini CLI), else the latest epoch-ms `timestamp` or `completedAt` inside it (a VS Code
/// mutation-log entry carries its requests' times, not one of its own).
fn record_time_ms(record: &Value) -> Option<u64> {
    fn latest_inside(value: &Value, depth: usize) -> Option<u64> {
        if depth > 8 {
            return None;
        }
        match value {
            Value::Object(fields) => fields
                .iter()
                .filter_map(|(key, field)| match key.as_str() {
                    "timestamp" | "completedAt" => field.as_u64(),
                    _ => latest_inside(field, depth + 1),
                })
                .max(),
            Value::Array(items) => items
                .iter()
                .filter_map(|item| latest_inside(item, depth + 1))
                .max(),
            _ => None,
        }
    }
    match record["timestamp"].as_str() {
        Some(text) => koru_daemon::observe::text::parse_ts(text),
        None => latest_inside(record, 0),
    }
}

/// A line's own time: its record's (`record_time_ms`).
fn line_time_ms(line: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|record| record_time_ms(&record))
}

/// A rewritten file's state's own time: the latest epoch-ms `ts` of its elements (Cline's
/// messages).
fn state_time_ms(state: &[u8]) -> Option<u64> {
    let state: Value = serde_json::from_slice(state).ok()?;
    state
        .as_array()?
        .iter()
        .filter_map(|message| message["ts"].as_u64())
        .max()
}

/// Each state's own time (`state_time_ms`). A state whose latest record is older than
/// the previous state's removed records (Cline drops a streamed result just before it
/// writes it whole, and a task's old `resume_task` when it is reopened): it was written
/// just before the next state that is as late, and takes that state's time.
fn states_times_ms(states: &[Vec<u8>]) -> Vec<Option<u64>> {
    let own: Vec<Option<u64>> = states.iter().map(|state| state_time_ms(state)).collect();
    let mut latest: Option<u64> = None;
    let mut times = Vec::with_capacity(own.len());
    for (index, time) in own.iter().enumerate() {
        match (*time, latest) {
            (Some(time), Some(before)) if time < before => {
                let next = own[index + 1..]
                    .iter()
                    .flatten()
                    .find(|next| **next >= before);
                times.push(next.copied());
            }
            _ => times.push(*time),
        }
        latest = latest.max(*time);
    }
    times
}

/// The own gaps before each line or state (0 for one without a readable time), scaled
/// to add up to at most `OWN_TIMING_BUDGET`.
fn scaled_gaps(times: &[Option<u64>]) -> Vec<Duration> {
    let mut previous: Option<u64> = None;
    let gaps: Vec<u64> = times
        .iter()
        .map(|ts| {
            let ts = *ts;
            let gap = match (previous, ts) {
                (Some(before), Some(now)) => now.saturating_sub(before),
                _ => 0,
            };
            if ts.is_some() {
                previous = ts;
            }
            gap
        })
        .collect();
    let total: u64 = gaps.iter().sum();
    let budget = OWN_TIMING_BUDGET.as_millis() as f64;
    let factor = if total as f64 > budget {
        budget / total as f64
    } else {
        1.0
    };
    gaps.iter()
        .map(|gap| Duration::from_secs_f64(*gap as f64 * factor / 1000.0))
        .collect()
}

/// The prefix of a place under the sandbox's `XDG_CONFIG_HOME` rather than HOME.
const XDG_CONFIG_HOME_PREFIX: &str = "$XDG_CONFIG_HOME/";

/// A corpus place on the sandbox's disk.
fn on_disk(sandbox: &Sandbox, place: &Path) -> PathBuf {
    match place
        .to_str()
        .and_then(|place| place.strip_prefix(XDG_CONFIG_HOME_PREFIX))
    {
        Some(under_config) => sandbox.xdg_config_home().join(under_config),
        None => sandbox.home().join(place),
    }
}

/// Writes `file` to its place in `sandbox` the way `placement` says, after the files the
/// tool writes beside it (copied whole, unless already there). Returns every place written.
fn place(sandbox: &Sandbox, file: &CorpusFile, placement: Placement) -> Vec<PathBuf> {
    use std::io::Write as _;
    let mut written = Vec::new();
    for (beside, source) in &file.expect.beside {
        let target = on_disk(sandbox, beside);
        if !target.exists() {
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(file.source.parent().unwrap().join(source), &target).unwrap();
        }
        written.push(target);
    }
    let target = on_disk(sandbox, &file.expect.place);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    match placement {
        Placement::BeforeStart => {
            // History: on disk since the tool wrote its last record, so the file's mtime
            // is that record's time, as on a real machine.
            std::fs::copy(&file.source, &target).unwrap();
            let written =
                SystemTime::UNIX_EPOCH + Duration::from_millis(file.expect.last_activity_ms);
            std::fs::File::options()
                .write(true)
                .open(&target)
                .and_then(|out| out.set_modified(written))
                .unwrap();
        }
        Placement::CopiedIn => {
            std::fs::copy(&file.source, &target).unwrap();
        }
        Placement::LineByLine | Placement::WithOwnTiming if !file.states.is_empty() => {
            // As the tool writes it: each state whole, to a temporary file renamed over
            // the file (Cline's `atomicWriteFile`).
            let gaps = if placement == Placement::WithOwnTiming {
                scaled_gaps(&states_times_ms(&file.states))
            } else {
                vec![REWRITE_GAP; file.states.len()]
            };
            let name = target.file_name().unwrap().to_str().unwrap().to_string();
            for (index, (state, gap)) in file.states.iter().zip(gaps).enumerate() {
                std::thread::sleep(gap);
                let temporary = target.with_file_name(format!("{name}.tmp.{index}.json"));
                std::fs::write(&temporary, state).unwrap();
                std::fs::rename(&temporary, &target).unwrap();
            }
        }
        Placement::LineByLine | Placement::WithOwnTiming => {
            let lines = lines_of(&file.bytes);
            let gaps = if placement == Placement::WithOwnTiming {
                let times: Vec<Option<u64>> = lines.iter().map(|line| line_time_ms(line)).collect();
                scaled_gaps(&times)
            } else {
                vec![Duration::from_millis(2); lines.len()]
            };
            let mut out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&target)
                .unwrap();
            // Lines with no time between their records were written at the same moment:
            // they go in one write, as the tool writes a batch (VS Code appends each
            // batch of its mutation log in one write, so no reader sees half of one).
            let mut batch: Vec<u8> = Vec::new();
            for (line, gap) in lines.iter().zip(gaps) {
                if !batch.is_empty() && !gap.is_zero() {
                    out.write_all(&batch).unwrap();
                    batch.clear();
                }
                std::thread::sleep(gap);
                batch.extend_from_slice(line);
            }
            if !batch.is_empty() {
                out.write_all(&batch).unwrap();
            }
        }
    }
    written.push(target);
    written
}

/// Each file's folder listing (name, size, mtime) and bytes, to prove the daemon wrote
/// nothing.
fn disk_state(targets: &[PathBuf]) -> BTreeMap<PathBuf, (u64, SystemTime, Vec<u8>)> {
    let mut state = BTreeMap::new();
    for target in targets {
        for entry in std::fs::read_dir(target.parent().unwrap()).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::metadata(&path).unwrap();
            let bytes = if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            state.insert(path, (meta.len(), meta.modified().unwrap(), bytes));
        }
    }
    state
}

/// The stream's events for each chat until `expected` of them arrived (at most 20 s),
/// and whatever else comes before the stream has been silent for `SILENCE`.
fn collect_events(observer: &Observer, expected: usize) -> BTreeMap<String, Vec<Value>> {
    let mut by_chat: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut keep = |event: Value| {
        let chat = event["chat_id"].as_str().unwrap_or("").to_string();
        by_chat.entry(chat).or_default().push(event);
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    for _ in 0..expected {
        match observer.try_next(deadline.saturating_duration_since(Instant::now())) {
            Some(event) => keep(event),
            None => break,
        }
    }
    while let Some(event) = observer.try_next(SILENCE) {
        keep(event);
    }
    by_chat
}

/// `koru chats --json` until every corpus chat is listed (at most 20 s).
fn chats_listing(sandbox: &Sandbox, files: &[CorpusFile]) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let chats = sandbox.chats();
        let all_there = files.iter().all(|file| {
            chats
                .iter()
                .any(|chat| chat["chat_id"] == file.expect.chat_id)
        });
        if all_there || Instant::now() >= deadline {
            return chats;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checks the listing against each file's expected chat.
fn check_listing(chats: &[Value], files: &[CorpusFile], placement: Placement) {
    for file in files {
        let expect = &file.expect;
        let what = format!("{} ({placement:?})", file.source.display());
        let chat = chats
            .iter()
            .find(|chat| chat["chat_id"] == expect.chat_id && chat["store"] == expect.store)
            .unwrap_or_else(|| panic!("{what}: chat {} not listed: {chats:#?}", expect.chat_id));
        assert_eq!(
            chat["workspace"].as_str(),
            expect.workspace.as_deref(),
            "{what}"
        );
        assert_eq!(
            chat["last_prompt"].as_str(),
            expect.last_prompt.as_deref(),
            "{what}"
        );
        assert_eq!(chat["state"], expect.state.as_str(), "{what}");
        let appended = matches!(placement, Placement::LineByLine | Placement::WithOwnTiming);
        let listed = chat["last_activity_ms"].as_u64();
        match &expect.last_activity_appended {
            // Whether the daemon read the state the known gap comes from depends on when
            // it read: either time is what the store says at some point.
            Some((at, known_gap)) if appended => {
                eprintln!("{what}: known gap: {known_gap}");
                assert!(
                    listed == Some(expect.last_activity_ms) || listed == Some(*at),
                    "{what}: last activity {listed:?} is neither the last record's time nor the known gap's"
                );
            }
            _ => assert_eq!(
                listed,
                Some(expect.last_activity_ms),
                "{what}: last activity is the records' own time"
            ),
        }
    }
}

fn replay(placement: Placement) {
    let files: Vec<CorpusFile> = corpus()
        .into_iter()
        .filter(|file| {
            let left_out =
                placement == Placement::LineByLine && file.expect.not_line_by_line.is_some();
            if left_out {
                eprintln!(
                    "{}: not appended line by line: {}",
                    file.source.display(),
                    file.expect.not_line_by_line.as_deref().unwrap_or("")
                );
            }
            !left_out
        })
        .collect();
    let sandbox = Sandbox::new();
    let mut targets = Vec::new();
    if placement == Placement::BeforeStart {
        for file in &files {
            targets.push(place(&sandbox, file, placement));
        }
    }
    let quiet = if placement == Placement::WithOwnTiming {
        OWN_TIMING_QUIET_MS
    } else {
        QUIET_MS
    };
    let _daemon = sandbox.start_daemon(&["--observe-quiet-ms", quiet]);
    let observer = Observer::start(&sandbox);

    if placement == Placement::BeforeStart {
        // History is history: listed at once with its state from its own records…
        check_listing(&chats_listing(&sandbox, &files), &files, placement);
        // …and each chat reads back, through the daemon, as its hand-written turns say.
        let mut differences = Vec::new();
        for file in &files {
            let turns_file = PathBuf::from(format!("{}.turns.json", file.source.display()));
            let expected: Value = serde_json::from_slice(
                &std::fs::read(&turns_file)
                    .unwrap_or_else(|error| panic!("{}: {error}", turns_file.display())),
            )
            .unwrap();
            differences.extend(koru_system_tests::read_back_differences(
                &sandbox.socket(),
                &file.expect.store,
                &file.expect.chat_id,
                &expected,
            ));
        }
        assert!(
            differences.is_empty(),
            "read back:\n{}",
            differences.join("\n")
        );
        // …and never published as news.
        let events = collect_events(&observer, 0);
        for file in &files {
            let published: Vec<String> = events
                .get(&file.expect.chat_id)
                .map(|events| events.iter().map(observed_kind).collect())
                .unwrap_or_default();
            assert!(
                published.is_empty(),
                "{}: history published as live events: {published:?}",
                file.source.display()
            );
        }
    } else {
        for file in &files {
            targets.push(place(&sandbox, file, placement));
        }
        let expected: usize = files
            .iter()
            .map(|file| file.expect.live(placement).0.len())
            .sum();
        let events = collect_events(&observer, expected);
        for file in &files {
            let expect = &file.expect;
            let what = format!("{} ({placement:?})", file.source.display());
            let chat_events = events.get(&expect.chat_id).cloned().unwrap_or_default();
            let kinds: Vec<String> = chat_events.iter().map(observed_kind).collect();
            let (expected_events, expected_replies) = expect.live(placement);
            assert_eq!(kinds, expected_events, "{what}: the live events");
            for event in &chat_events {
                assert_eq!(event["store"], expect.store.as_str(), "{what}");
                assert_eq!(
                    event["workspace"].as_str(),
                    expect.workspace.as_deref(),
                    "{what}"
                );
            }
            let replies: Vec<&str> = chat_events
                .iter()
                .filter(|event| event["kind"] == "reply_completed")
                .map(|event| event["excerpt"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(replies, expected_replies, "{what}: the reply excerpts");
        }
        check_listing(&chats_listing(&sandbox, &files), &files, placement);
    }

    // Read-only: what the test wrote is what is on disk, a while after the last write.
    let targets: Vec<PathBuf> = targets.concat();
    let written = disk_state(&targets);
    for file in &files {
        let target = on_disk(&sandbox, &file.expect.place);
        assert_eq!(
            std::fs::read(&target).unwrap(),
            file.bytes,
            "{}",
            target.display()
        );
    }
    std::thread::sleep(SILENCE);
    assert!(
        written == disk_state(&targets),
        "the daemon changed a store file or folder listing"
    );
}

#[test]
fn history_in_place_before_start_is_listed_from_its_records_and_not_published() {
    replay(Placement::BeforeStart);
}

#[test]
fn files_copied_in_while_running_give_each_turn_once() {
    replay(Placement::CopiedIn);
}

#[test]
fn files_appended_line_by_line_give_each_turn_once() {
    replay(Placement::LineByLine);
}

#[test]
fn files_appended_with_their_records_own_timing_give_each_turn_once() {
    replay(Placement::WithOwnTiming);
}
