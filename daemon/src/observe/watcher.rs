//! Watches the chat stores' directories (notify, plus a slow periodic rescan as a safety net for missed events and full inotify tables), reads what changed incrementally, runs the pure parsers, infers quiet completions, and sends the observations to the daemon loop.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use koru_protocol::{ObservedEvent, ObserverStatus, StoreProblem, StoreProblemKind};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::follow::{Follower, ReadProblem};
use super::stores::Store;
use super::Observation;
use crate::app::DaemonEvent;
use crate::clock::{Clock, SystemClock};

/// Problems kept per root for `status` and doctor.
const PROBLEMS_KEPT: usize = 20;

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct ObserveConfig {
    /// Each store's roots (the registry's `locations`, expanded).
    pub roots: Vec<(Store, PathBuf)>,
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
    store: Store,
    root: PathBuf,
    follower: Box<dyn Follower>,
    last_change_ms: u64,
}

struct State {
    config: ObserveConfig,
    files: HashMap<PathBuf, Followed>,
    /// Files that could not be used at their last read, by path.
    problems: BTreeMap<PathBuf, (Store, PathBuf, StoreProblem)>,
    /// Roots notify refused to watch, with the reason.
    unwatched: HashMap<PathBuf, String>,
    watched: Vec<PathBuf>,
    last_health: Vec<ObserverStatus>,
    /// Files or problems changed since the health was last reported.
    health_changed: bool,
    events: mpsc::Sender<DaemonEvent>,
}

impl State {
    /// The store and root `path` is a session file of (after mapping a database's side
    /// files to the database), if any.
    fn store_of(&self, path: &Path) -> Option<(Store, PathBuf, PathBuf)> {
        self.config.roots.iter().find_map(|(store, root)| {
            let session = store.session_path(path);
            store
                .is_session_under(root, &session)
                .then(|| (*store, root.clone(), session))
        })
    }

    /// Reads what is new in `path` and forwards its observations; `replay` marks history
    /// read at start-up (applied to the chats table, not published as news).
    async fn follow(&mut self, path: &Path, replay: bool) {
        let Some((store, root, path)) = self.store_of(path) else {
            return;
        };
        let now = SystemClock.now_ms();
        if !self.files.contains_key(&path) {
            self.health_changed = true;
        }
        let followed = self.files.entry(path.clone()).or_insert_with(|| Followed {
            store,
            root: root.clone(),
            follower: store.follower(&path),
            last_change_ms: now,
        });
        let read = match followed.follower.read() {
            Ok(read) => read,
            Err(ReadProblem::Gone) => {
                self.files.remove(&path);
                self.problems.remove(&path);
                self.health_changed = true;
                return;
            }
            Err(problem) => {
                let kind = match &problem {
                    ReadProblem::Unreadable(_) => StoreProblemKind::Unreadable,
                    ReadProblem::Busy(_) => StoreProblemKind::Busy,
                    _ => StoreProblemKind::Malformed,
                };
                tracing::debug!(path = %path.display(), %problem, "cannot use a chat store file now");
                self.note_problem(store, root, &path, kind, problem.to_string());
                return;
            }
        };
        match read.malformed {
            None => {
                if self.problems.remove(&path).is_some() {
                    self.health_changed = true;
                }
            }
            Some(detail) => {
                tracing::debug!(path = %path.display(), %detail, "skipping malformed records");
                self.note_problem(store, root, &path, StoreProblemKind::Malformed, detail);
            }
        }
        if read.changed {
            if let Some(followed) = self.files.get_mut(&path) {
                followed.last_change_ms = now;
            }
        }
        self.forward(store, read.observations, replay).await;
    }

    fn note_problem(
        &mut self,
        store: Store,
        root: PathBuf,
        path: &Path,
        kind: StoreProblemKind,
        detail: String,
    ) {
        self.health_changed = true;
        self.problems.insert(
            path.to_path_buf(),
            (
                store,
                root,
                StoreProblem {
                    path: path.display().to_string(),
                    kind,
                    detail,
                },
            ),
        );
    }

