//! The chat stores Koru observes: where each keeps its session files under a root (the registry's `locations`), how a path is recognised, and which follower reads it (with the workspace looked up from the store's own side files).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::follow::{
    ActivityFollower, CompressedLinesFollower, DocumentFollower, DocumentLog, FollowRead, Follower,
    LinesFollower, LogFollower, ReadProblem,
};
use super::snapshot::{ChatSnapshot, SnapshotDiffer};
use super::stores::{claude_code, cline, cline_sdk, codex, copilot, cursor, gemini};
use super::Observation;
use crate::observe::ParseError;

/// One store kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Store {
    /// `<root>/<project>/<session>.jsonl`
    ClaudeCode,
    /// `<root>/YYYY/MM/DD/rollout-*.jsonl`
    Codex,
    /// `<root = workspaceStorage>/<hash>/chatSessions/<session>.json|.jsonl`
    Copilot,
    /// `<root = workspaceStorage/<hash>/chatSessions>/<session>.json|.jsonl`: one window's
    /// Copilot chat sessions, the folder its plugin announced (same store, same files).
    CopilotWindow,
    /// `<root = globalStorage>/state.vscdb` (plus `-wal`, `-shm`)
    Cursor,
    /// `<root = workspaceStorage>/<hash>/state.vscdb`: Cursor's chat panel from before
    /// composers, per workspace
    CursorLegacy,
    /// `<root = globalStorage/<extension>/tasks>/<task>/ui_messages.json`
    Cline,
    /// `<root = ~/.cline/data/sessions>/<id>/<id>.json` (with `<id>.messages.json`)
    ClineSessions,
    /// `<root = ~/.gemini/tmp>/<project>/chats/session-*.json|.jsonl`
    Gemini,
    /// `<root>/<conversation>.pb` — encrypted: activity only
    Antigravity,
}

impl Store {
    /// The stores the registry gives locations for (`CopilotWindow` roots come only from
    /// plugin sessions' announcements).
    pub const ALL: [Store; 9] = [
        Store::ClaudeCode,
        Store::Codex,
        Store::Copilot,
        Store::Cursor,
        Store::CursorLegacy,
        Store::Cline,
        Store::ClineSessions,
        Store::Gemini,
        Store::Antigravity,
    ];

    /// Whether a session's whole state is in its one file, so that the file's identity,
    /// size and modification time unchanged mean nothing to read. Not so for SQLite
    /// (a write can land in the `-wal` file only), Cline (its task list is read with
    /// `ui_messages.json`) and Cline 4 (manifest and messages file).
    pub fn one_file(self) -> bool {
        matches!(
            self,
            Store::ClaudeCode
                | Store::Codex
                | Store::Copilot
                | Store::CopilotWindow
                | Store::Gemini
                | Store::Antigravity
        )
    }

