//! A heavy user's Claude Code history for the `observe_scale` bench: writes `DIR/.claude/projects/-home-user-proj-NN/<session>.jsonl` files made of the real records of tests/corpus/claude_code (used as templates), with fresh ids, sizes, versions, endings and mtimes drawn from a seeded generator, plus `DIR/koru-scale-manifest.tsv` naming each session's version and ending.
//!
//! Each record is a template taken from a real transcript: the JSON of the record with its
//! ids, times, paths and texts replaced by markers, serialized once, then cut at the
//! markers. Writing a record is copying the pieces between the markers and the values in
//! them, so gigabytes take seconds. A file is rendered in memory with its timestamps as
//! offsets from the session's start, which is only known once the file is complete (the
//! last record is dated just before the file's mtime); the fixed-width timestamps are then
//! written in place.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The project folders sessions are spread over.
pub const PROJECTS: usize = 60;
/// Smallest and largest session file.
const MIN_FILE: u64 = 5 * 1024;
const MAX_FILE: u64 = 3 * 1024 * 1024;
/// The manifest beside `.claude` (not inside the store: the daemon never sees it).
pub const MANIFEST: &str = "koru-scale-manifest.tsv";
/// Bumped whenever the output for the same options changes (a kept corpus is remade).
const GENERATOR_VERSION: u32 = 2;

/// Default total size for `sessions` sessions: 1 GB per 3,000.
pub fn default_bytes(sessions: usize) -> u64 {
    sessions as u64 * 1_000_000_000 / 3000
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub sessions: usize,
    /// Total size of all session files, about.
    pub bytes: u64,
    pub seed: u64,
}

impl Options {
    /// The manifest's first line, which says which corpus a folder holds.
    fn header(&self) -> String {
        format!(
            "# koru observe_scale corpus v{GENERATOR_VERSION} sessions={} bytes={} seed={}",
            self.sessions, self.bytes, self.seed
        )
    }
}

/// How a session's last turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ending {
    /// As the version writes it: an end record (2.1.x), or the final reply text (older).
    Ended,
    /// The last record is assistant text after a thinking record, with no end record.
    TextAfterThinking,
    /// The last record is a prompt nothing answered.
    UnansweredPrompt,
}

impl Ending {
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Ended => "ended",
            Ending::TextAfterThinking => "text-after-thinking",
            Ending::UnansweredPrompt => "unanswered-prompt",
        }
    }

    fn parse(text: &str) -> Option<Ending> {
        [
            Ending::Ended,
            Ending::TextAfterThinking,
            Ending::UnansweredPrompt,
        ]
        .into_iter()
        .find(|e| e.as_str() == text)
    }
}

/// The record layout of a Claude Code version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Style {
    /// 2.1.x: one record per content block, `turn_duration` / `stop_hook_summary` end records.
    V21,
    /// 2.0.x: one record per API message, no end records, file-history snapshots.
    V20,
    /// 1.0.x: one record per API message, no end records, no snapshots.
    V10,
}

impl Style {
    fn of(version: &str) -> Style {
        if version.starts_with("2.1.") {
            Style::V21
        } else if version.starts_with("2.0.") {
            Style::V20
        } else {
            Style::V10
        }
    }

    pub fn family(self) -> &'static str {
        match self {
            Style::V21 => "2.1.x",
            Style::V20 => "2.0.x",
            Style::V10 => "1.0.x",
        }
    }
}

const V21_VERSIONS: [&str; 4] = ["2.1.38", "2.1.39", "2.1.61", "2.1.197"];
const V20_VERSIONS: [&str; 3] = ["2.0.14", "2.0.37", "2.0.76"];
const V10_VERSIONS: [&str; 3] = ["1.0.51", "1.0.88", "1.0.128"];

/// One session of a generated corpus, as its manifest names it.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub path: PathBuf,
    pub cwd: String,
    pub version: String,
    pub ending: Ending,
    pub bytes: u64,
}

impl Session {
    pub fn style(&self) -> Style {
        Style::of(&self.version)
    }
}

/// A generated corpus: `home` is the folder whose `.claude/projects` holds it.
#[derive(Debug)]
pub struct Corpus {
    pub home: PathBuf,
    pub sessions: Vec<Session>,
}

impl Corpus {
    pub fn bytes(&self) -> u64 {
        self.sessions.iter().map(|s| s.bytes).sum()
    }

    /// The sessions by version family and ending.
    pub fn mix(&self) -> BTreeMap<(Style, Ending), usize> {
        let mut mix = BTreeMap::new();
        for session in &self.sessions {
            *mix.entry((session.style(), session.ending)).or_default() += 1;
        }
        mix
    }

    /// Reads the manifest `home` holds, if it was written for `options`.
    pub fn open(home: &Path, options: &Options) -> Result<Option<Corpus>> {
        let Ok(text) = std::fs::read_to_string(home.join(MANIFEST)) else {
            return Ok(None);
        };
        let mut lines = text.lines();
        if lines.next() != Some(options.header().as_str()) {
            return Ok(None);
        }
        let mut sessions = Vec::with_capacity(options.sessions);
        for line in lines {
            let fields: Vec<&str> = line.split('\t').collect();
            let [id, folder, cwd, version, ending, bytes] = fields[..] else {
                bail!("a manifest line that is not 6 fields: {line:?}");
            };
            sessions.push(Session {
                id: id.to_string(),
                path: home
                    .join(".claude/projects")
                    .join(folder)
                    .join(format!("{id}.jsonl")),
                cwd: cwd.to_string(),
                version: version.to_string(),
                ending: Ending::parse(ending).context("an unknown ending in the manifest")?,
                bytes: bytes.parse()?,
            });
        }
        // A run that stopped half-way leaves a manifest without every line, or files missing.
        if sessions.len() != options.sessions || sessions.iter().any(|s| !s.path.exists()) {
            return Ok(None);
        }
        Ok(Some(Corpus {
            home: home.to_path_buf(),
            sessions,
        }))
    }
}