    async fn forward(&mut self, store: Store, observations: Vec<Observation>, replay: bool) {
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

    /// Lists every root again, reading each session file (unchanged files cost a stat);
    /// unreadable directories are problems too.
    async fn rescan(&mut self, replay: bool) {
        let roots = self.config.roots.clone();
        for (store, root) in roots {
            for path in store.session_files(&root) {
                self.follow(&path, replay).await;
            }
        }
        // Files that disappeared without an event.
        self.files.retain(|path, _| path.exists());
        self.problems.retain(|path, _| path.exists());
        self.report_health().await;
    }

    async fn check_quiet(&mut self) {
        let now = SystemClock.now_ms();
        let quiet_ms = self.config.quiet.as_millis() as u64;
        let mut found = Vec::new();
        for followed in self.files.values_mut() {
            let observations = followed
                .follower
                .on_quiet(now, followed.last_change_ms, quiet_ms);
            if !observations.is_empty() {
                found.push((followed.store, observations));
            }
        }
        for (store, observations) in found {
            self.forward(store, observations, false).await;
        }
    }

    /// Each root's status, sent to the daemon loop when it changed.
    async fn report_health(&mut self) {
        self.health_changed = false;
        let health: Vec<ObserverStatus> = self
            .config
            .roots
            .iter()
            .map(|(store, root)| {
                let watch_error = self.unwatched.get(root).cloned();
                ObserverStatus {
                    store: store.id().to_string(),
                    root: root.display().to_string(),
                    exists: root.exists(),
                    watched: self.watched.contains(root),
                    watch_error,
                    files: self
                        .files
                        .values()
                        .filter(|f| f.store == *store && &f.root == root)
                        .count(),
                    problems: self
                        .problems
                        .values()
                        .filter(|(s, r, _)| s == store && r == root)
                        .map(|(_, _, p)| p.clone())
                        .take(PROBLEMS_KEPT)
                        .collect(),
                }
            })
            .collect();
        if health != self.last_health {
            self.last_health = health.clone();
            let _ = self
                .events
                .send(DaemonEvent::ObserverHealth { observers: health })
                .await;
        }
    }

    /// Watches the roots that exist and are not watched yet.
    fn arm(&mut self, watcher: &mut Option<notify::RecommendedWatcher>) {
        let Some(watcher) = watcher.as_mut() else {
            return;
        };
        for (store, root) in &self.config.roots {
            if self.watched.contains(root) || !root.is_dir() {
                continue;
            }
            let mode = if store.recursive() {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            match watcher.watch(root, mode) {
                Ok(()) => {
                    self.watched.push(root.clone());
                    self.unwatched.remove(root);
                }
                Err(error) => {
                    let reason = match &error.kind {
                        notify::ErrorKind::MaxFilesWatch => {
                            "the inotify watch limit (fs.inotify.max_user_watches) is reached"
                                .to_string()
                        }
                        _ => error.to_string(),
                    };
                    tracing::warn!(root = %root.display(), %reason,
                        "cannot watch a chat store; the periodic rescan still reads it");
                    // A recursive watch that failed half-way leaves some watches behind.
                    let _ = watcher.unwatch(root);
                    self.unwatched.insert(root.clone(), reason);
                }
            }
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
    let mut state = State {
        config,
        files: HashMap::new(),
        problems: BTreeMap::new(),
        unwatched: HashMap::new(),
        watched: Vec::new(),
        last_health: Vec::new(),
        health_changed: true,
        events,
    };
    if watcher.is_none() {
        for (_, root) in &state.config.roots {
            state
                .unwatched
                .insert(root.clone(), "change notifications are unavailable".into());
        }
    }
    state.arm(&mut watcher);
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
                if state.health_changed {
                    state.report_health().await;
                }
            }
            _ = rescan.tick() => {
                state.arm(&mut watcher);
                state.rescan(false).await;
            }
            _ = quiet.tick() => state.check_quiet().await,
        }
    }
}