    /// The registry interface id.
    pub fn id(self) -> &'static str {
        match self {
            Store::ClaudeCode => claude_code::STORE,
            Store::Codex => codex::STORE,
            Store::Copilot | Store::CopilotWindow => copilot::STORE,
            Store::Cursor => cursor::STORE,
            Store::CursorLegacy => cursor::LEGACY_STORE,
            Store::Cline => cline::STORE,
            Store::ClineSessions => cline_sdk::STORE,
            Store::Gemini => gemini::STORE,
            Store::Antigravity => ANTIGRAVITY_STORE,
        }
    }

    /// Directory levels between the root and a session file's folder.
    pub fn depth(self) -> usize {
        match self {
            Store::Cursor | Store::Antigravity | Store::CopilotWindow => 0,
            Store::ClaudeCode | Store::Cline | Store::ClineSessions | Store::CursorLegacy => 1,
            Store::Copilot | Store::Gemini => 2,
            Store::Codex => 3,
        }
    }

    /// Whether session files lie in folders below the root (a shallow store's root may be
    /// a busy directory, like an IDE's `globalStorage`, and is watched alone).
    pub fn recursive(self) -> bool {
        self.depth() > 0
    }

    /// Whether a folder `level`s below a root (0: the root itself) named `name` holds or
    /// leads to this store's session files: the folders a root's watches cover, and no
    /// others (an agent's own sub-folders beside its sessions, an extension's folders
    /// beside `chatSessions`, are none of the observers' business).
    pub fn leads_to_sessions(self, level: usize, name: &str) -> bool {
        match level.cmp(&self.depth()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Equal => level == 0 || self.folder_name().is_none_or(|f| f == name),
            std::cmp::Ordering::Greater => false,
        }
    }

    /// Whether the folder at `folder` is one that `root`'s watches cover
    /// ([`Store::leads_to_sessions`]).
    pub fn covers_folder(self, root: &Path, folder: &Path) -> bool {
        let Ok(rest) = folder.strip_prefix(root) else {
            return false;
        };
        let name = folder.file_name().and_then(|n| n.to_str()).unwrap_or("");
        self.leads_to_sessions(rest.components().count(), name)
    }

    /// The folders directly inside `dirs` that lead to session files, `level`s below the
    /// root.
    fn folders_in(self, dirs: &[PathBuf], level: usize) -> Vec<PathBuf> {
        dirs.iter()
            .flat_map(|dir| list_folder(dir))
            .filter(|listed| {
                listed.folder
                    && self.leads_to_sessions(
                        level,
                        listed
                            .path
                            .file_name()
                            .and_then(|n| n.to_str())
                            .unwrap_or(""),
                    )
            })
            .map(|listed| listed.path)
            .collect()
    }

    /// `folder` (inside `root`) and the folders below it that lead to session files, down
    /// to the store's depth: what must be watched for `root`'s notifications to reach every
    /// session file there (one inotify watch each). Empty when `root` does not cover
    /// `folder`.
    pub fn session_folders(self, root: &Path, folder: &Path) -> Vec<PathBuf> {
        let Ok(rest) = folder.strip_prefix(root) else {
            return Vec::new();
        };
        if !self.covers_folder(root, folder) {
            return Vec::new();
        }
        let mut found = vec![folder.to_path_buf()];
        let mut current = found.clone();
        for level in rest.components().count() + 1..=self.depth() {
            current = self.folders_in(&current, level);
            found.extend(current.iter().cloned());
        }
        found
    }

    /// The name the session file's folder must have, if any.
    fn folder_name(self) -> Option<&'static str> {
        match self {
            Store::Copilot | Store::CopilotWindow => Some("chatSessions"),
            Store::Gemini => Some("chats"),
            _ => None,
        }
    }

    /// Whether `name` is a session file's name.
    pub fn is_session_name(self, name: &str) -> bool {
        match self {
            Store::ClaudeCode => name.ends_with(".jsonl"),
            Store::Codex => {
                name.starts_with("rollout-")
                    && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
            }
            Store::Copilot | Store::CopilotWindow => {
                name.ends_with(".json") || name.ends_with(".jsonl")
            }
            Store::Cursor | Store::CursorLegacy => name == "state.vscdb",
            Store::Cline => name == "ui_messages.json",
            // The manifest; its messages file and compaction file sit beside it.
            Store::ClineSessions => {
                name.ends_with(".json")
                    && !name.ends_with(".messages.json")
                    && !name.ends_with(".compaction.json")
            }
            Store::Gemini => {
                name.starts_with("session-")
                    && (name.ends_with(".json") || name.ends_with(".jsonl"))
            }
            Store::Antigravity => name.ends_with(".pb"),
        }
    }

    /// The session file a changed path stands for (a SQLite database changes through its
    /// `-wal` and `-shm` files); most often `path` itself, borrowed.
    pub fn session_path(self, path: &Path) -> Cow<'_, Path> {
        if self == Store::ClineSessions {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                if let Some(id) = name.strip_suffix(".messages.json") {
                    return Cow::Owned(path.with_file_name(format!("{id}.json")));
                }
            }
        }
        if matches!(self, Store::Cursor | Store::CursorLegacy) {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                for suffix in ["-wal", "-shm", "-journal"] {
                    if let Some(db) = name.strip_suffix(suffix) {
                        return Cow::Owned(path.with_file_name(db));
                    }
                }
            }
        }
        Cow::Borrowed(path)
    }

    /// Whether `path` is a session file of this store under `root`.
    pub fn is_session_under(self, root: &Path, path: &Path) -> bool {
        let name = match name_at_depth(root, path, self.depth()) {
            // Spelled as the listings spell it: the root's bytes, then the store's
            // folders and the name (a heavy user's 10,000 files are checked at every
            // start; parsing their paths' components was 4 % of a restart).
            Some(Some(name)) => name,
            Some(None) => return false,
            None => return self.is_session_under_by_components(root, path),
        };
        if !self.is_session_name(name) {
            return false;
        }
        if self == Store::ClineSessions || self.folder_name().is_some() {
            return self.is_session_under_by_components(root, path);
        }
        !self.has_plain_twin(path)
    }

    /// [`Store::is_session_under`] for any spelling of the paths, component by component.
    fn is_session_under_by_components(self, root: &Path, path: &Path) -> bool {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        if !self.is_session_name(name) {
            return false;
        }
        if self == Store::ClineSessions
            && path
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                != name.strip_suffix(".json")
        {
            return false;
        }
        if let Some(folder) = self.folder_name() {
            if path
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                != Some(folder)
            {
                return false;
            }
        }
        let mut ancestor = path.parent();
        for _ in 0..self.depth() {
            ancestor = ancestor.and_then(Path::parent);
        }
        ancestor == Some(root) && !self.has_plain_twin(path)
    }

    /// A compressed Codex rollout whose plain `.jsonl` also exists: the plain one is read
    /// (Codex prefers it too).
    fn has_plain_twin(self, path: &Path) -> bool {
        self == Store::Codex
            && path.extension().and_then(|e| e.to_str()) == Some("zst")
            && path.with_extension("").exists()
    }

    /// The session files under `root`.
    pub fn session_files(self, root: &Path) -> Vec<PathBuf> {
        self.session_files_in(root, root)
    }

    /// The session files of `root` that lie in `folder` (the root itself, or a folder
    /// inside it that just appeared); none when `folder` is not inside `root` or lies
    /// deeper than the store's session files.
    pub fn session_files_in(self, root: &Path, folder: &Path) -> Vec<PathBuf> {
        self.stamped_session_files_in(root, folder)
            .into_iter()
            .map(|(path, _)| path)
            .collect()
    }

    /// [`Store::session_files_in`], each file with its [`Stamp`] as the listing found it
    /// (`None` when it could not be read): taken relative to the folder the listing holds
    /// open, one name looked up instead of the whole path walked again.
    pub fn stamped_session_files_in(
        self,
        root: &Path,
        folder: &Path,
    ) -> Vec<(PathBuf, Option<Stamp>)> {
        let Ok(rest) = folder.strip_prefix(root) else {
            return Vec::new();
        };
        let level = rest.components().count();
        if level > self.depth() {
            return Vec::new();
        }
        let mut dirs = vec![folder.to_path_buf()];
        for level in level + 1..=self.depth() {
            dirs = self.folders_in(&dirs, level);
        }
        // The same order every time: folders by their bytes, then each folder's files by
        // their names' bytes (sorting 10,000 whole paths compared their long common
        // prefix again and again).
        dirs.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
        let mut found: Vec<(PathBuf, Option<Stamp>)> = Vec::new();
        for dir in &dirs {
            let start = found.len();
            found.extend(
                list_folder(dir)
                    .into_iter()
                    .filter(|listed| !listed.folder && self.is_session_under(root, &listed.path))
                    .map(|listed| {
                        let stamp = match (&listed.target, &listed.entry) {
                            // A symbolic link: what it points to.
                            (Some(target), _) => Some(Stamp::from_meta(target)),
                            (None, Some(entry)) => {
                                entry.metadata().ok().map(|m| Stamp::from_meta(&m))
                            }
                            (None, None) => None,
                        };
                        (listed.path, stamp)
                    }),
            );
            found[start..].sort_unstable_by(|a, b| {
                // Joined to the same folder: the names tell them apart.
                let (a, b) = (
                    a.0.as_os_str().as_encoded_bytes(),
                    b.0.as_os_str().as_encoded_bytes(),
                );
                let common = a.len().min(b.len()).min(dir.as_os_str().len());
                a[common..].cmp(&b[common..])
            });
        }
        found
    }

    /// A follower for the session file at `path`. `announced_workspace` is the folder of the
    /// window that announced the file's root: a VS Code chat's workspace when no
    /// `workspace.json` names it (code-server writes none).
    pub fn follower(self, path: &Path, announced_workspace: Option<String>) -> Box<dyn Follower> {
        let stem = file_stem(path);
        let jsonl = path.extension().and_then(|e| e.to_str()) == Some("jsonl");
        match self {
            Store::ClaudeCode => {
                let stem = stem.clone();
                Box::new(LinesFollower::new(
                    path,
                    Box::new(move || Box::new(claude_code::ClaudeCodeParser::new(&stem))),
                ))
            }
            Store::Codex if path.extension().and_then(|e| e.to_str()) == Some("zst") => {
                let stem = stem.trim_end_matches(".jsonl").to_string();
                Box::new(CompressedLinesFollower::new(
                    path,
                    Box::new(move || Box::new(codex::CodexParser::new(&stem))),
                ))
            }
            Store::Codex => Box::new(LinesFollower::new(
                path,
                Box::new(move || Box::new(codex::CodexParser::new(&stem))),
            )),
            Store::Copilot | Store::CopilotWindow => {
                // workspaceStorage/<hash>/chatSessions/<file>, whichever folder is the root
                let workspace =
                    side_file_workspace(path, "workspace.json", copilot::workspace_from_json)
                        .or(announced_workspace);
                log_or_document(
                    path,
                    jsonl,
                    stem,
                    workspace,
                    Box::new(copilot::MutationLog::new()),
                    copilot::parse_session_json,
                )
            }
            Store::Cursor => Box::new(CursorFollower::new(path, None, None)),
            Store::CursorLegacy => {
                // <User>/workspaceStorage/<hash>/state.vscdb beside workspace.json; the
                // global database is <User>/globalStorage/state.vscdb.
                let workspace = path
                    .parent()
                    .and_then(|dir| std::fs::read(dir.join("workspace.json")).ok())
                    .and_then(|bytes| copilot::workspace_from_json(&bytes));
                let global = path
                    .ancestors()
                    .nth(3)
                    .map(|user| user.join("globalStorage").join("state.vscdb"));
                Box::new(CursorFollower::new(path, workspace, global))
            }
            Store::Cline => {
                // <extension>/tasks/<task>/ui_messages.json
                let task_dir = path.parent().unwrap_or(path).to_path_buf();
                let task = file_name(&task_dir);
                // Cline writes a new task's ui_messages.json before its taskHistory.json
                // entry: looked up again at each read until found.
                let workspace = std::sync::Mutex::new(cline_workspace(&task_dir, &task));
                Box::new(DocumentFollower::new(
                    path,
                    Box::new(move |bytes| {
                        let mut workspace = workspace
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner());
                        if workspace.is_none() {
                            *workspace = cline_workspace(&task_dir, &task);
                        }
                        cline::parse_ui_messages(bytes, &task, workspace.as_deref())
                    }),
                ))
            }
            Store::ClineSessions => {
                let messages = path.with_file_name(format!("{stem}.messages.json"));
                Box::new(DocumentFollower::with_companion(
                    path,
                    &messages,
                    Box::new(move |manifest, messages| {
                        cline_sdk::parse_session(manifest, messages, &stem)
                    }),
                ))
            }
            Store::Gemini => {
                // tmp/<project>/chats/<file>; the project's root is in `.project_root`.
                let workspace =
                    side_file_workspace(path, ".project_root", gemini::workspace_from_project_root);
                log_or_document(
                    path,
                    jsonl,
                    stem,
                    workspace,
                    Box::new(gemini::GeminiLog::new()),
                    gemini::parse_session_json,
                )
            }
            Store::Antigravity => Box::new(ActivityFollower::new(path, &stem, None)),
        }
    }
}

