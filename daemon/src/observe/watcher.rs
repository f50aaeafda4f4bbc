//! Watches the chat stores' directories (notify, plus a slow periodic rescan as a safety net for missed events and full inotify tables), reads what changed incrementally, runs the pure parsers, infers quiet completions, and sends the observations to the daemon loop.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use koru_protocol::ObservedEvent;
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::claude_code::{self, ClaudeCodeParser};
use super::codex::{self, CodexParser};
use super::tail::JsonlTail;
use super::{LineParser, Observation};
use crate::app::DaemonEvent;
use crate::clock::{Clock, SystemClock};

/// The JSONL stores this watcher reads, and where their session files sit under a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonlStore {
    /// `<root>/<project>/<session>.jsonl`
    ClaudeCode,
    /// `<root>/YYYY/MM/DD/rollout-*.jsonl`
    Codex,
}

impl JsonlStore {
    pub const ALL: [JsonlStore; 2] = [JsonlStore::ClaudeCode, JsonlStore::Codex];

    /// The registry interface id.
    pub fn id(self) -> &'static str {
        match self {
            JsonlStore::ClaudeCode => claude_code::STORE,
            JsonlStore::Codex => codex::STORE,
        }
    }

    /// Directory levels between the root and a session file's folder.
    fn depth(self) -> usize {
        match self {
            JsonlStore::ClaudeCode => 1,
            JsonlStore::Codex => 3,
        }
    }

    fn is_session_name(self, name: &str) -> bool {
        name.ends_with(".jsonl")
            && match self {
                JsonlStore::ClaudeCode => true,
                JsonlStore::Codex => name.starts_with("rollout-"),
            }
    }

    fn parser(self, file_stem: &str) -> Box<dyn LineParser> {
        match self {
            JsonlStore::ClaudeCode => Box::new(ClaudeCodeParser::new(file_stem)),
            JsonlStore::Codex => Box::new(CodexParser::new(file_stem)),
        }
    }
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct ObserveConfig {
    /// Each store's roots (the registry's `locations`, expanded).
    pub roots: Vec<(JsonlStore, PathBuf)>,
    /// Quiet period after which a complete-looking reply is taken as finished (inferred).
    pub quiet: Duration,
    /// How often every root is listed again, whatever notify said.
    pub rescan: Duration,
}

impl Default for ObserveConfig {
    fn default() -> Self {
        ObserveConfig {
            roots: Vec::new(),
            quiet: Duration::from_secs(5),
            rescan: Duration::from_secs(10),
        }
    }
}

/// One session file being followed.
struct Followed {
    store: JsonlStore,
    tail: JsonlTail,
    parser: Box<dyn LineParser>,
    last_change_ms: u64,
    /// Malformed lines seen (reported in logs; never data).
    malformed: u64,
}

struct State {
    config: ObserveConfig,
    files: HashMap<PathBuf, Followed>,
    events: mpsc::Sender<DaemonEvent>,
}

/// The session files of `store` under `root`, at the store's depth.
fn session_files(store: JsonlStore, root: &Path) -> Vec<PathBuf> {
    let list = |dir: &PathBuf| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let mut dirs = vec![root.to_path_buf()];
    for _ in 0..store.depth() {
        dirs = dirs.iter().flat_map(list).filter(|p| p.is_dir()).collect();
    }
    let mut found: Vec<PathBuf> = dirs
        .iter()
        .flat_map(list)
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| store.is_session_name(n))
                && path.is_file()
        })
        .collect();
    found.sort();
    found
}

impl State {
    /// The store `path` is a session file of, if any.
    fn store_of(&self, path: &Path) -> Option<JsonlStore> {
        let name = path.file_name()?.to_str()?;
        self.config.roots.iter().find_map(|(store, root)| {
            let mut ancestor = path.parent();
            for _ in 0..store.depth() {
                ancestor = ancestor.and_then(Path::parent);
            }
            (ancestor == Some(root.as_path()) && store.is_session_name(name)).then_some(*store)
        })
    }

