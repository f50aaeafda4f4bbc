//! Watches the chat stores' directories (notify, plus a slow periodic rescan as a safety net for missed events and full inotify tables), reads what changed incrementally, runs the pure parsers, infers quiet completions, and sends the observations to the daemon loop. Besides the registry's roots it observes the folders plugin sessions announce, for as long as a session that announced them lasts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use koru_protocol::{ObservedEvent, ObserverStatus, StoreProblem, StoreProblemKind};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::announced::{self, AnnounceConfig, RootsChange};
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
    /// Which store roots a plugin session's announced `window.storage` maps to.
    pub announce: AnnounceConfig,
}

impl Default for ObserveConfig {
    fn default() -> Self {
        ObserveConfig {
            roots: Vec::new(),
            quiet: Duration::from_secs(5),
            rescan: Duration::from_secs(10),
            announce: AnnounceConfig::default(),
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

/// One store root being observed.
#[derive(Debug)]
struct Root {
    store: Store,
    path: PathBuf,
    /// A registry location (observed for the daemon's life), not only announced.
    registry: bool,
    /// The sessions that announced it (or a folder inside it that it covers).
    sessions: BTreeSet<String>,
    /// Known to be a directory the daemon's user owns. An announced root that did not
    /// exist when it was announced is checked when it appears; until then nothing under
    /// it is read.
    checked: bool,
    /// The folder of the window that announced it (when it has one folder): the
    /// workspace of a chat whose store does not name one.
    workspace: Option<String>,
}

struct State {
    config: ObserveConfig,
    roots: Vec<Root>,
    /// The daemon's user, who must own every announced folder.
    uid: u32,
    files: HashMap<PathBuf, Followed>,
    /// Files that could not be used at their last read, by path.
    problems: BTreeMap<PathBuf, (Store, PathBuf, StoreProblem)>,
    /// Roots notify refused to watch, with the reason.
    unwatched: HashMap<PathBuf, String>,
    /// Roots that hold a notify watch of their own.
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
        self.roots.iter().filter(|r| r.checked).find_map(|root| {
            let session = root.store.session_path(path);
            root.store
                .is_session_under(&root.path, &session)
                .then(|| (root.store, root.path.clone(), session))
        })
    }

    /// Whether change notifications reach `root`: its own watch, or the recursive watch
    /// of a root it lies inside (inotify keeps one watch per directory, so a second one
    /// would be the same watch, and removing it would blind the enclosing root).
    fn notified(&self, root: &Path) -> bool {
        self.watched.iter().any(|w| w == root) || self.enclosing_watch(root).is_some()
    }

    /// A recursively watched root that `path` lies strictly inside.
    fn enclosing_watch(&self, path: &Path) -> Option<&Root> {
        self.roots.iter().find(|r| {
            r.store.recursive()
                && r.path != path
                && path.starts_with(&r.path)
                && self.watched.contains(&r.path)
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
        let announced_workspace = self
            .roots
            .iter()
            .find(|r| r.path == root)
            .and_then(|r| r.workspace.clone());
        let followed = self.files.entry(path.clone()).or_insert_with(|| Followed {
            store,
            root: root.clone(),
            follower: store.follower(&path, announced_workspace),
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
        let roots: Vec<(Store, PathBuf)> = self
            .roots
            .iter()
            .filter(|r| r.checked)
            .map(|r| (r.store, r.path.clone()))
            .collect();
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
            .roots
            .iter()
            .map(|root| {
                let (store, path) = (root.store, &root.path);
                ObserverStatus {
                    store: store.id().to_string(),
                    root: path.display().to_string(),
                    exists: path.exists(),
                    watched: self.notified(path),
                    watch_error: self.unwatched.get(path).cloned(),
                    files: self
                        .files
                        .values()
                        .filter(|f| f.store == store && &f.root == path)
                        .count(),
                    problems: self
                        .problems
                        .values()
                        .filter(|(s, r, _)| *s == store && r == path)
                        .map(|(_, _, p)| p.clone())
                        .take(PROBLEMS_KEPT)
                        .collect(),
                    announced_by: root.sessions.iter().cloned().collect(),
                    announced: !root.registry,
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

    /// Checks the announced roots that appeared since they were announced (a root that
    /// is not a directory the daemon's user owns is dropped, with the reason logged).
    fn check_appeared(&mut self) {
        let uid = self.uid;
        self.roots.retain_mut(|root| {
            if root.checked || !root.path.exists() {
                return true;
            }
            match announced::check_folder(&root.path, uid) {
                Ok(()) => {
                    root.checked = true;
                    true
                }
                Err(reason) => {
                    tracing::warn!(root = %root.path.display(), sessions = ?root.sessions, %reason,
                        "not observing a folder a window announced");
                    false
                }
            }
        });
    }

    /// Watches the roots that exist and are not watched yet.
    fn arm(&mut self, watcher: &mut Option<notify::RecommendedWatcher>) {
        self.check_appeared();
        let Some(watcher) = watcher.as_mut() else {
            return;
        };
        let mut to_watch = Vec::new();
        for root in self.roots.iter().filter(|r| r.checked) {
            let path = &root.path;
            if self.notified(path) || !path.is_dir() {
                continue;
            }
            to_watch.push((root.store, path.clone()));
        }
        for (store, root) in &to_watch {
            // An enclosing root watched earlier in this pass covers it now.
            if self.notified(root) {
                continue;
            }
            let mode = if store.recursive() {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            match watcher.watch(root, mode) {
                Ok(()) => {
                    tracing::debug!(root = %root.display(), "watching a chat store");
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

impl State {
    /// Observes the chat-store folders of the window whose plugin session announced
    /// `storage`: each derived root is checked, joined to a root that already covers it
    /// (a registry location, or the same folder announced by another session), or added,
    /// watched and its history read as history (replay).
    async fn add_session(
        &mut self,
        session_id: &str,
        storage: &koru_protocol::WindowStorage,
        workspace: Option<String>,
        watcher: &mut Option<notify::RecommendedWatcher>,
    ) {
        let derived = announced::window_store_roots(storage, &self.config.announce, self.uid);
        for reason in &derived.refused {
            tracing::warn!(session_id, %reason, "not observing a folder the window announced");
        }
        let mut added = Vec::new();
        for (store, path) in derived.roots {
            let covering = self.roots.iter_mut().find(|root| {
                announced::covers(root.store, &announced::resolve(&root.path), store, &path)
            });
            if let Some(root) = covering {
                tracing::debug!(session_id, announced = %path.display(), root = %root.path.display(),
                    "an announced chat-store folder is already observed");
                root.sessions.insert(session_id.to_string());
                continue;
            }
            // Inside a recursively observed root, spell it as that root does: its watch
            // reports changes under that spelling.
            let path = self
                .roots
                .iter()
                .filter(|r| r.store.recursive())
                .find_map(|r| {
                    let resolved = announced::resolve(&r.path);
                    let rest = path.strip_prefix(&resolved).ok()?;
                    (!rest.as_os_str().is_empty()).then(|| r.path.join(rest))
                })
                .unwrap_or(path);
            tracing::info!(session_id, store = store.id(), root = %path.display(), "observing a chat-store folder the window announced");
            if watcher.is_none() {
                self.unwatched
                    .insert(path.clone(), "change notifications are unavailable".into());
            }
            self.roots.push(Root {
                store,
                checked: path.is_dir(),
                path: path.clone(),
                registry: false,
                sessions: BTreeSet::from([session_id.to_string()]),
                workspace: workspace.clone(),
            });
            added.push((store, path));
        }
        self.arm(watcher);
        for (store, root) in added {
            if !self.roots.iter().any(|r| r.path == root && r.checked) {
                continue;
            }
            for path in store.session_files(&root) {
                self.follow(&path, true).await;
            }
        }
        self.health_changed = true;
    }

    /// The session ended: roots only it announced are no longer observed (their watches
    /// removed, their files forgotten).
    fn remove_session(
        &mut self,
        session_id: &str,
        watcher: &mut Option<notify::RecommendedWatcher>,
    ) {
        let mut gone = Vec::new();
        for root in &mut self.roots {
            if root.sessions.remove(session_id) {
                self.health_changed = true;
                if !root.registry && root.sessions.is_empty() {
                    gone.push((root.store, root.path.clone()));
                }
            }
        }
        self.roots.retain(|r| r.registry || !r.sessions.is_empty());
        for (store, path) in gone {
            tracing::info!(session_id, store = store.id(), root = %path.display(), "no longer observing a chat-store folder: the session that announced it ended");
            let shared = self.roots.iter().any(|r| r.path == path);
            if let Some(position) = self.watched.iter().position(|w| *w == path) {
                // A watch an enclosing root shares (it was armed later) stays for that root.
                if !shared && self.enclosing_watch(&path).is_none() {
                    if let Some(watcher) = watcher.as_mut() {
                        let _ = watcher.unwatch(&path);
                    }
                }
                self.watched.remove(position);
            }
            self.unwatched.remove(&path);
            self.files
                .retain(|_, f| !(f.store == store && f.root == path));
            self.problems
                .retain(|_, (s, r, _)| !(*s == store && *r == path));
        }
    }
}

/// Watches until `shutdown`, adding and dropping the roots plugin sessions announce as
/// `announcements` says.
pub async fn run(
    config: ObserveConfig,
    events: mpsc::Sender<DaemonEvent>,
    mut announcements: mpsc::UnboundedReceiver<RootsChange>,
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
    let roots = config
        .roots
        .iter()
        .map(|(store, path)| Root {
            store: *store,
            path: path.clone(),
            registry: true,
            sessions: BTreeSet::new(),
            checked: true,
            workspace: None,
        })
        .collect();
    let mut state = State {
        config,
        roots,
        uid: nix::unistd::getuid().as_raw(),
        files: HashMap::new(),
        problems: BTreeMap::new(),
        unwatched: HashMap::new(),
        watched: Vec::new(),
        last_health: Vec::new(),
        health_changed: true,
        events,
    };
    if watcher.is_none() {
        for root in &state.roots {
            state.unwatched.insert(
                root.path.clone(),
                "change notifications are unavailable".into(),
            );
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
            Some(change) = announcements.recv() => {
                match change {
                    RootsChange::Add { session_id, storage, workspace } => {
                        state.add_session(&session_id, &storage, workspace, &mut watcher).await;
                    }
                    RootsChange::Remove { session_id } => {
                        state.remove_session(&session_id, &mut watcher);
                    }
                }
                if state.health_changed {
                    state.report_health().await;
                }
            }
            _ = quiet.tick() => state.check_quiet().await,
        }
    }
}