/// The registry interface id of Antigravity's conversation files.
pub const ANTIGRAVITY_STORE: &str = "chat_history_antigravity_pb_readonly";

/// The workspace named by the side file `name` in the folder above the session file's
/// folder (Copilot's `workspace.json`, Gemini CLI's `.project_root`).
fn side_file_workspace(
    path: &Path,
    name: &str,
    read: fn(&[u8]) -> Option<String>,
) -> Option<String> {
    let dir = path.parent()?.parent()?;
    read(&std::fs::read(dir.join(name)).ok()?)
}

/// A store's reader of a whole session file: bytes, the fallback chat id, the workspace.
type ParseSession = fn(&[u8], &str, Option<&str>) -> Result<ChatSnapshot, ParseError>;

/// A store that has written both forms: a `.jsonl` log replayed into the document, or
/// the whole `.json` document re-read.
fn log_or_document(
    path: &Path,
    jsonl: bool,
    stem: String,
    workspace: Option<String>,
    log: Box<dyn DocumentLog>,
    parse: ParseSession,
) -> Box<dyn Follower> {
    if jsonl {
        Box::new(LogFollower::new(path, log, stem, workspace))
    } else {
        Box::new(DocumentFollower::new(
            path,
            Box::new(move |bytes| parse(bytes, &stem, workspace.as_deref())),
        ))
    }
}