    /// Reads what is new in `path` and forwards its observations; `replay` marks history
    /// read at start-up (applied to the chats table, not published as news).
    async fn follow(&mut self, path: &Path, replay: bool) {
        let Some(store) = self.store_of(path) else {
            return;
        };
        let now = SystemClock.now_ms();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("unknown")
            .to_string();
        let followed = self
            .files
            .entry(path.to_path_buf())
            .or_insert_with(|| Followed {
                store,
                tail: JsonlTail::new(path),
                parser: store.parser(&stem),
                last_change_ms: now,
                malformed: 0,
            });
        let read = match followed.tail.read_new() {
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.files.remove(path);
                return;
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot read a chat store file");
                return;
            }
        };
        if read.restarted {
            tracing::debug!(path = %path.display(), "chat store file truncated or replaced; reading it again");
            followed.parser = store.parser(&stem);
        }
        if read.lines.is_empty() {
            return;
        }
        followed.last_change_ms = now;
        let mut observations = Vec::new();
        for line in &read.lines {
            match followed.parser.feed_line(line) {
                Ok(found) => observations.extend(found),
                Err(problem) => {
                    followed.malformed += 1;
                    tracing::debug!(path = %path.display(), %problem, "skipping a malformed line");
                }
            }
        }
        self.forward(store, observations, replay).await;
    }

    async fn forward(&self, store: JsonlStore, observations: Vec<Observation>, replay: bool) {
        if observations.is_empty() {
            return;
        }
        let seen_at_ms = SystemClock.now_ms();
        let events = observations
            .into_iter()
            .map(|o| ObservedEvent {
                store: store.id().to_string(),
                chat_id: o.chat_id,
                workspace: o.workspace,
                store_ts_ms: o.store_ts_ms,
                seen_at_ms,
                basis: o.basis,
                event: o.event,
            })
            .collect();
        let _ = self
            .events
            .send(DaemonEvent::Observed { events, replay })
            .await;
    }

    async fn rescan(&mut self, replay: bool) {
        let roots = self.config.roots.clone();
        for (store, root) in roots {
            for path in session_files(store, &root) {
                self.follow(&path, replay).await;
            }
        }
        // Files that disappeared without an event.
        self.files.retain(|path, _| path.exists());
    }

    async fn check_quiet(&mut self) {
        let now = SystemClock.now_ms();
        let quiet_ms = self.config.quiet.as_millis() as u64;
        let mut found = Vec::new();
        for followed in self.files.values_mut() {
            let observations = followed
                .parser
                .on_quiet(now, followed.last_change_ms, quiet_ms);
            if !observations.is_empty() {
                found.push((followed.store, observations));
            }
        }
        for (store, observations) in found {
            self.forward(store, observations, false).await;
        }
    }
}

/// Watches until `shutdown`.
pub async fn run(
    config: ObserveConfig,
    events: mpsc::Sender<DaemonEvent>,
    shutdown: CancellationToken,
) {
    let (changed_tx, mut changed_rx) = mpsc::unbounded_channel::<PathBuf>();
    let watcher = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        if let Ok(event) = result {
            // Our own reads open and close the files: access events would feed back.
            // A writer closing the file still counts (it may have written without a
            // modify event reaching us yet).
            use notify::event::{AccessKind, AccessMode, EventKind};
            if matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write))
            {
                return;
            }
            for path in event.paths {
                let _ = changed_tx.send(path);
            }
        }
    });
    let mut watcher = match watcher {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            tracing::warn!(%error, "cannot watch chat stores; relying on the periodic rescan");
            None
        }
    };
    let mut watched: Vec<PathBuf> = Vec::new();
    let mut state = State {
        config,
        files: HashMap::new(),
        events,
    };
    let mut arm = |watcher: &mut Option<notify::RecommendedWatcher>,
                   roots: &[(JsonlStore, PathBuf)]| {
        let Some(watcher) = watcher.as_mut() else {
            return;
        };
        for (_, root) in roots {
            if watched.contains(root) || !root.is_dir() {
                continue;
            }
            match watcher.watch(root, RecursiveMode::Recursive) {
                Ok(()) => watched.push(root.clone()),
                Err(error) => tracing::warn!(root = %root.display(), %error,
                    "cannot watch a chat store (inotify watch limit?); the periodic rescan still reads it"),
            }
        }
    };
    arm(&mut watcher, &state.config.roots);
    state.rescan(true).await;

    let mut rescan = tokio::time::interval(state.config.rescan);
    rescan.tick().await;
    let quiet_every =
        (state.config.quiet / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut quiet = tokio::time::interval(quiet_every);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(path) = changed_rx.recv() => {
                let mut paths = vec![path];
                while let Ok(more) = changed_rx.try_recv() {
                    if !paths.contains(&more) {
                        paths.push(more);
                    }
                }
                for path in paths {
                    state.follow(&path, false).await;
                }
            }
            _ = rescan.tick() => {
                let roots = state.config.roots.clone();
                arm(&mut watcher, &roots);
                state.rescan(false).await;
            }
            _ = quiet.tick() => state.check_quiet().await,
        }
    }
}