/// xorshift64* — small, fast and the same on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so that nearby seeds start far apart (and never at 0).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) % n as u64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + (self.next_u64() >> 11) % (high - low + 1)
    }

    /// Log-uniform in `[low, high]`.
    pub fn log_between(&mut self, low: u64, high: u64) -> u64 {
        let (l, h) = ((low.max(1)) as f64, (high.max(low).max(1)) as f64);
        (l * (h / l).powf(self.unit())).round() as u64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-12);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A version 4 UUID, as text.
    pub fn uuid(&mut self) -> String {
        let (a, b) = (self.next_u64(), self.next_u64());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | (b >> 48) & 0x3fff,
            b & 0xffff_ffff_ffff
        )
    }

    /// An id like the API's (`msg_01…`, `toolu_01…`).
    fn api_id(&mut self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut id = format!("{prefix}_01");
        for _ in 0..22 {
            id.push(char::from(ALPHABET[self.below(ALPHABET.len())]));
        }
        id
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (24 bytes) of a Unix time in ms.
pub fn iso_ms(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    let in_day = ms % 86_400_000;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

const TS_LEN: usize = 24;

/// A JSON value that keeps its object keys in the order they were written (serde_json's
/// `Value` sorts them, and a record's key order is part of what a reader meets: `type`
/// comes after a dozen other keys in Claude Code's records).
#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<J>),
    Object(Vec<(String, J)>),
}

static NULL: J = J::Null;

impl J {
    fn object(pairs: &[(&str, J)]) -> J {
        J::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut J> {
        match self {
            J::Object(pairs) => pairs.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value at a JSON pointer of object keys (`/message/content`).
    fn pointer_mut(&mut self, pointer: &str) -> Option<&mut J> {
        pointer
            .split('/')
            .skip(1)
            .try_fold(self, |value, key| value.get_mut(key))
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            J::String(s) => Some(s),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&Vec<J>> {
        match self {
            J::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_array_mut(&mut self) -> Option<&mut Vec<J>> {
        match self {
            J::Array(items) => Some(items),
            _ => None,
        }
    }
}

impl std::ops::Index<&str> for J {
    type Output = J;
    fn index(&self, key: &str) -> &J {
        match self {
            J::Object(pairs) => pairs
                .iter()
                .find(|(k, _)| k == key)
                .map_or(&NULL, |(_, v)| v),
            _ => &NULL,
        }
    }
}

impl std::ops::IndexMut<&str> for J {
    fn index_mut(&mut self, key: &str) -> &mut J {
        self.get_mut(key)
            .expect("only keys a record has are replaced")
    }
}

impl PartialEq<&str> for J {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl PartialEq<bool> for J {
    fn eq(&self, other: &bool) -> bool {
        matches!(self, J::Bool(b) if b == other)
    }
}

impl serde::Serialize for J {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            J::Null => serializer.serialize_unit(),
            J::Bool(b) => serializer.serialize_bool(*b),
            J::Number(n) => n.serialize(serializer),
            J::String(s) => serializer.serialize_str(s),
            J::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            J::Object(pairs) => {
                let mut map = serializer.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for J {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<J, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = J;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_none<E>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<J, E> {
                Ok(J::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<J, E> {
                Ok(J::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<J, E> {
                Ok(J::Number(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<J, E> {
                Ok(serde_json::Number::from_f64(n).map_or(J::Null, J::Number))
            }
            fn visit_str<E>(self, s: &str) -> Result<J, E> {
                Ok(J::String(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<J, E> {
                Ok(J::String(s))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<J, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(J::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<J, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry()? {
                    pairs.push((k, v));
                }
                Ok(J::Object(pairs))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// What a marker in a template stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    SessionId,
    /// This record's own `uuid` (fresh; the next record's parent).
    Uuid,
    /// The previous record's `uuid`, or null.
    Parent,
    Timestamp,
    Cwd,
    Version,
    Slug,
    GitBranch,
    /// The prompt the next user record carries (`messageId` of a file-history snapshot).
    PromptUuid,
    Prompt,
    Text,
    Thinking,
    /// Tool output of the length asked for.
    Output,
    MessageId,
    ToolId,
    /// The content blocks of an assistant record (a JSON array).
    Content,
    Summary,
}

const VARS: [(&str, Var); 17] = [
    ("SESSION", Var::SessionId),
    ("UUID", Var::Uuid),
    ("PARENT", Var::Parent),
    ("TS", Var::Timestamp),
    ("CWD", Var::Cwd),
    ("VERSION", Var::Version),
    ("SLUG", Var::Slug),
    ("BRANCH", Var::GitBranch),
    ("PROMPTUUID", Var::PromptUuid),
    ("PROMPT", Var::Prompt),
    ("TEXT", Var::Text),
    ("THINKING", Var::Thinking),
    ("OUTPUT", Var::Output),
    ("MSGID", Var::MessageId),
    ("TOOLID", Var::ToolId),
    ("CONTENT", Var::Content),
    ("SUMMARY", Var::Summary),
];

fn marker(var: Var) -> String {
    let name = VARS.iter().find(|(_, v)| *v == var).unwrap().0;
    format!("@@KORU_{name}@@")
}

#[derive(Debug, Clone)]
enum Piece {
    Bytes(Vec<u8>),
    /// A marker that was a whole JSON string (quotes dropped: the value is a whole token).
    Token(Var),
    /// A marker inside a longer JSON string: the value's text, escaped.
    Inline(Var),
}

/// A record (or an assistant content block) cut at its markers.
#[derive(Debug, Clone)]
struct Template {
    pieces: Vec<Piece>,
}

/// Folders of the real transcripts, written as the generated session's folder instead.
const CORPUS_CWDS: [&str; 4] = [
    "/home/USER/projects/spotter-worktrees/spotter-gqc",
    "/home/marco/projects/spotter",
    "/tmp/koru-rec/claude/demo",
    "/home/USER/projects/spotter",
];

impl Template {
    fn of(value: &J) -> Template {
        let mut text = serde_json::to_string(value).expect("a template serializes");
        for cwd in CORPUS_CWDS {
            text = text.replace(cwd, &marker(Var::Cwd));
        }
        let bytes = text.as_bytes();
        let mut pieces = Vec::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i..].starts_with(b"@@KORU_") {
                let rest = &text[i + 7..];
                let end = rest.find("@@").expect("a marker ends");
                let name = &rest[..end];
                let var = VARS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| *v)
                    .expect("a known marker");
                let after = i + 7 + end + 2;
                // A whole string: an unescaped quote before, a quote after.
                let n = literal.len();
                let whole = n >= 2
                    && literal[n - 1] == b'"'
                    && literal[n - 2] != b'\\'
                    && bytes.get(after) == Some(&b'"');
                if whole {
                    literal.pop();
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Bytes(std::mem::take(&mut literal)));
                }
                pieces.push(if whole {
                    Piece::Token(var)
                } else {
                    Piece::Inline(var)
                });
                i = if whole { after + 1 } else { after };
            } else {
                literal.push(bytes[i]);
                i += 1;
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Bytes(literal));
        }
        Template { pieces }
    }

    fn has(&self, var: Var) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Token(v) | Piece::Inline(v) if *v == var))
    }
}

/// A JSON string token (quotes included) and its escaped text without them.
fn token(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Every record the transcripts hold, sorted into the kinds a session is written from.
#[derive(Debug)]
struct Templates {
    prompts: Vec<Template>,
    /// Assistant records with their content replaced by the blocks written.
    assistants: Vec<Template>,
    text_block: Template,
    thinking_blocks: Vec<Template>,
    /// A `tool_use` block and the user record carrying its result, from the same call.
    tools: Vec<(Template, Template)>,
    progress: Vec<Template>,
    turn_duration: Template,
    stop_hook_summary: Template,
    snapshots: Vec<Template>,
    summary: Template,
    /// The folder the transcripts were read from, for errors.
    source: PathBuf,
}

/// The real transcripts: tests/corpus/claude_code.
pub fn transcripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/claude_code")
}

fn set(value: &mut J, pointer: &str, to: J) {
    if let Some(slot) = value.pointer_mut(pointer) {
        *slot = to;
    }
}

fn m(var: Var) -> J {
    J::String(marker(var))
}

/// The fields every chained record carries.
fn stamp_common(record: &mut J) {
    for (field, var) in [
        ("sessionId", Var::SessionId),
        ("uuid", Var::Uuid),
        ("parentUuid", Var::Parent),
        ("timestamp", Var::Timestamp),
        ("cwd", Var::Cwd),
        ("version", Var::Version),
        ("slug", Var::Slug),
        ("gitBranch", Var::GitBranch),
    ] {
        if let Some(slot) = record.get_mut(field) {
            *slot = m(var);
        }
    }
}

impl Templates {
    fn load(dir: &Path) -> Result<Templates> {
        let mut records = Vec::new();
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        names.sort();
        for name in &names {
            let text = std::fs::read_to_string(name)?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                records.push(serde_json::from_str::<J>(line)?);
            }
        }
        let mut t = Templates {
            prompts: Vec::new(),
            assistants: Vec::new(),
            text_block: Template::of(&J::object(&[
                ("type", J::String("text".into())),
                ("text", m(Var::Text)),
            ])),
            thinking_blocks: Vec::new(),
            tools: Vec::new(),
            progress: Vec::new(),
            turn_duration: Template { pieces: Vec::new() },
            stop_hook_summary: Template { pieces: Vec::new() },
            snapshots: Vec::new(),
            // No transcript here holds one; the shape Claude Code writes at the head of a
            // resumed session's file.
            summary: Template::of(&J::object(&[
                ("type", J::String("summary".into())),
                ("summary", m(Var::Summary)),
                ("leafUuid", m(Var::Uuid)),
            ])),
            source: dir.to_path_buf(),
        };
        let mut results: BTreeMap<String, J> = BTreeMap::new();
        let mut uses: Vec<J> = Vec::new();
        for record in &records {
            let kind = record["type"].as_str().unwrap_or("");
            let content = &record["message"]["content"];
            match kind {
                "user" => {
                    if let Some(text) = content.as_str() {
                        let injected = text.trim_start().starts_with('<')
                            || text.starts_with("[Request interrupted");
                        if !injected && record["isMeta"] != true {
                            let mut r = record.clone();
                            stamp_common(&mut r);
                            set(&mut r, "/message/content", m(Var::Prompt));
                            t.prompts.push(Template::of(&r));
                        }
                    } else if let Some(blocks) = content.as_array() {
                        if let Some(id) = blocks
                            .iter()
                            .find(|b| b["type"] == "tool_result")
                            .and_then(|b| b["tool_use_id"].as_str())
                        {
                            results.insert(id.to_string(), record.clone());
                        }
                    }
                }
                "assistant" => {
                    let Some(blocks) = content.as_array() else {
                        continue;
                    };
                    for block in blocks {
                        match block["type"].as_str() {
                            Some("thinking") => {
                                let mut b = block.clone();
                                b["thinking"] = m(Var::Thinking);
                                t.thinking_blocks.push(Template::of(&b));
                            }
                            Some("tool_use") => uses.push(block.clone()),
                            _ => {}
                        }
                    }
                    let mut r = record.clone();
                    stamp_common(&mut r);
                    set(&mut r, "/message/content", m(Var::Content));
                    set(&mut r, "/message/id", m(Var::MessageId));
                    // Never `end_turn`: whether a turn ended is said by the records the
                    // generator writes after it, not by the template it came from.
                    set(&mut r, "/message/stop_reason", J::Null);
                    t.assistants.push(Template::of(&r));
                }
                "progress" => {
                    let mut r = record.clone();
                    stamp_common(&mut r);
                    set(&mut r, "/toolUseID", m(Var::ToolId));
                    set(&mut r, "/parentToolUseID", m(Var::ToolId));
                    t.progress.push(Template::of(&r));
                }
                "system" => {
                    let mut r = record.clone();
                    stamp_common(&mut r);
                    match record["subtype"].as_str() {
                        Some("turn_duration") => t.turn_duration = Template::of(&r),
                        Some("stop_hook_summary") => t.stop_hook_summary = Template::of(&r),
                        _ => {}
                    }
                }
                "file-history-snapshot" => {
                    let mut r = record.clone();
                    set(&mut r, "/messageId", m(Var::PromptUuid));
                    set(&mut r, "/snapshot/messageId", m(Var::PromptUuid));
                    set(&mut r, "/snapshot/timestamp", m(Var::Timestamp));
                    t.snapshots.push(Template::of(&r));
                }
                _ => {}
            }
        }
        for block in uses {
            let Some(id) = block["id"].as_str() else {
                continue;
            };
            let Some(result) = results.get(id) else {
                continue;
            };
            let mut b = block.clone();
            b["id"] = m(Var::ToolId);
            let mut r = result.clone();
            stamp_common(&mut r);
            if let Some(blocks) = r.pointer_mut("/message/content").and_then(J::as_array_mut) {
                for b in blocks.iter_mut().filter(|b| b["type"] == "tool_result") {
                    b["tool_use_id"] = m(Var::ToolId);
                    b["content"] = m(Var::Output);
                }
            }
            set(&mut r, "/sourceToolAssistantUUID", m(Var::Parent));
            // Claude Code keeps the tool's own result beside the model's copy: the output
            // twice, as in the real files.
            set(&mut r, "/toolUseResult/stdout", m(Var::Output));
            set(&mut r, "/toolUseResult/file/content", m(Var::Output));
            t.tools.push((Template::of(&b), Template::of(&r)));
        }
        if t.prompts.is_empty()
            || t.assistants.is_empty()
            || t.tools.is_empty()
            || t.thinking_blocks.is_empty()
            || t.snapshots.is_empty()
            || t.turn_duration.pieces.is_empty()
            || t.stop_hook_summary.pieces.is_empty()
        {
            bail!(
                "the transcripts in {} lack a kind of record the generator needs",
                t.source.display()
            );
        }
        Ok(t)
    }
}

/// Texts the records carry, as JSON string tokens.
#[derive(Debug)]
struct Texts {
    prompts: Vec<String>,
    replies: Vec<String>,
    thoughts: Vec<String>,
    summaries: Vec<String>,
    /// Tool output lines, escaped, each ending in `\n`, one after the other.
    output: String,
    /// Where each line of `output` starts.
    line_starts: Vec<usize>,
}

const PROMPTS: [&str; 24] = [
    "The integration tests fail on CI but pass locally, can you find out why?",
    "Add a --json flag to the status command and document it in the README",
    "refactor the config loader so that every error carries the file and the line",
    "why is the build so slow? look at the workspace and tell me what to change",
    "Write unit tests for the date parser, including leap years and time zones",
    "rename `UserRecord` to `Account` everywhere, keep the serde names",
    "can you review the last commit and point out anything risky",
    "The dashboard shows stale data after a reconnect. Fix it and add a regression test.",
    "migrate the remaining callbacks in src/net to async/await",
    "explain what this module does and whether we still need it",
    "Bump the dependencies, run the tests and fix whatever breaks",
    "the memory usage grows over time when the watcher runs, profile it",
    "make the error message for a missing config file say where we looked",
    "Please implement pagination for the /api/items endpoint (cursor based)",
    "lint is failing, fix the warnings without changing behaviour",
    "split main.rs into modules, it is too long now",
    "Add retries with backoff to the HTTP client, max 5 attempts",
    "did you push?",
    "run the benchmarks and compare with the numbers in docs/benchmarks.md",
    "There's a race between shutdown and the last write, can you see it?",
    "write a migration that adds an index on (user_id, created_at)",
    "Summarise the open TODOs in the codebase by area",
    "port the bash install script to a Makefile target",
    "Fix the flaky test `reconnects_after_timeout` — it fails about one run in 20.\n\nThe log of a failing run is in /tmp/ci.log.",
];

const REPLIES: [&str; 12] = [
    "I'll start by reading the failing test and the code it exercises.",
    "Let me look at how the configuration is loaded first.",
    "The tests pass now. The cause was a timezone assumption in the fixture: it built dates in local time while the code under test used UTC.",
    "Done. I renamed the type in 14 files and kept `#[serde(rename)]` on the fields so the wire format does not change.",
    "I found two problems: the retry loop never resets its counter, and the timeout is applied per attempt instead of per request. Both are fixed in `client.rs`.",
    "Here is a summary of what I changed:\n\n1. `src/config.rs`: errors now carry the path and line.\n2. `src/main.rs`: the message names the folders searched.\n3. Added tests for both.",
    "The build spends most of its time in `syn` and `serde_derive`. Splitting the crate would help more than changing the profile.",
    "Let me check the git log to see what changed recently.",
    "Yes, pushed to `origin/main` (3 commits).",
    "I'm going to run the test suite to see the current state.",
    "The watcher keeps every path it has ever seen in a map that is never pruned; removing entries when files disappear fixes the growth.",
    "Now let me verify the fix by running the whole suite again.",
];

const THOUGHTS: [&str; 6] = [
    "The user wants the failing test fixed. I should read the test first, then the code it calls, and check whether the failure depends on the environment.",
    "This looks like an ordering problem: the write happens after the shutdown signal is observed. Let me check where the channel is closed.",
    "Before changing anything I should run the tests to see the current state, otherwise I cannot tell what my change broke.",
    "The error comes from the config loader, which swallows the path. I need to thread the path through to the error type.",
    "There are two options: change the API or add an adapter. The adapter keeps callers unchanged, so that is the safer choice.",
    "Let me think about what could make this flaky: timing, shared state between tests, or the port being reused.",
];

const SUMMARIES: [&str; 6] = [
    "Fix flaky reconnect test and CI timezone",
    "Config loader errors with file and line",
    "Pagination for items endpoint",
    "Dependency bump and lint fixes",
    "Memory growth in file watcher",
    "Refactor main.rs into modules",
];

/// Lines of tool output that are not in the transcripts: compiler, test and listing output.
fn synthetic_output_lines(rng: &mut Rng) -> Vec<String> {
    let mut lines = Vec::new();
    let crates = [
        "serde", "tokio", "hyper", "regex", "syn", "anyhow", "clap", "rand",
    ];
    for i in 0..400 {
        let krate = rng.pick(&crates);
        lines.push(match i % 8 {
            0 => format!(
                "   Compiling {krate} v1.{}.{}",
                rng.below(40),
                rng.below(20)
            ),
            1 => format!(
                "test {}::tests::{}_{} ... ok",
                krate,
                rng.pick(&["parses", "rejects", "handles", "keeps"]),
                rng.pick(&[
                    "empty_input",
                    "unicode",
                    "large_files",
                    "timeouts",
                    "errors"
                ])
            ),
            2 => format!(
                "warning: unused variable: `{}`\n  --> src/{}.rs:{}:{}",
                rng.pick(&["count", "path", "entry", "buf"]),
                krate,
                rng.below(900) + 1,
                rng.below(60) + 1
            ),
            3 => format!(
                "{:>6}→    let {} = {}::new();",
                rng.below(2000) + 1,
                rng.pick(&["config", "client", "state"]),
                rng.pick(&["Config", "Client", "State"])
            ),
            4 => format!(
                "-rw-r--r--  1 user user {:>8} Nov {:>2} 10:{:02} {}.rs",
                rng.below(90_000),
                rng.below(28) + 1,
                rng.below(60),
                krate
            ),
            5 => format!(
                "src/{krate}/mod.rs:{}:    // TODO: {}",
                rng.below(500) + 1,
                rng.pick(&[
                    "handle the error",
                    "remove once migrated",
                    "make configurable"
                ])
            ),
            6 => "    Finished `test` profile [unoptimized + debuginfo] target(s) in 12.34s".into(),
            _ => format!(
                "{}  {}",
                rng.uuid(),
                rng.pick(&["ok", "FAILED", "ignored", "skipped (no network)"])
            ),
        });
    }
    lines
}

impl Texts {
    fn new(dir: &Path, rng: &mut Rng) -> Result<Texts> {
        let mut prompts: Vec<String> = PROMPTS.iter().map(|p| token(p)).collect();
        let mut replies: Vec<String> = REPLIES.iter().map(|p| token(p)).collect();
        let mut thoughts: Vec<String> = THOUGHTS.iter().map(|p| token(p)).collect();
        let mut lines = synthetic_output_lines(rng);
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        names.sort();
        // The real texts too: prompts, replies, thoughts and tool output.
        for name in names {
            for line in std::fs::read_to_string(&name)?.lines() {
                let Ok(record) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let content = &record["message"]["content"];
                if record["type"] == "user" {
                    if let Some(text) = content.as_str() {
                        if !text.trim_start().starts_with('<') && record["isMeta"] != true {
                            prompts.push(token(text));
                        }
                    }
                }
                for block in content.as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("text") if record["type"] == "assistant" => {
                            if let Some(text) =
                                block["text"].as_str().filter(|t| t.trim().len() > 2)
                            {
                                replies.push(token(text));
                            }
                        }
                        Some("thinking") => {
                            if let Some(text) = block["thinking"].as_str() {
                                thoughts.push(token(text));
                            }
                        }
                        Some("tool_result") => {
                            let text = match &block["content"] {
                                Value::String(s) => s.clone(),
                                Value::Array(parts) => parts
                                    .iter()
                                    .filter_map(|p| p["text"].as_str())
                                    .collect::<Vec<_>>()
                                    .join("\n"),
                                _ => String::new(),
                            };
                            lines.extend(text.lines().map(str::to_string));
                        }
                        _ => {}
                    }
                }
            }
        }
        // About 1 MB of output lines in a seeded order.
        let mut output = String::new();
        let mut line_starts = Vec::new();
        while output.len() < 1 << 20 {
            let line = &lines[rng.below(lines.len())];
            let escaped = token(line);
            line_starts.push(output.len());
            output.push_str(&escaped[1..escaped.len() - 1]);
            output.push_str("\\n");
        }
        Ok(Texts {
            prompts,
            replies,
            thoughts,
            summaries: SUMMARIES.iter().map(|s| token(s)).collect(),
            output,
            line_starts,
        })
    }

    /// About `len` bytes of escaped output lines (whole lines), as a JSON string token.
    fn output(&self, rng: &mut Rng, len: usize, into: &mut Vec<u8>) {
        into.push(b'"');
        let mut written = 0;
        let mut line = rng.below(self.line_starts.len());
        while written < len {
            let start = self.line_starts[line];
            let end = self
                .line_starts
                .get(line + 1)
                .copied()
                .unwrap_or(self.output.len());
            into.extend_from_slice(&self.output.as_bytes()[start..end]);
            written += end - start;
            line = (line + 1) % self.line_starts.len();
        }
        into.push(b'"');
    }
}

/// Values of one session.
struct SessionValues {
    session: String,
    cwd: String,
    version: String,
    slug: String,
    branch: String,
    style: Style,
    /// Stop hooks configured (2.1.x): a `stop_hook_summary` ends every turn.
    hooks: bool,
}

/// One session file being rendered.
struct FileWriter<'a> {
    t: &'a Templates,
    texts: &'a Texts,
    s: &'a SessionValues,
    buf: Vec<u8>,
    /// Each timestamp's place in `buf` and its time after the session's start.
    stamps: Vec<(usize, u64)>,
    now_ms: u64,
    parent: Option<String>,
    /// The output length, prompt, etc. of the record being written.
    output_len: usize,
    prompt_uuid: String,
    message_id: String,
    tool_id: String,
    content: Vec<u8>,
    /// The `uuid` the next record takes, when it is not a fresh one.
    next_uuid: Option<String>,
}

/// How a record's own values are chosen.
#[derive(Clone, Copy)]
enum Pick {
    Prompt,
    Reply,
    Thought,
    Summary,
}

impl<'a> FileWriter<'a> {
    fn pool(&self, pick: Pick) -> &'a [String] {
        match pick {
            Pick::Prompt => &self.texts.prompts,
            Pick::Reply => &self.texts.replies,
            Pick::Thought => &self.texts.thoughts,
            Pick::Summary => &self.texts.summaries,
        }
    }

    /// Appends `template` as the next record (or content block, when `into_content`).
    fn put(&mut self, rng: &mut Rng, template: &Template, into_content: bool) {
        let mut out = if into_content {
            std::mem::take(&mut self.content)
        } else {
            std::mem::take(&mut self.buf)
        };
        let own_uuid = template
            .has(Var::Uuid)
            .then(|| self.next_uuid.take().unwrap_or_else(|| rng.uuid()));
        for piece in &template.pieces {
            match piece {
                Piece::Bytes(bytes) => out.extend_from_slice(bytes),
                Piece::Token(var) | Piece::Inline(var) => {
                    let quoted = matches!(piece, Piece::Token(_));
                    let text = |out: &mut Vec<u8>, raw: &str| {
                        if quoted {
                            out.push(b'"');
                        }
                        out.extend_from_slice(raw.as_bytes());
                        if quoted {
                            out.push(b'"');
                        }
                    };
                    match var {
                        Var::SessionId => text(&mut out, &self.s.session),
                        Var::Uuid => text(&mut out, own_uuid.as_deref().unwrap_or_default()),
                        Var::Parent => match &self.parent {
                            Some(parent) => text(&mut out, parent),
                            None if quoted => out.extend_from_slice(b"null"),
                            None => {}
                        },
                        Var::Timestamp => {
                            if quoted {
                                out.push(b'"');
                            }
                            self.stamps.push((out.len(), self.now_ms));
                            out.extend_from_slice(&[b'0'; TS_LEN]);
                            if quoted {
                                out.push(b'"');
                            }
                        }
                        Var::Cwd => text(&mut out, &self.s.cwd),
                        Var::Version => text(&mut out, &self.s.version),
                        Var::Slug => text(&mut out, &self.s.slug),
                        Var::GitBranch => text(&mut out, &self.s.branch),
                        Var::PromptUuid => text(&mut out, &self.prompt_uuid),
                        Var::MessageId => text(&mut out, &self.message_id),
                        Var::ToolId => text(&mut out, &self.tool_id),
                        Var::Prompt | Var::Text | Var::Thinking | Var::Summary => {
                            let pick = match var {
                                Var::Prompt => Pick::Prompt,
                                Var::Text => Pick::Reply,
                                Var::Thinking => Pick::Thought,
                                _ => Pick::Summary,
                            };
                            let pool = self.pool(pick);
                            let value = &pool[rng.below(pool.len())];
                            if quoted {
                                out.extend_from_slice(value.as_bytes());
                            } else {
                                out.extend_from_slice(&value.as_bytes()[1..value.len() - 1]);
                            }
                        }
                        Var::Output => {
                            let len = self.output_len;
                            if quoted {
                                self.texts.output(rng, len, &mut out);
                            } else {
                                let mut token = Vec::new();
                                self.texts.output(rng, len, &mut token);
                                out.extend_from_slice(&token[1..token.len() - 1]);
                            }
                        }
                        Var::Content => {
                            out.push(b'[');
                            out.extend_from_slice(&self.content);
                            out.push(b']');
                            self.content.clear();
                        }
                    }
                }
            }
        }
        if into_content {
            self.content = out;
        } else {
            out.push(b'\n');
            self.buf = out;
            // Only records that name a parent are links of the chain (not a snapshot, not
            // a summary).
            if template.has(Var::Parent) {
                self.parent = own_uuid;
            }
        }
    }

    fn block(&mut self, rng: &mut Rng, template: &Template) {
        if !self.content.is_empty() {
            self.content.push(b',');
        }
        self.put(rng, template, true);
    }

    /// Writes the content blocks gathered so far as one assistant record.
    fn assistant(&mut self, rng: &mut Rng) {
        let t = self.t;
        let template = rng_pick(rng, &t.assistants);
        self.put(rng, template, false);
    }

    fn thinking_block(&mut self, rng: &mut Rng) {
        let t = self.t;
        let template = rng_pick(rng, &t.thinking_blocks);
        self.block(rng, template);
    }

    fn text_block(&mut self, rng: &mut Rng) {
        let t = self.t;
        self.block(rng, &t.text_block);
    }

    fn progress(&mut self, rng: &mut Rng) {
        let t = self.t;
        let template = rng_pick(rng, &t.progress);
        self.put(rng, template, false);
    }

    fn wait(&mut self, rng: &mut Rng, low_ms: u64, high_ms: u64) {
        self.now_ms += rng.log_between(low_ms, high_ms);
    }

    fn prompt(&mut self, rng: &mut Rng) {
        let t = self.t;
        self.prompt_uuid = rng.uuid();
        if self.s.style != Style::V10 && rng.chance(0.7) {
            let template = rng_pick(rng, &t.snapshots);
            self.put(rng, template, false);
        }
        // The prompt's uuid is the one the snapshot named.
        self.next_uuid = Some(self.prompt_uuid.clone());
        let template = rng_pick(rng, &t.prompts);
        self.put(rng, template, false);
    }

    /// One tool call: (thinking, text,) tool_use, (progress,) tool_result with `output`
    /// bytes of output.
    fn tool_call(&mut self, rng: &mut Rng, output: usize) {
        let t = self.t;
        let (tool_use, result) = rng_pick(rng, &t.tools);
        self.tool_id = rng.api_id("toolu");
        self.message_id = rng.api_id("msg");
        self.wait(rng, 1500, 20_000);
        let preface = rng.chance(0.4);
        let think = rng.chance(0.25);
        match self.s.style {
            Style::V21 => {
                // One record per content block, as 2.1 writes them.
                if think {
                    self.thinking_block(rng);
                    self.assistant(rng);
                    self.wait(rng, 200, 3000);
                }
                if preface {
                    self.text_block(rng);
                    self.assistant(rng);
                    self.wait(rng, 100, 2000);
                }
                self.block(rng, tool_use);
                self.assistant(rng);
                if rng.chance(0.3) {
                    self.wait(rng, 50, 1000);
                    self.progress(rng);
                }
            }
            Style::V20 | Style::V10 => {
                // One record per API message.
                if think {
                    self.thinking_block(rng);
                }
                if preface {
                    self.text_block(rng);
                }
                self.block(rng, tool_use);
                self.assistant(rng);
            }
        }
        self.wait(rng, 100, 60_000);
        self.output_len = output;
        self.put(rng, result, false);
    }

    /// The final reply: (thinking,) text; `split` writes the thinking as its own record
    /// whatever the version.
    fn reply(&mut self, rng: &mut Rng, think: bool, split: bool) {
        self.message_id = rng.api_id("msg");
        self.wait(rng, 1500, 30_000);
        if think {
            self.thinking_block(rng);
            if split || self.s.style == Style::V21 {
                self.assistant(rng);
                self.wait(rng, 200, 5000);
            }
        }
        self.text_block(rng);
        self.assistant(rng);
    }

    /// The end records of a 2.1 turn: `turn_duration` after a long turn or without
    /// hooks, the Stop hooks' progress and `stop_hook_summary` with them.
    fn end(&mut self, rng: &mut Rng, turn_started_ms: u64) {
        let t = self.t;
        self.wait(rng, 20, 400);
        let long = self.now_ms - turn_started_ms > 30_000;
        if long || !self.s.hooks {
            self.put(rng, &t.turn_duration, false);
        }
        if self.s.hooks {
            self.tool_id = rng.uuid();
            self.progress(rng);
            self.wait(rng, 50, 2000);
            self.put(rng, &t.stop_hook_summary, false);
        }
    }

    /// One turn of about `budget` bytes; `ending` says how it ends.
    fn turn(&mut self, rng: &mut Rng, budget: usize, ending: Ending) {
        let start = self.buf.len();
        let started_ms = self.now_ms;
        self.prompt(rng);
        if ending == Ending::UnansweredPrompt {
            return;
        }
        // About what the final reply and the end records take, and a call without output.
        const TAIL: usize = 2000;
        const CALL: usize = 1800;
        while self.buf.len() - start + TAIL + CALL < budget {
            let room = budget - (self.buf.len() - start) - TAIL - CALL;
            // Half the room: most results carry their output twice (`toolUseResult`).
            let output = rng.log_between(80, 60_000).min(room as u64 / 2) as usize;
            self.tool_call(rng, output.max(20));
        }
        match ending {
            Ending::TextAfterThinking => self.reply(rng, true, true),
            _ => {
                let think = rng.chance(0.3);
                self.reply(rng, think, false);
                if self.s.style == Style::V21 {
                    self.end(rng, started_ms);
                }
            }
        }
    }

    /// The whole file, of about `target` bytes.
    fn session(&mut self, rng: &mut Rng, target: usize, ending: Ending) {
        let t = self.t;
        if rng.chance(0.25) {
            self.put(rng, &t.summary, false);
        }
        loop {
            let remaining = target.saturating_sub(self.buf.len());
            let budget = if remaining < 48 * 1024 {
                remaining
            } else {
                (rng.log_between(8 * 1024, 400 * 1024) as usize).min(remaining)
            };
            let last = budget + 3000 >= remaining;
            if last && ending == Ending::UnansweredPrompt {
                // A whole turn, then the prompt nothing answered.
                self.turn(rng, budget.saturating_sub(1500), Ending::Ended);
                self.wait(rng, 30_000, 3_600_000);
                self.turn(rng, 0, Ending::UnansweredPrompt);
                break;
            }
            self.turn(rng, budget, if last { ending } else { Ending::Ended });
            if last {
                break;
            }
            // The user reads, thinks, comes back.
            self.wait(rng, 20_000, 2 * 3_600_000);
        }
    }
}

fn rng_pick<'t, T>(rng: &mut Rng, items: &'t [T]) -> &'t T {
    &items[rng.below(items.len())]
}

/// Per-file sizes: log-normal, clamped to [5 KB, 3 MB], scaled so that they add up to
/// about `total`.
fn file_sizes(rng: &mut Rng, files: usize, total: u64) -> Vec<u64> {
    let raw: Vec<f64> = (0..files).map(|_| (1.3 * rng.normal()).exp()).collect();
    let total = total.clamp(files as u64 * MIN_FILE, files as u64 * MAX_FILE) as f64;
    let sum = |k: f64| -> f64 {
        raw.iter()
            .map(|r| (r * k).clamp(MIN_FILE as f64, MAX_FILE as f64))
            .sum()
    };
    let (mut low, mut high) = (0.0f64, MAX_FILE as f64 * 4.0);
    for _ in 0..100 {
        let mid = (low + high) / 2.0;
        if sum(mid) < total {
            low = mid;
        } else {
            high = mid;
        }
    }
    raw.iter()
        .map(|r| (r * high).clamp(MIN_FILE as f64, MAX_FILE as f64) as u64)
        .collect()
}

/// Writes `options.sessions` session files under `home/.claude/projects` (anything already
/// there is removed first) and the manifest beside `.claude`.
pub fn generate(home: &Path, options: &Options) -> Result<Corpus> {
    let projects_root = home.join(".claude/projects");
    let ours = home.join(MANIFEST).exists() || home.join(format!("{MANIFEST}.partial")).exists();
    if projects_root.exists() && !ours {
        // Someone's real history (a HOME given by mistake): never removed.
        bail!(
            "{} exists and was not written by this generator (no {MANIFEST} beside it)",
            projects_root.display()
        );
    }
    if projects_root.exists() {
        std::fs::remove_dir_all(&projects_root)?;
    }
    let _ = std::fs::remove_file(home.join(MANIFEST));
    std::fs::create_dir_all(&projects_root)?;
    let mut rng = Rng::new(options.seed);
    let dir = transcripts_dir();
    let templates = Templates::load(&dir)?;
    let texts = Texts::new(&dir, &mut rng)?;
    let sizes = file_sizes(&mut rng, options.sessions, options.bytes);
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let words = [
        "modular", "petting", "thompson", "quiet", "amber", "lucky", "brave", "river", "falcon",
        "copper", "gentle", "orbit", "maple", "sunny", "tidal", "velvet",
    ];
    for project in 0..PROJECTS {
        std::fs::create_dir_all(projects_root.join(format!("-home-user-proj-{project:02}")))?;
    }
    let mut manifest = std::io::BufWriter::new(std::fs::File::create(
        home.join(format!("{MANIFEST}.partial")),
    )?);
    writeln!(manifest, "{}", options.header())?;
    let mut sessions = Vec::with_capacity(options.sessions);
    for target in sizes {
        // Some projects are busier than others.
        let project = ((rng.unit() * rng.unit()) * PROJECTS as f64) as usize;
        let cwd = format!("/home/user/proj-{project:02}");
        let folder = cwd.replace('/', "-");
        let style_roll = rng.unit();
        let version = if style_roll < 0.80 {
            *rng.pick(&V21_VERSIONS)
        } else if style_roll < 0.92 {
            *rng.pick(&V20_VERSIONS)
        } else {
            *rng.pick(&V10_VERSIONS)
        };
        let ending_roll = rng.unit();
        let ending = if ending_roll < 0.05 {
            Ending::TextAfterThinking
        } else if ending_roll < 0.08 {
            Ending::UnansweredPrompt
        } else {
            Ending::Ended
        };
        let values = SessionValues {
            session: rng.uuid(),
            cwd: cwd.clone(),
            version: version.to_string(),
            slug: format!(
                "{}-{}-{}",
                rng.pick(&words),
                rng.pick(&words),
                rng.pick(&words)
            ),
            branch: rng
                .pick(&[
                    "main",
                    "main",
                    "master",
                    "fix-flaky-test",
                    "feature/pagination",
                ])
                .to_string(),
            style: Style::of(version),
            hooks: rng.chance(0.6),
        };
        let mut writer = FileWriter {
            t: &templates,
            texts: &texts,
            s: &values,
            buf: Vec::with_capacity(target as usize + 64 * 1024),
            stamps: Vec::new(),
            now_ms: 0,
            parent: None,
            output_len: 0,
            prompt_uuid: String::new(),
            message_id: String::new(),
            tool_id: String::new(),
            content: Vec::new(),
            next_uuid: None,
        };
        writer.session(&mut rng, target as usize, ending);
        // Last written 1–300 days ago; the last record a few seconds before that.
        let mtime_ms = now_ms - rng.between(86_400_000, 300 * 86_400_000);
        let start_ms = mtime_ms - writer.now_ms - rng.between(50, 5000);
        let mut buf = writer.buf;
        for (at, offset) in writer.stamps {
            buf[at..at + TS_LEN].copy_from_slice(iso_ms(start_ms + offset).as_bytes());
        }
        let path = projects_root
            .join(&folder)
            .join(format!("{}.jsonl", values.session));
        let mut file = std::fs::File::create(&path)?;
        file.write_all(&buf)?;
        file.set_modified(UNIX_EPOCH + Duration::from_millis(mtime_ms))?;
        writeln!(
            manifest,
            "{}\t{folder}\t{cwd}\t{version}\t{}\t{}",
            values.session,
            ending.as_str(),
            buf.len()
        )?;
        sessions.push(Session {
            id: values.session.clone(),
            path,
            cwd,
            version: version.to_string(),
            ending,
            bytes: buf.len() as u64,
        });
    }
    manifest.flush()?;
    drop(manifest);
    // Complete: only now does the manifest say the folder holds this corpus.
    std::fs::rename(
        home.join(format!("{MANIFEST}.partial")),
        home.join(MANIFEST),
    )?;
    Ok(Corpus {
        home: home.to_path_buf(),
        sessions,
    })
}

/// The corpus for `options` in `home`: the one already there if its manifest matches,
/// else a fresh one. Returns it and how long generating took (None when reused).
pub fn ensure(home: &Path, options: &Options) -> Result<(Corpus, Option<Duration>)> {
    if let Some(corpus) = Corpus::open(home, options)? {
        return Ok((corpus, None));
    }
    std::fs::create_dir_all(home)?;
    let start = Instant::now();
    let corpus = generate(home, options)?;
    Ok((corpus, Some(start.elapsed())))
}