/// The entries of `dir`, each with whether it is a folder, from the listing's own type
/// field (no `stat` per file: a root holds thousands); a link is followed. Neither a file
/// nor a folder (a socket, a device): left out, never a session file.
/// One entry of a folder: a file or a folder (symbolic links followed; anything else is
/// left out).
struct Listed {
    path: PathBuf,
    folder: bool,
    /// The entry, for a `stat` relative to the open folder (not for a symbolic link).
    entry: Option<std::fs::DirEntry>,
    /// What a symbolic link points to.
    target: Option<std::fs::Metadata>,
}

fn list_folder(dir: &Path) -> Vec<Listed> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| {
                    let path = entry.path();
                    match entry.file_type().ok()? {
                        kind if kind.is_symlink() => {
                            let target = std::fs::metadata(&path).ok()?;
                            if !target.is_dir() && !target.is_file() {
                                return None;
                            }
                            Some(Listed {
                                path,
                                folder: target.is_dir(),
                                entry: None,
                                target: Some(target),
                            })
                        }
                        kind if kind.is_dir() || kind.is_file() => Some(Listed {
                            path,
                            folder: kind.is_dir(),
                            entry: Some(entry),
                            target: None,
                        }),
                        _ => None,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The file name of `path` when `path` is `root`'s bytes, a `/` (unless `root` ends with
/// one) and `depth + 1` names that are neither empty nor start with a dot, separated by
/// single `/`s: `Some(Some(name))`, or `Some(None)` when that name is not UTF-8 (never a
/// session file's name). `None` for any other spelling (a `.` or `..` among them, a
/// doubled `/`, a hidden file's name), which a comparison of components judges (`root`
/// itself must be plain too: not empty, no `.` or `..` at its end).
fn name_at_depth<'p>(root: &Path, path: &'p Path, depth: usize) -> Option<Option<&'p str>> {
    let root = root.as_os_str().as_encoded_bytes();
    let bytes = path.as_os_str().as_encoded_bytes();
    let last_of_root = root.rsplit(|b| *b == b'/').next()?;
    if root.is_empty() || last_of_root == b"." || last_of_root == b".." {
        return None;
    }
    let rest = bytes.strip_prefix(root)?;
    let rest = if root.ends_with(b"/") {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    // From the back: the name, then `depth` folders, each looked for once (one pass over
    // the bytes); the root's bytes must be reached with the last of them.
    let mut end = rest.len();
    let mut name = None;
    for part in 0..=depth {
        let start = rest[..end]
            .iter()
            .rposition(|byte| *byte == b'/')
            .map_or(0, |at| at + 1);
        let piece = &rest[start..end];
        if matches!(piece.first(), None | Some(b'.')) || (start == 0) != (part == depth) {
            return None;
        }
        name.get_or_insert(piece);
        end = start.saturating_sub(1);
    }
    Some(std::str::from_utf8(name?).ok())
}

/// A file's identity, size and modification time: a file found with the same stamp has
/// not been written since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
}

impl Stamp {
    /// The stamp of the file at `path` (symbolic links followed).
    pub fn of(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path)
            .ok()
            .map(|meta| Stamp::from_meta(&meta))
    }

    pub fn from_meta(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }

    pub fn mtime_ms(&self) -> u64 {
        u64::try_from(self.mtime_ns / 1_000_000).unwrap_or(0)
    }
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("unknown")
        .to_string()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("unknown")
        .to_string()
}

/// A Cline-family task's workspace: Roo's `history_item.json` beside it, else Cline's
/// `state/taskHistory.json` in the extension's folder.
fn cline_workspace(task_dir: &Path, task: &str) -> Option<String> {
    if let Some(found) = std::fs::read(task_dir.join("history_item.json"))
        .ok()
        .and_then(|bytes| cline::workspace_from_history_item(&bytes))
    {
        return Some(found);
    }
    let extension_dir = task_dir.parent()?.parent()?;
    let bytes = std::fs::read(extension_dir.join("state").join("taskHistory.json")).ok()?;
    cline::workspace_from_task_history(&bytes, task)
}

impl DocumentLog for copilot::MutationLog {
    fn reset(&mut self) {
        copilot::MutationLog::reset(self);
    }
    fn apply_line(&mut self, line: &[u8]) -> Result<(), ParseError> {
        copilot::MutationLog::apply_line(self, line)
    }
    fn snapshot(&self, fallback_chat_id: &str, workspace: Option<&str>) -> Option<ChatSnapshot> {
        copilot::MutationLog::snapshot(self, fallback_chat_id, workspace)
    }
}

impl DocumentLog for gemini::GeminiLog {
    fn reset(&mut self) {
        gemini::GeminiLog::reset(self);
    }
    fn apply_line(&mut self, line: &[u8]) -> Result<(), ParseError> {
        gemini::GeminiLog::apply_line(self, line)
    }
    fn snapshot(&self, fallback_chat_id: &str, workspace: Option<&str>) -> Option<ChatSnapshot> {
        gemini::GeminiLog::snapshot(self, fallback_chat_id, workspace)
    }
}

/// Cursor's database: the composers that changed, each diffed against its last snapshot.
/// The connection is opened on first use and again after an error.
struct CursorFollower {
    path: PathBuf,
    workspace: Option<String>,
    /// The global database, for a per-workspace one.
    global: Option<PathBuf>,
    db: Option<cursor::CursorDb>,
    differs: HashMap<String, SnapshotDiffer>,
}

impl CursorFollower {
    fn new(path: &Path, workspace: Option<String>, global: Option<PathBuf>) -> Self {
        CursorFollower {
            path: path.to_path_buf(),
            workspace,
            global,
            db: None,
            differs: HashMap::new(),
        }
    }
}

impl Follower for CursorFollower {
    fn read(&mut self) -> Result<FollowRead, ReadProblem> {
        if !self.path.exists() {
            return Err(ReadProblem::Gone);
        }
        if self.db.is_none() {
            self.db = Some(
                cursor::CursorDb::open(&self.path)
                    .map_err(cursor_problem)?
                    .with_workspace(self.workspace.clone())
                    .with_global(self.global.clone()),
            );
        }
        let Some(db) = self.db.as_mut() else {
            return Ok(FollowRead::default());
        };
        let chats = match db.changed_chats() {
            Ok(chats) => chats,
            Err(error) => {
                if !error.is_retryable() {
                    self.db = None;
                }
                return Err(cursor_problem(error));
            }
        };
        let mut out = FollowRead {
            changed: !chats.is_empty(),
            ..FollowRead::default()
        };
        for chat in chats {
            let differ = self.differs.entry(chat.chat_id.clone()).or_default();
            out.observations.extend(differ.update(&chat));
        }
        Ok(out)
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        self.differs
            .values_mut()
            .flat_map(|d| d.on_quiet(now_ms, last_change_ms, quiet_ms))
            .collect()
    }
}

fn cursor_problem(error: cursor::CursorError) -> ReadProblem {
    if error.is_retryable() {
        ReadProblem::Busy(error.to_string())
    } else {
        ReadProblem::Malformed(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_inside_a_root_lists_only_its_own_session_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for day in ["2026/11/24", "2026/11/25"] {
            std::fs::create_dir_all(root.join(day)).unwrap();
            std::fs::write(root.join(day).join("rollout-a.jsonl"), "").unwrap();
        }
        let month = root.join("2026/11");
        let mut found = Store::Codex.session_files_in(root, &month);
        found.sort();
        assert_eq!(
            found,
            [
                root.join("2026/11/24/rollout-a.jsonl"),
                root.join("2026/11/25/rollout-a.jsonl")
            ]
        );
        let day = root.join("2026/11/25");
        assert_eq!(
            Store::Codex.session_files_in(root, &day),
            [day.join("rollout-a.jsonl")]
        );
        assert_eq!(Store::Codex.session_files_in(root, root).len(), 2);
        // Deeper than the store's files, or outside the root: nothing.
        std::fs::create_dir_all(day.join("deeper")).unwrap();
        std::fs::write(day.join("deeper/rollout-b.jsonl"), "").unwrap();
        assert!(Store::Codex
            .session_files_in(root, &day.join("deeper"))
            .is_empty());
        assert!(Store::Codex
            .session_files_in(root, Path::new("/elsewhere"))
            .is_empty());
    }

    #[test]
    fn a_path_is_judged_by_its_bytes_as_by_its_components() {
        let roots = [
            "/r", "/r/", "/r//x", "/r/./x", "r", "/", "/r/.", "/r/x/..", "/r/x/../",
        ];
        let tails = [
            "p/a.jsonl",
            "a.jsonl",
            "p/q/a.jsonl",
            "./p/a.jsonl",
            "p/./a.jsonl",
            "p//a.jsonl",
            "p/../a.jsonl",
            "p/a.jsonl/",
            "p/a.jsonl/.",
            ".p/a.jsonl",
            "p/.a.jsonl",
            "p/..a.jsonl",
            "p/a/",
            "2026/03/01/rollout-x.jsonl",
            "h1/chatSessions/s.json",
            "chatSessions/s.json",
            "s1/s1.json",
            "proj/chats/session-1.json",
            "state.vscdb",
            "t/ui_messages.json",
            "x.pb",
        ];
        let stores = Store::ALL.iter().copied().chain([Store::CopilotWindow]);
        for store in stores {
            for root in roots {
                for tail in tails {
                    for joiner in ["/", "//", ""] {
                        let path = format!("{root}{joiner}{tail}");
                        let (root, path) = (Path::new(root), Path::new(&path));
                        assert_eq!(
                            store.is_session_under(root, path),
                            store.is_session_under_by_components(root, path),
                            "{store:?} {root:?} {path:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn each_store_recognises_its_session_files_and_only_those() {
        let root = Path::new("/r");
        let yes = [
            (Store::ClaudeCode, "/r/-home-u-p/abc.jsonl"),
            (
                Store::Codex,
                "/r/2026/03/01/rollout-2026-03-01T10-00-00-x.jsonl",
            ),
            (Store::Copilot, "/r/h1/chatSessions/s1.jsonl"),
            (Store::Copilot, "/r/h1/chatSessions/s1.json"),
            (Store::Cursor, "/r/state.vscdb"),
            (Store::CursorLegacy, "/r/9f2c/state.vscdb"),
            (Store::Cline, "/r/1767000000000/ui_messages.json"),
            (Store::ClineSessions, "/r/sess_1/sess_1.json"),
            (
                Store::Gemini,
                "/r/proj/chats/session-2026-05-01T09-00-abc.jsonl",
            ),
            (Store::Antigravity, "/r/0a1b.pb"),
        ];
        for (store, path) in yes {
            assert!(
                store.is_session_under(root, Path::new(path)),
                "{store:?} {path}"
            );
        }
        let no = [
            (Store::ClaudeCode, "/r/abc.jsonl"),
            (Store::Codex, "/r/2026/03/01/other.jsonl"),
            (Store::Copilot, "/r/h1/other/s1.json"),
            (Store::Copilot, "/r/h1/workspace.json"),
            (Store::Cursor, "/r/sub/state.vscdb"),
            (Store::CursorLegacy, "/r/state.vscdb"),
            (Store::Cline, "/r/t/api_conversation_history.json"),
            (Store::ClineSessions, "/r/sess_1/sess_1.messages.json"),
            (Store::ClineSessions, "/r/sess_1/agent_2.json"),
            (Store::ClineSessions, "/r/sessions.index.json"),
            (Store::Gemini, "/r/proj/logs.json"),
            (Store::Antigravity, "/r/sub/x.pb"),
        ];
        for (store, path) in no {
            assert!(
                !store.is_session_under(root, Path::new(path)),
                "{store:?} {path}"
            );
        }
        // One window's announced chatSessions folder is itself the root.
        let chat_sessions = Path::new("/u/workspaceStorage/h1/chatSessions");
        for (path, yes) in [
            ("/u/workspaceStorage/h1/chatSessions/s1.jsonl", true),
            ("/u/workspaceStorage/h1/chatSessions/s1.json", true),
            ("/u/workspaceStorage/h1/chatSessions/sub/s1.json", false),
            ("/u/workspaceStorage/h1/workspace.json", false),
        ] {
            assert_eq!(
                Store::CopilotWindow.is_session_under(chat_sessions, Path::new(path)),
                yes,
                "{path}"
            );
        }
        assert!(!Store::CopilotWindow.is_session_under(root, Path::new("/r/s1.json")));
        assert_eq!(Store::CopilotWindow.id(), Store::Copilot.id());
        assert!(!Store::ALL.contains(&Store::CopilotWindow));
        assert_eq!(
            Store::Cursor.session_path(Path::new("/r/state.vscdb-wal")),
            Path::new("/r/state.vscdb")
        );
        assert_eq!(
            Store::ClineSessions.session_path(Path::new("/r/s1/s1.messages.json")),
            Path::new("/r/s1/s1.json")
        );
    }
}
