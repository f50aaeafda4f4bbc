//! Watches the chat stores' directories (notify; a rescan only when the kernel says events were lost), reads what changed incrementally, runs the pure parsers, infers quiet completions, and sends the observations to the daemon loop. Roots follow the machine: a missing root is waited for through its nearest existing folder and read the moment it appears; a root deleted, replaced or re-pointed through a symbolic link is picked up again by itself; a root the inotify limits refuse is polled. Besides the registry's roots it observes the folders plugin sessions announce, for as long as a session that announced them lasts.
//!
//! Idle cost does not grow with history: while nothing changes, only the roots are
//! checked (one `stat` each, every second) and only files with a turn still open are
//! looked at when time passes. A restart trusts the per-file summary cache
//! (`summary_cache`) for files whose identity and size did not change and reads only what
//! was appended to the others.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use koru_protocol::{
    ChatInfo, ObservedEvent, ObserverMode, ObserverStatus, PollCost, StoreProblem, StoreProblemKind,
};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::announced::{self, AnnounceConfig, RootsChange};
use super::follow::{Follower, ReadProblem};
use super::locations::{Stamp, Store};
use super::summary_cache::{self, CacheEntry, CachedFile, EntryBody, KeptText};
use super::{Observation, PathMap, PathSet};
use crate::appear_watch::AppearWatch;
use crate::clock::{Clock, SystemClock};

/// What the watcher reports to the daemon loop (which turns it into its own event; this
/// room does not know that event).
#[derive(Debug)]
pub enum ObserverReport {
    /// Observations; `replay` marks history (applied to the chats table, not published).
    Observed {
        events: Vec<ObservedEvent>,
        replay: bool,
        /// The file (or database) they were read from: where the chats can be read back.
        source: PathBuf,
    },
    /// The roots' status changed (watches, files, problems).
    Health { observers: Vec<ObserverStatus> },
    /// The chats of files the summary cache vouched for, as they stood when the daemon
    /// last read each (history: applied to the chats table, not published); many files
    /// to a report, each with its chats (the rows the cache held, handed over: a dormant
    /// file keeps them only in the cache file).
    Restored {
        files: Vec<(Arc<Path>, Vec<ChatInfo>)>,
        /// Files the cache holds entries for that are not restored yet: room the chats
        /// table makes for them at once rather than growing report by report.
        more: usize,
    },
}

/// What the change-notification thread tells the watcher.
#[derive(Debug)]
enum Notice {
    /// Something changed at this path.
    Changed(PathBuf),
    /// The kernel dropped notifications (its queue overflowed): list everything again.
    LostEvents,
}

/// Files restored from the summary cache reported to the daemon loop at a time (one
/// message, one wake-up of the loop, for that many files).
const RESTORED_PER_REPORT: usize = 512;

/// Problems kept per root for `status` and doctor.
const PROBLEMS_KEPT: usize = 20;

/// How often every root is checked (one `stat` each): a missing one that appeared, a
/// watched one deleted, replaced or re-pointed through a symbolic link. Change
/// notifications usually tell first; this is the safety net.
const ROOT_CHECK_EVERY: Duration = Duration::from_secs(1);

/// How often, at most, a root that exists but cannot be watched is read again.
const POLL_EVERY: Duration = Duration::from_secs(2);

/// Polling may take at most this share of a core: passes are spaced by
/// `1 / POLL_DUTY_MAX` times what the last one took.
const POLL_DUTY_MAX: f64 = 0.001;

/// How often the summary cache is written while something changed.
const CACHE_SAVE_EVERY: Duration = Duration::from_secs(60);

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
    /// When the daemon started (before its socket accepted anyone): files last written
    /// before it are history. `None`: when the watcher starts.
    pub started_ms: Option<u64>,
    /// The per-file summary cache (`None`: none, every start reads the history again).
    pub cache: Option<PathBuf>,
}

impl Default for ObserveConfig {
    fn default() -> Self {
        ObserveConfig {
            roots: Vec::new(),
            quiet: Duration::from_secs(5),
            rescan: Duration::from_secs(10),
            announce: AnnounceConfig::default(),
            started_ms: None,
            cache: None,
        }
    }
}

/// One session file being followed.
struct Followed {
    store: Store,
    /// Its root's path (shared with the root: one copy, not one per file).
    root: Arc<Path>,
    follower: Held,
    /// The file's last change: its mtime while it is history, then when a change was read.
    last_change_ms: u64,
    /// Everything read so far was written before the daemon could know it: what the
    /// quiet period concludes from it is history too, never news.
    history: bool,
    /// The file as it was just before the last read (what the summary cache records:
    /// a file found the same at the next start needs no read).
    read_stamp: Option<Stamp>,
    /// The last listing of every root that found it ([`State::scan`]).
    scan: u64,
    /// The chats table's rows this file produced (kept for the summary cache); none
    /// while the file is dormant (the cache's text holds them, [`Held::Dormant`]).
    chats: Vec<ChatInfo>,
}

/// A followed file's follower, or what stands for it until the file changes.
enum Held {
    /// Reading the file.
    Live(Box<dyn Follower>),
    /// A file the summary cache vouched for, unchanged since and with no turn open: its
    /// cached rows and checkpoint, as the cache held them, from which its rows and a
    /// follower are made when the file first changes (`Followed::wake`). A restart over
    /// 10,000 files of history builds no parser for them, keeps no second copy of their
    /// rows (the chats table has them) and writes both back as they were read.
    Dormant(KeptText),
}

impl Held {
    /// Whether a turn is open (never, for a dormant file).
    fn turn_open(&self) -> bool {
        match self {
            Held::Live(follower) => follower.turn_open(),
            Held::Dormant(_) => false,
        }
    }

    fn on_quiet(&mut self, now_ms: u64, last_change_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        match self {
            Held::Live(follower) => follower.on_quiet(now_ms, last_change_ms, quiet_ms),
            Held::Dormant(_) => Vec::new(),
        }
    }

    fn on_history(&mut self, now_ms: u64, written_ms: u64, quiet_ms: u64) -> Vec<Observation> {
        match self {
            Held::Live(follower) => follower.on_history(now_ms, written_ms, quiet_ms),
            Held::Dormant(_) => Vec::new(),
        }
    }

    /// What the summary cache writes after the entry of a file with these `chats`.
    fn cache_body<'a>(&'a self, chats: &'a [ChatInfo]) -> Option<EntryBody<'a>> {
        match self {
            Held::Live(follower) => follower
                .checkpoint()
                .map(|checkpoint| EntryBody::Made { chats, checkpoint }),
            Held::Dormant(kept) => Some(EntryBody::Kept(kept)),
        }
    }
}

impl Followed {
    /// Makes a dormant file's rows and follower from its cached text. What this build
    /// wrote always fits; what does not (never expected) means the file is read again
    /// from its start, as history (what in it is new cannot be told).
    fn wake(&mut self, path: &Path, workspace: Option<String>) {
        let Held::Dormant(kept) = &self.follower else {
            return;
        };
        let mut follower = self.store.follower(path, workspace.clone());
        let rows = kept.rows(self.store.id());
        let fits = rows.is_some() && kept.checkpoint().is_some_and(|c| follower.restore(&c));
        if fits {
            self.chats = rows.unwrap_or_default();
        } else {
            tracing::warn!(path = %path.display(), "the summary cache's checkpoint does not fit the file's follower; reading it again from its start, as history");
            follower = self.store.follower(path, workspace);
            self.history = true;
        }
        self.follower = Held::Live(follower);
    }
}

/// What one start-up found, for its one log line.
#[derive(Debug, Default)]
struct StartCount {
    restored: usize,
    read: usize,
    cache: String,
}

/// One store root being observed.
#[derive(Debug)]
struct Root {
    store: Store,
    path: PathBuf,
    /// The same path, shared with its files' entries.
    shared_path: Arc<Path>,
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
    /// Since when the daemon has been following it (or waiting for it): a file found
    /// under it that was last written before then is history, anything later is news.
    since_ms: u64,
    /// The watched directory's `(device, inode)`, symbolic links followed, when its watch
    /// was added: another identity means it was replaced or re-pointed.
    identity: Option<(u64, u64)>,
    /// The folders its watch needs, when the inotify limit refused it.
    watches_needed: Option<u64>,
}

impl Root {
    fn new(store: Store, path: PathBuf, registry: bool, since_ms: u64) -> Self {
        Root {
            checked: registry || path.is_dir(),
            store,
            shared_path: Arc::from(path.as_path()),
            path,
            registry,
            sessions: BTreeSet::new(),
            workspace: None,
            since_ms,
            identity: None,
            watches_needed: None,
        }
    }
}

/// `(device, inode)` of the directory at `path`, symbolic links followed.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    meta.is_dir().then(|| (meta.dev(), meta.ino()))
}

/// The nearest folder above `path` that exists.
fn nearest_existing_ancestor(path: &Path) -> Option<PathBuf> {
    nearest_existing_ancestor_in(path, &mut FolderLookups::default())
}

/// [`nearest_existing_ancestor`], asking `lookups` (one pass over many roots shares their
/// ancestors: the home folder, `~/.config`, … are looked up once, not once per root).
fn nearest_existing_ancestor_in(path: &Path, lookups: &mut FolderLookups) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|a| lookups.is_dir(a))
        .map(Path::to_path_buf)
}

/// Whether folders exist, each looked up once in one pass (a pass takes microseconds; a
/// folder that appears during it is seen by the next one, which its watch triggers).
#[derive(Default)]
struct FolderLookups(std::collections::HashMap<PathBuf, bool>);

impl FolderLookups {
    fn is_dir(&mut self, path: &Path) -> bool {
        if let Some(&known) = self.0.get(path) {
            return known;
        }
        let exists = path.is_dir();
        self.0.insert(path.to_path_buf(), exists);
        exists
    }
}

/// A sysctl value, when it can be read.
fn sysctl(name: &str) -> Option<u64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

struct State<E> {
    config: ObserveConfig,
    roots: Vec<Root>,
    /// The daemon's user, who must own every announced folder.
    uid: u32,
    files: PathMap<Followed>,
    /// Files that could not be used at their last read, by path.
    problems: BTreeMap<PathBuf, (Store, PathBuf, StoreProblem)>,
    /// Roots notify refused to watch, with the reason.
    unwatched: HashMap<PathBuf, String>,
    /// Files restored from the summary cache whose chats are not reported yet (sent
    /// before anything else is, so the daemon loop sees them in order).
    restored: Vec<(Arc<Path>, Vec<ChatInfo>)>,
    /// Roots whose folders are all watched.
    watched: Vec<PathBuf>,
    /// Every folder notify watches (not recursively) for the roots: each root and the
    /// folders below it that lead to its store's session files, down to the store's depth
    /// (`Store::session_folders`). A folder two roots cover is watched once and kept while
    /// either needs it. Deeper folders (an agent's own sub-folders) are never watched:
    /// no walk of a root's whole tree, at start or ever.
    folder_watches: BTreeSet<PathBuf>,
    /// Folders watched (not recursively) only because a missing root lies below them:
    /// the root is read the moment it is created.
    ancestor_watches: BTreeSet<PathBuf>,
    /// The watch those folders are on (none when inotify is unavailable: the check every
    /// second still finds a root that appears).
    appear: Option<Arc<AppearWatch>>,
    /// Why no root can be watched, when notify could not start.
    no_notifications: String,
    last_health: Vec<ObserverStatus>,
    /// Files or problems changed since the health was last reported.
    health_changed: bool,
    events: mpsc::Sender<E>,
    /// Files whose turn is open or that changed within a quiet period: the only ones the
    /// passing of time can conclude something for.
    quiet_pending: PathSet,
    /// The summary cache's entries not claimed yet (consumed as files are first met).
    cached: PathMap<CachedFile>,
    /// Something the summary cache records changed since it was written.
    cache_dirty: bool,
    /// Polling: time between passes, what the last pass cost and saw.
    poll_every: Duration,
    last_poll_pass: Duration,
    last_poll_files: usize,
    start: StartCount,
    /// The summary cache being written, if it is.
    saving: Option<tokio::task::JoinHandle<()>>,
    /// Each root's identity at the last once-a-second check: when none changed, the
    /// check does nothing more (one `stat` per root).
    roots_seen: Vec<Option<(u64, u64)>>,
    /// How many listings of every root there were ([`State::rescan`]): the files the
    /// last one found carry its number, the others disappeared without an event.
    scan: u64,
}

impl<E: From<ObserverReport> + Send> State<E> {
    /// The root `path` is a session file of (its index in `roots`), and the session file
    /// (after mapping a database's side files to the database), if any. Only the roots
    /// whose path is a prefix of `path`'s bytes are asked: a heavy user's 10,000 files met
    /// 59 registry roots each at every start.
    fn store_of<'p>(&self, path: &'p Path) -> Option<(usize, Cow<'p, Path>)> {
        let bytes = path.as_os_str().as_encoded_bytes();
        self.roots.iter().enumerate().find_map(|(index, root)| {
            let prefix = root.path.as_os_str().as_encoded_bytes();
            let inside = bytes.starts_with(prefix)
                && (prefix.ends_with(b"/") || bytes.get(prefix.len()) == Some(&b'/'));
            if !root.checked || !inside {
                return None;
            }
            let session = root.store.session_path(path);
            root.store
                .is_session_under(&root.path, &session)
                .then_some((index, session))
        })
    }

    /// Whether change notifications reach every session file of `root`.
    fn notified(&self, root: &Path) -> bool {
        self.watched.iter().any(|w| w == root)
    }

    /// Whether a watched root other than `store`'s `root` covers `folder` (inotify keeps
    /// one watch per directory: removing it for one root would blind the other).
    fn needed_by_other(&self, folder: &Path, store: Store, root: &Path) -> bool {
        self.roots.iter().any(|r| {
            !(r.store == store && r.path == root)
                && self.watched.contains(&r.path)
                && r.store.covers_folder(&r.path, folder)
        })
    }

    /// Watches `top` (inside `store`'s `root`) and the folders below it that lead to
    /// session files (`top` again even when it is known: a folder deleted and made again
    /// under the same name lost its watch with the old one). A folder made between the
    /// listing and its parent's watch (`mkdir -p` of a project and its transcript) tells
    /// nothing: the folders are listed again until a listing finds none unwatched.
    fn watch_tree(
        &mut self,
        watcher: &mut RecommendedWatcher,
        store: Store,
        root: &Path,
        top: &Path,
    ) -> notify::Result<()> {
        let mut first = true;
        loop {
            let mut added = false;
            for (i, folder) in store.session_folders(root, top).iter().enumerate() {
                if (i > 0 || !first) && self.folder_watches.contains(folder) {
                    continue;
                }
                watcher.watch(folder, RecursiveMode::NonRecursive)?;
                self.folder_watches.insert(folder.clone());
                added = true;
            }
            if !added || !store.recursive() {
                return Ok(());
            }
            first = false;
        }
    }

    /// Removes the watches of `store`'s `root` (it is no longer watched) that no other
    /// watched root needs.
    fn release_folders(&mut self, watcher: &mut RecommendedWatcher, store: Store, root: &Path) {
        let mine: Vec<PathBuf> = self
            .folder_watches
            .iter()
            .filter(|f| store.covers_folder(root, f))
            .cloned()
            .collect();
        for folder in mine {
            if !self.needed_by_other(&folder, store, root) {
                // Already gone when the folder was deleted: nothing to undo then.
                let _ = watcher.unwatch(&folder);
                self.folder_watches.remove(&folder);
            }
        }
    }

    /// `root` cannot be watched (`error`; `needed`: the watches it takes): it is polled
    /// meanwhile, and the reason shown by status and doctor.
    fn refuse_watch(&mut self, root: &Path, error: &notify::Error, needed: u64) {
        let (reason, needed) = match &error.kind {
            notify::ErrorKind::MaxFilesWatch => {
                let raise = sysctl("fs.inotify.max_user_watches")
                    .map(|limit| {
                        format!(
                            "; raise it with `sudo sysctl fs.inotify.max_user_watches={}`",
                            limit.saturating_add(needed).max(limit.saturating_mul(2))
                        )
                    })
                    .unwrap_or_default();
                (
                    format!(
                        "the inotify watch limit (fs.inotify.max_user_watches) is reached: this folder needs {needed} watch(es){raise}; polled meanwhile (every {} s or more)",
                        POLL_EVERY.as_secs()
                    ),
                    Some(needed),
                )
            }
            _ => (
                format!(
                    "{error}; polled meanwhile (every {} s or more)",
                    POLL_EVERY.as_secs()
                ),
                None,
            ),
        };
        if self.unwatched.get(root) != Some(&reason) {
            tracing::warn!(root = %root.display(), %reason, "cannot watch a chat store");
        }
        if let Some(r) = self.roots.iter_mut().find(|r| r.path == root) {
            r.watches_needed = needed;
        }
        self.unwatched.insert(root.to_path_buf(), reason);
        self.health_changed = true;
    }

    /// Reads what is new in `path` and forwards its observations. A file met for the first
    /// time is history when it was last written before the daemon followed its root (at
    /// start-up, when a window announced it, when it appeared; a folder moved into place
    /// keeps its files' times): applied to the chats table, not published as news, and its
    /// quiet-period conclusions are drawn at once, from the file's own time, as history
    /// too. A file written since is news, even if the daemon is still starting.
    async fn follow(&mut self, path: &Path) {
        self.follow_listed(path, None).await
    }

    /// [`State::follow`], for a file a listing just found, with the stamp the listing
    /// took (not taken again).
    async fn follow_listed(&mut self, changed: &Path, listed: Option<Stamp>) {
        let Some((root_index, path)) = self.store_of(changed) else {
            return;
        };
        self.follow_listed_in(root_index, path, listed).await
    }

    /// [`State::follow_listed`] for the session file `path` of the root at `root_index`
    /// (what [`State::store_of`] says of it).
    async fn follow_listed_in(
        &mut self,
        root_index: usize,
        path: Cow<'_, Path>,
        listed: Option<Stamp>,
    ) {
        let (store, root) = {
            let root = &self.roots[root_index];
            (root.store, root.shared_path.clone())
        };
        let now = SystemClock.now_ms();
        // The summary cache's entry, claimed the first time its file is met: a file it
        // still holds one for is met for the first time, and the map of files is asked
        // only otherwise (one lookup by path fewer for each of 10,000 restored files).
        let cached = self.cached.remove_entry(path.as_os_str());
        let first_read = cached.is_some() || !self.files.contains_key(path.as_os_str());
        // The listing's stamp is the session file's own (not a database's side file's).
        let stamp = listed
            .filter(|_| matches!(path, Cow::Borrowed(_)))
            .or_else(|| Stamp::of(&path));
        if first_read {
            self.health_changed = true;
            let root_since = self.roots[root_index].since_ms;
            let written = stamp.map(|s| s.mtime_ms());
            let history = written.is_some_and(|ms| ms < root_since);
            let workspace = self.roots[root_index].workspace.clone();
            let mut followed = Followed {
                store,
                root: root.clone(),
                follower: Held::Dormant(KeptText::default()),
                last_change_ms: if history {
                    written.unwrap_or(now).min(now)
                } else {
                    now
                },
                history,
                read_stamp: None,
                chats: Vec::new(),
                scan: self.scan,
            };
            let make = || store.follower(&path, workspace.clone());
            if let Some((key, unchanged, chats)) =
                cached.and_then(|cached| restore(cached, store, stamp, &mut followed, make))
            {
                // Time concludes nothing for a file with no turn open.
                let turn_open = followed.follower.turn_open();
                self.files.insert(key, followed);
                self.start.restored += 1;
                if !chats.is_empty() {
                    self.restored.push((Arc::from(&*path), chats));
                    if self.restored.len() >= RESTORED_PER_REPORT {
                        self.send_restored().await;
                    }
                }
                if unchanged {
                    // Nothing to read: only what time concluded since it was cached.
                    if turn_open {
                        self.conclude_history(&path, now).await;
                    }
                    return;
                }
                // Appended to since: the read below changes the entry.
            } else {
                followed.follower = Held::Live(make());
                self.files
                    .insert(path.clone().into_owned().into_os_string(), followed);
                // Not in the cache as it is now.
                self.cache_dirty = true;
            }
            self.start.read += 1;
        } else if let Some(followed) = self.files.get_mut(path.as_os_str()) {
            followed.scan = self.scan;
        }
        let path: &Path = &path;
        let Some(followed) = self.files.get(path.as_os_str()) else {
            return;
        };
        if !first_read && store.one_file() && stamp.is_some() && followed.read_stamp == stamp {
            // Nothing changed since the last read (a poll pass, an event for metadata).
            return;
        }
        let dormant = matches!(followed.follower, Held::Dormant(_));
        let workspace = if dormant {
            self.roots[root_index].workspace.clone()
        } else {
            None
        };
        let Some(followed) = self.files.get_mut(path.as_os_str()) else {
            return;
        };
        if dormant {
            followed.wake(path, workspace);
        }
        let Held::Live(follower) = &mut followed.follower else {
            return;
        };
        let read = match follower.read() {
            Ok(read) => read,
            Err(ReadProblem::Gone) => {
                self.files.remove(path.as_os_str());
                self.problems.remove(path);
                self.quiet_pending.remove(path.as_os_str());
                self.health_changed = true;
                self.cache_dirty = true;
                return;
            }
            Err(problem) => {
                let kind = match &problem {
                    ReadProblem::Unreadable(_) => StoreProblemKind::Unreadable,
                    ReadProblem::Busy(_) => StoreProblemKind::Busy,
                    _ => StoreProblemKind::Malformed,
                };
                tracing::debug!(path = %path.display(), %problem, "cannot use a chat store file now");
                self.note_problem(store, root.to_path_buf(), path, kind, problem.to_string());
                return;
            }
        };
        match read.malformed {
            None => {
                if self.problems.remove(path).is_some() {
                    self.health_changed = true;
                }
            }
            Some(detail) => {
                tracing::debug!(path = %path.display(), %detail, "skipping malformed records");
                self.note_problem(
                    store,
                    root.to_path_buf(),
                    path,
                    StoreProblemKind::Malformed,
                    detail,
                );
            }
        }
        let mut observations = read.observations;
        if let Some(followed) = self.files.get_mut(path.as_os_str()) {
            followed.read_stamp = stamp;
            if read.changed {
                self.cache_dirty = true;
            }
            if read.changed && !first_read {
                // Written while the daemon follows it: news from now on.
                followed.last_change_ms = now;
                followed.history = false;
            }
            if followed.history {
                // Its state comes from its own time at once, not after a quiet period
                // counted from the moment the daemon happened to read it.
                let quiet_ms = self.config.quiet.as_millis() as u64;
                observations.extend(followed.follower.on_history(
                    now,
                    followed.last_change_ms,
                    quiet_ms,
                ));
            }
            if !followed.history || followed.follower.turn_open() {
                self.quiet_pending.insert(path.as_os_str().to_os_string());
            }
        }
        let history = self.files.get(path.as_os_str()).is_some_and(|f| f.history);
        self.forward(store, observations, history, path).await;
    }

    /// A file restored from the summary cache without a read: what time concluded since
    /// (a turn that has been open for too long is over), as history.
    async fn conclude_history(&mut self, path: &Path, now: u64) {
        let quiet_ms = self.config.quiet.as_millis() as u64;
        let Some(followed) = self.files.get_mut(path.as_os_str()) else {
            return;
        };
        let store = followed.store;
        let observations = followed
            .follower
            .on_history(now, followed.last_change_ms, quiet_ms);
        if followed.follower.turn_open() {
            self.quiet_pending.insert(path.as_os_str().to_os_string());
        }
        self.forward(store, observations, true, path).await;
    }
}

/// Restores `followed` from the summary cache's entry for its file (`cached`: the path as
/// the cache held it, and the entry), when the entry is of this store and the file is the
/// same file, not shorter, and the follower accepts its checkpoint. Returns the path (the
/// key the file is kept under), whether the file is unchanged since (nothing to read) and
/// the chats table's rows it produced, for the daemon loop; or `None` when the cache cannot
/// vouch for it (it is read from the start). An unchanged file with no turn open stays
/// dormant: its rows and checkpoint are kept as the cache's text, and `make` is not called.
fn restore(
    cached: (std::ffi::OsString, CachedFile),
    store: Store,
    stamp: Option<Stamp>,
    followed: &mut Followed,
    make: impl FnOnce() -> Box<dyn Follower>,
) -> Option<(std::ffi::OsString, bool, Vec<ChatInfo>)> {
    let (key, entry) = cached;
    let stamp = stamp?;
    let same_file = entry.store == store.id() && entry.dev == stamp.dev && entry.ino == stamp.ino;
    let unchanged = stamp.size == entry.size && stamp.mtime_ns == entry.mtime_ns;
    // Same size but written since: rewritten in place, not appended to.
    let appended = stamp.size > entry.size;
    if !same_file || !(unchanged || appended) {
        return None;
    }
    let chats = if unchanged && !entry.turn_open {
        followed.follower = Held::Dormant(entry.kept);
        entry.chats
    } else {
        let mut follower = make();
        if !entry
            .kept
            .checkpoint()
            .is_some_and(|c| follower.restore(&c))
        {
            return None;
        }
        followed.follower = Held::Live(follower);
        // The follower goes on from these rows; the daemon loop gets them too.
        followed.chats = entry.chats;
        followed.chats.clone()
    };
    followed.read_stamp = unchanged.then_some(stamp);
    Some((key, unchanged, chats))
}

impl<E: From<ObserverReport> + Send> State<E> {
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

    async fn forward(
        &mut self,
        store: Store,
        observations: Vec<Observation>,
        replay: bool,
        source: &Path,
    ) {
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
                process: None,
                event: o.event,
            })
            .collect::<Vec<ObservedEvent>>();
        if let Some(followed) = self.files.get_mut(source.as_os_str()) {
            for event in &events {
                let row = match followed
                    .chats
                    .iter()
                    .position(|c| c.chat_id == event.chat_id && c.store == event.store)
                {
                    Some(index) => &mut followed.chats[index],
                    None => {
                        followed.chats.push(super::new_chat_row(event));
                        followed.chats.last_mut().expect("just pushed")
                    }
                };
                super::apply_to_chat_row(row, event);
            }
            self.cache_dirty = true;
        }
        self.report(ObserverReport::Observed {
            events,
            replay,
            source: source.to_path_buf(),
        })
        .await;
    }

    /// Sends `report` to the daemon loop, after the restored files not reported yet.
    async fn report(&mut self, report: ObserverReport) {
        self.send_restored().await;
        let _ = self.events.send(E::from(report)).await;
    }

    /// Reports the restored files not reported yet.
    async fn send_restored(&mut self) {
        if !self.restored.is_empty() {
            let files = std::mem::take(&mut self.restored);
            let _ = self
                .events
                .send(E::from(ObserverReport::Restored {
                    files,
                    more: self.cached.len(),
                }))
                .await;
        }
    }

    /// Lists every root again, reading each session file that changed since it was read
    /// (an unchanged one costs a `stat`); unreadable directories are problems too. At
    /// start-up, and when the kernel says change notifications were lost.
    async fn rescan(&mut self) {
        let roots: Vec<(Store, PathBuf)> = self
            .roots
            .iter()
            .filter(|r| r.checked)
            .map(|r| (r.store, r.path.clone()))
            .collect();
        // The files this listing finds are marked with its number (no set of 10,000
        // paths beside the files' own map).
        self.scan += 1;
        for (store, root) in roots {
            let Some(index) = self
                .roots
                .iter()
                .position(|r| r.checked && r.store == store && r.path == root)
            else {
                continue;
            };
            // A file listed as a session file of this root is one of this root's for
            // `store_of` too, unless an earlier root's folder holds it: when none can,
            // its path is not judged a second time. (A side file, which stands for
            // another file, is judged as usual.)
            let overlapped = self.roots[..index]
                .iter()
                .any(|r| r.checked && (root.starts_with(&r.path) || r.path.starts_with(&root)));
            for (path, stamp) in store.stamped_session_files_in(&root, &root) {
                if overlapped || matches!(store.session_path(&path), Cow::Owned(_)) {
                    self.follow_listed(&path, stamp).await;
                } else {
                    self.follow_listed_in(index, Cow::Borrowed(&path), stamp)
                        .await;
                }
            }
        }
        // Files that disappeared without an event.
        let scan = self.scan;
        let before = self.files.len();
        self.files
            .retain(|path, followed| followed.scan == scan || Path::new(path).exists());
        self.problems.retain(|path, _| path.exists());
        if self.files.len() != before {
            self.cache_dirty = true;
        }
        let files = &self.files;
        self.quiet_pending
            .retain(|path| files.get(path).is_some_and(|f| f.scan == scan));
        self.report_health().await;
    }

    /// What the passing of time concludes, for the files where it can (a turn open, or a
    /// change within a quiet period): the others are not looked at.
    async fn check_quiet(&mut self) {
        if self.quiet_pending.is_empty() {
            return;
        }
        let now = SystemClock.now_ms();
        let quiet_ms = self.config.quiet.as_millis() as u64;
        let mut found = Vec::new();
        let mut settled = Vec::new();
        for path in &self.quiet_pending {
            let Some(followed) = self.files.get_mut(path.as_os_str()) else {
                settled.push(path.clone());
                continue;
            };
            let observations = followed
                .follower
                .on_quiet(now, followed.last_change_ms, quiet_ms);
            if !observations.is_empty() {
                found.push((followed.store, observations, followed.history, path.clone()));
            }
            let quiet_passed = now.saturating_sub(followed.last_change_ms) >= quiet_ms;
            if quiet_passed && !followed.follower.turn_open() {
                settled.push(path.clone());
            }
        }
        for path in settled {
            self.quiet_pending.remove(&path);
        }
        for (store, observations, history, path) in found {
            self.forward(store, observations, history, Path::new(&path))
                .await;
        }
    }

    /// The one start-up line: how the roots are followed and what reading the history
    /// took (the details are in `koru status --json` and doctor).
    fn log_start(&self, took: Duration) {
        let (mut watched, mut waiting, mut polled) = (0usize, 0usize, 0usize);
        for root in &self.roots {
            if !root.path.is_dir() {
                waiting += 1;
            } else if self.notified(&root.path) {
                watched += 1;
            } else {
                polled += 1;
            }
        }
        tracing::info!(
            "observing chat stores: {watched} roots watched, {waiting} waiting, {polled} polled; {} files ({} from the summary cache, {} read) in {} ms; {}",
            self.files.len(),
            self.start.restored,
            self.start.read,
            took.as_millis(),
            if self.start.cache.is_empty() { "no summary cache configured" } else { &self.start.cache },
        );
    }

    /// Reads again the files whose last read failed in a way that passes: a busy
    /// database (every second), and with `malformed_too` a file caught half-written (no
    /// later change may tell). Only files with a problem: bounded by them, not by history.
    async fn retry_problems(&mut self, malformed_too: bool) {
        let retry: Vec<PathBuf> = self
            .problems
            .iter()
            .filter(|(_, (_, _, problem))| match problem.kind {
                StoreProblemKind::Busy => true,
                StoreProblemKind::Malformed => malformed_too,
                StoreProblemKind::Unreadable => false,
            })
            .map(|(path, _)| path.clone())
            .collect();
        for path in retry {
            self.follow(&path).await;
        }
    }

    /// Writes the summary cache when something it records changed: entries are
    /// serialized here, one at a time, and the file is written on a blocking thread (a
    /// disk busy with someone else's writes never holds the observers up); `now` writes
    /// it before returning (at shutdown).
    fn save_cache(&mut self, now: bool) {
        let Some(path) = self.config.cache.clone() else {
            return;
        };
        if !self.cache_dirty || self.saving.as_ref().is_some_and(|s| !s.is_finished()) {
            return;
        }
        self.cache_dirty = false;
        let (mut lines, write) = summary_cache::start_write(path.clone());
        let write = move || {
            match write.run() {
                Ok(count) => {
                    tracing::debug!(path = %path.display(), files = count, "observers' summary cache written")
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot write the observers' summary cache; the next start reads the history again")
                }
            }
            crate::memory::return_freed_heap_pages();
        };
        // The writing thread appends each chunk of lines as it comes (at shutdown, `now`,
        // they wait in the channel until it runs here).
        let here = if now {
            Some(write)
        } else {
            self.saving = Some(tokio::task::spawn_blocking(write));
            None
        };
        for (file, followed) in &self.files {
            if self.problems.contains_key(Path::new(file)) {
                continue;
            }
            let (Some(stamp), Some(entry_body)) = (
                followed.read_stamp,
                followed.follower.cache_body(&followed.chats),
            ) else {
                continue;
            };
            let entry = CacheEntry {
                path: Path::new(file),
                store: followed.store.id(),
                dev: stamp.dev,
                ino: stamp.ino,
                size: stamp.size,
                mtime_ns: stamp.mtime_ns,
                turn_open: followed.follower.turn_open(),
                body: entry_body,
            };
            // An entry that cannot be written is left out: its file is read again.
            let _ = lines.push(&entry);
        }
        lines.finish();
        if let Some(write) = here {
            write();
        }
    }

    /// Each root's status, sent to the daemon loop when it changed.
    async fn report_health(&mut self) {
        self.health_changed = false;
        // Each root's files, counted in one pass over them (not one per root: 59 roots
        // and 10,000 files at a heavy user's). Files are matched to their root by the
        // shared path (same store and root path: the root they were found under).
        let mut files_of = vec![0usize; self.roots.len()];
        let mut last: Option<usize> = None;
        for followed in self.files.values() {
            let of = |index: usize| {
                let root = &self.roots[index];
                root.store == followed.store && root.path.as_os_str() == followed.root.as_os_str()
            };
            let index = match last.filter(|&index| of(index)) {
                Some(index) => Some(index),
                None => (0..self.roots.len()).find(|&index| of(index)),
            };
            if let Some(index) = index {
                files_of[index] += 1;
                last = Some(index);
            }
        }
        let health: Vec<ObserverStatus> = self
            .roots
            .iter()
            .zip(files_of)
            .map(|(root, files)| {
                let (store, path) = (root.store, &root.path);
                let exists = path.is_dir();
                let watched = exists && self.notified(path);
                let mode = if !exists {
                    ObserverMode::Waiting
                } else if watched {
                    ObserverMode::Watched
                } else {
                    ObserverMode::Polled
                };
                ObserverStatus {
                    store: store.id().to_string(),
                    root: path.display().to_string(),
                    exists,
                    watched,
                    mode: Some(mode),
                    waiting_on: (!exists)
                        .then(|| nearest_existing_ancestor(path))
                        .flatten()
                        .map(|a| a.display().to_string()),
                    watch_error: if watched {
                        None
                    } else {
                        self.unwatched.get(path).cloned()
                    },
                    watches_needed: if watched { None } else { root.watches_needed },
                    files,
                    problems: self
                        .problems
                        .values()
                        .filter(|(s, r, _)| *s == store && r == path)
                        .map(|(_, _, p)| p.clone())
                        .take(PROBLEMS_KEPT)
                        .collect(),
                    announced_by: root.sessions.iter().cloned().collect(),
                    announced: !root.registry,
                    poll: (mode == ObserverMode::Polled).then_some(PollCost {
                        every_ms: self.poll_every.as_millis() as u64,
                        last_pass_us: self.last_poll_pass.as_micros() as u64,
                        files: self.last_poll_files,
                    }),
                }
            })
            .collect();
        if health != self.last_health {
            self.last_health = health.clone();
            self.report(ObserverReport::Health { observers: health })
                .await;
        } else {
            self.send_restored().await;
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

    /// Watches the roots that exist and are not watched yet (`retry_refused`: also those
    /// a watch was refused for, which are polled meanwhile), then the folders that missing
    /// roots wait on. Returns the roots that became watched.
    fn arm(
        &mut self,
        watcher: &mut Option<notify::RecommendedWatcher>,
        retry_refused: bool,
    ) -> Vec<(Store, PathBuf)> {
        self.check_appeared();
        let mut armed = Vec::new();
        // Folders looked up once for this pass (the roots here, their ancestors below).
        let mut lookups = FolderLookups::default();
        if let Some(watcher) = watcher.as_mut() {
            let mut to_watch = Vec::new();
            for root in self.roots.iter().filter(|r| r.checked) {
                let path = &root.path;
                if self.notified(path) || !lookups.is_dir(path) {
                    continue;
                }
                if self.unwatched.contains_key(path) && !retry_refused {
                    continue;
                }
                to_watch.push((root.store, path.clone()));
            }
            for (store, root) in to_watch {
                let before = identity(&root);
                match self.watch_tree(watcher, store, &root, &root) {
                    Ok(()) => {
                        tracing::debug!(root = %root.display(), "watching a chat store");
                        self.watched.push(root.clone());
                        self.unwatched.remove(&root);
                        if let Some(r) = self.roots.iter_mut().find(|r| r.path == root) {
                            r.identity = before;
                            r.watches_needed = None;
                        }
                        armed.push((store, root));
                    }
                    Err(error) => {
                        // The watches added before the refusal are of no use alone.
                        self.release_folders(watcher, store, &root);
                        let needed = store.session_folders(&root, &root).len() as u64;
                        self.refuse_watch(&root, &error, needed);
                    }
                }
            }
        }
        self.watch_ancestors(&mut lookups);
        if !armed.is_empty() {
            self.health_changed = true;
        }
        armed
    }

    /// Keeps one watch (not recursive) on the nearest existing folder above each missing
    /// root, unless change notifications already reach that folder. It listens only for
    /// names appearing and the folder going away ([`AppearWatch`]): that folder is often a
    /// busy one (a home, a folder holding logs), whose writes are none of our business.
    fn watch_ancestors(&mut self, lookups: &mut FolderLookups) {
        let Some(appear) = self.appear.clone() else {
            return;
        };
        let wanted: BTreeSet<PathBuf> = self
            .roots
            .iter()
            .filter_map(|r| {
                (!lookups.is_dir(&r.path))
                    .then(|| nearest_existing_ancestor_in(&r.path, lookups))
                    .flatten()
            })
            .filter(|a| !self.folder_watches.contains(a))
            .collect();
        let gone: Vec<PathBuf> = self.ancestor_watches.difference(&wanted).cloned().collect();
        for folder in gone {
            self.ancestor_watches.remove(&folder);
            appear.unwatch(&folder);
        }
        for folder in wanted {
            if self.ancestor_watches.contains(&folder) && appear.is_watching(&folder) {
                continue;
            }
            match appear.watch(&folder) {
                Ok(()) => {
                    tracing::debug!(folder = %folder.display(), "waiting for a chat store to appear below");
                    self.ancestor_watches.insert(folder);
                }
                Err(error) => {
                    // The check every second still finds the root when it appears.
                    tracing::debug!(folder = %folder.display(), %error, "cannot watch the folder a missing chat store would appear in");
                }
            }
        }
    }

    /// Roots deleted, replaced or re-pointed since their watch was added lose it (and the
    /// files followed under them); they are then waited for, or watched again, like any
    /// other root. Returns whether anything changed.
    fn check_lost(&mut self, watcher: &mut Option<notify::RecommendedWatcher>) -> bool {
        let now = SystemClock.now_ms();
        let mut lost = Vec::new();
        for root in self.roots.iter_mut() {
            if !self.watched.contains(&root.path) {
                continue;
            }
            let current = identity(&root.path);
            if current.is_some() && current == root.identity {
                continue;
            }
            tracing::info!(root = %root.path.display(), exists = current.is_some(),
                "a chat-store folder was deleted, replaced or re-pointed; following it again");
            root.identity = None;
            root.since_ms = now;
            lost.push((root.store, root.path.clone()));
        }
        for (store, path) in &lost {
            if let Some(position) = self.watched.iter().position(|w| w == path) {
                self.watched.remove(position);
            }
            if let Some(watcher) = watcher.as_mut() {
                self.release_folders(watcher, *store, path);
            }
            self.files
                .retain(|_, f| !(f.store == *store && *f.root == **path));
            self.problems
                .retain(|_, (s, r, _)| !(*s == *store && r == path));
        }
        // Roots that were polled or waited for and vanished: their files are gone too
        // (one `stat` per root, never one per file).
        let vanished: Vec<(Store, PathBuf)> = self
            .roots
            .iter()
            .filter(|r| !self.watched.contains(&r.path) && !r.path.is_dir())
            .map(|r| (r.store, r.path.clone()))
            .collect();
        let before = self.files.len();
        if !vanished.is_empty() {
            self.files.retain(|_, f| {
                !vanished
                    .iter()
                    .any(|(s, r)| *s == f.store && **r == *f.root)
            });
        }
        if self.files.len() != before {
            self.cache_dirty = true;
        }
        !lost.is_empty() || self.files.len() != before
    }

    /// Everything a root check does: lost roots dropped, appeared ones watched and read
    /// (`retry_refused`: roots the watch limit refused are tried again).
    async fn refresh_roots(
        &mut self,
        watcher: &mut Option<notify::RecommendedWatcher>,
        retry_refused: bool,
    ) {
        if self.check_lost(watcher) {
            self.health_changed = true;
        }
        // A root can appear while the watch on the folder above it is being moved down
        // (`mkdir -p` creates the chain in one go): no event tells, so look again.
        let mut exists: Vec<bool> = Vec::new();
        for _ in 0..8 {
            for (store, root) in self.arm(watcher, retry_refused) {
                self.scan(store, &root, &root).await;
            }
            exists = self.roots.iter().map(|r| r.path.is_dir()).collect();
            let appeared_unseen = watcher.is_some()
                && self.roots.iter().zip(&exists).any(|(r, &exists)| {
                    exists && !self.notified(&r.path) && !self.unwatched.contains_key(&r.path)
                });
            if !appeared_unseen {
                break;
            }
        }
        let reported: Vec<bool> = self.last_health.iter().map(|h| h.exists).collect();
        if exists != reported {
            self.health_changed = true;
        }
    }

    /// Reads the session files of `root` that lie in `folder` (a root that appeared, or a
    /// folder created inside one: files written before its watch was armed are not missed).
    async fn scan(&mut self, store: Store, root: &Path, folder: &Path) {
        for (path, stamp) in store.stamped_session_files_in(root, folder) {
            self.follow_listed(&path, stamp).await;
        }
    }

    /// Roots that exist but are not watched (the watch was refused, or notifications are
    /// unavailable) are read again.
    /// Its cost is measured, and the next pass is put off so that polling takes at most
    /// `POLL_DUTY_MAX` of a core.
    async fn poll_unwatched(&mut self) {
        // Whether a root exists comes from the root check that just ran (one `stat` per
        // root a second is enough): a root added since is looked at here.
        let polled: Vec<(Store, PathBuf)> = self
            .roots
            .iter()
            .enumerate()
            .filter(|(i, r)| {
                r.checked
                    && match self.roots_seen.get(*i) {
                        Some(seen) => seen.is_some(),
                        None => r.path.is_dir(),
                    }
            })
            .filter(|(_, r)| !self.notified(&r.path))
            .map(|(_, r)| (r.store, r.path.clone()))
            .collect();
        if polled.is_empty() {
            return;
        }
        let started = std::time::Instant::now();
        let mut listed = PathSet::default();
        for (store, root) in &polled {
            for (path, stamp) in store.stamped_session_files_in(root, root) {
                self.follow_listed(&path, stamp).await;
                listed.insert(store.session_path(&path).into_owned().into_os_string());
            }
        }
        // Files under a polled root that are gone.
        let before = self.files.len();
        self.files.retain(|path, f| {
            listed.contains(path) || !polled.iter().any(|(s, r)| *s == f.store && **r == *f.root)
        });
        if self.files.len() != before {
            self.cache_dirty = true;
            self.health_changed = true;
        }
        let pass = started.elapsed();
        let every = POLL_EVERY.max(pass.mul_f64(1.0 / POLL_DUTY_MAX));
        if every != self.poll_every || listed.len() != self.last_poll_files {
            self.health_changed = true;
        }
        self.last_poll_pass = pass;
        self.last_poll_files = listed.len();
        self.poll_every = every;
    }

    /// A change notification for `path`.
    async fn on_change(&mut self, path: &Path, watcher: &mut Option<notify::RecommendedWatcher>) {
        if self.roots.iter().any(|r| r.path.starts_with(path)) {
            // A root, or a folder above one: created, deleted, moved or re-pointed.
            self.refresh_roots(watcher, false).await;
            return;
        }
        if path.is_dir() {
            let inside: Vec<(Store, PathBuf)> = self
                .roots
                .iter()
                .filter(|r| r.checked && path.starts_with(&r.path))
                .map(|r| (r.store, r.path.clone()))
                .collect();
            for (store, root) in inside {
                // A folder created or moved in (with what it holds): watched before it is
                // read, so a file written meanwhile is not missed.
                if let (Some(w), true) = (watcher.as_mut(), self.notified(&root)) {
                    if store.covers_folder(&root, path) {
                        // Whatever was known below it went with the folder it replaced.
                        self.folder_watches.retain(|f| !f.starts_with(path));
                        if let Err(error) = self.watch_tree(w, store, &root, path) {
                            self.watched.retain(|r| *r != root);
                            self.release_folders(w, store, &root);
                            let needed = store.session_folders(&root, &root).len() as u64;
                            self.refuse_watch(&root, &error, needed);
                        }
                    }
                }
                self.scan(store, &root, path).await;
            }
            return;
        }
        if self.folder_watches.contains(path) && !path.exists() {
            // A watched folder deleted or moved away: notify dropped its watches with it.
            self.folder_watches.retain(|f| !f.starts_with(path));
        }
        if !path.exists() {
            // A folder deleted or moved away takes its files with it (a file's own
            // deletion is found when it is read below).
            let before = self.files.len();
            self.files
                .retain(|file, _| file == path.as_os_str() || !Path::new(file).starts_with(path));
            if self.files.len() != before {
                self.problems.retain(|file, _| !file.starts_with(path));
                self.health_changed = true;
                self.cache_dirty = true;
            }
        }
        self.follow(path).await;
    }
}

impl<E: From<ObserverReport> + Send> State<E> {
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
                    .insert(path.clone(), self.no_notifications.clone());
            }
            let mut root = Root::new(store, path.clone(), false, SystemClock.now_ms());
            root.sessions.insert(session_id.to_string());
            root.workspace = workspace.clone();
            self.roots.push(root);
            added.push((store, path));
        }
        self.arm(watcher, false);
        for (store, root) in added {
            if !self.roots.iter().any(|r| r.path == root && r.checked) {
                continue;
            }
            for path in store.session_files(&root) {
                self.follow(&path).await;
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
                // Roots still observed at the same path keep it watched.
                if !shared {
                    self.watched.remove(position);
                    if let Some(watcher) = watcher.as_mut() {
                        // Folders a root around it covers stay watched for that root.
                        self.release_folders(watcher, store, &path);
                    }
                }
            }
            self.unwatched.remove(&path);
            self.files
                .retain(|_, f| !(f.store == store && *f.root == *path));
            self.problems
                .retain(|_, (s, r, _)| !(*s == store && *r == path));
        }
        self.watch_ancestors(&mut FolderLookups::default());
    }
}

/// Watches until `shutdown`, adding and dropping the roots plugin sessions announce as
/// `announcements` says.
pub async fn run<E: From<ObserverReport> + Send>(
    config: ObserveConfig,
    events: mpsc::Sender<E>,
    mut announcements: mpsc::UnboundedReceiver<RootsChange>,
    shutdown: CancellationToken,
) {
    let (changed_tx, mut changed_rx) = mpsc::unbounded_channel::<Notice>();
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
            if event.need_rescan() {
                // The kernel's queue overflowed: some changes were never told.
                let _ = changed_tx.send(Notice::LostEvents);
            }
            for path in event.paths {
                let _ = changed_tx.send(Notice::Changed(path));
            }
        }
    });
    let mut no_notifications = String::new();
    let mut watcher = match watcher {
        Ok(watcher) => Some(watcher),
        Err(error) => {
            let raise = sysctl("fs.inotify.max_user_instances")
                .map(|limit| {
                    format!(
                        " (if fs.inotify.max_user_instances is reached, raise it with `sudo sysctl fs.inotify.max_user_instances={}`)",
                        limit.saturating_mul(2)
                    )
                })
                .unwrap_or_default();
            no_notifications = format!(
                "change notifications are unavailable: {error}{raise}; polled every {} s",
                POLL_EVERY.as_secs()
            );
            tracing::warn!(reason = %no_notifications, "cannot watch chat stores");
            None
        }
    };
    let started_ms = config.started_ms.unwrap_or_else(|| SystemClock.now_ms());
    let roots = config
        .roots
        .iter()
        .map(|(store, path)| Root::new(*store, path.clone(), true, started_ms))
        .collect();
    let mut start = StartCount::default();
    let cached = match config.cache.as_deref().map(summary_cache::load) {
        None => PathMap::default(),
        Some(Ok(files)) => {
            start.cache = format!("{} files in the summary cache", files.len());
            files
        }
        Some(Err(refused)) => {
            start.cache = format!("no usable summary cache ({refused})");
            if !matches!(refused, summary_cache::CacheRefused::Missing) {
                tracing::info!(cache = ?config.cache, %refused, "not using the observers' summary cache; reading the history again and writing a new one");
            }
            PathMap::default()
        }
    };
    let started = std::time::Instant::now();
    let mut state = State {
        config,
        roots,
        uid: nix::unistd::getuid().as_raw(),
        // Room for every file the cache knows: no growing (and hashing every path again)
        // while 10,000 of them are restored.
        files: PathMap::with_capacity_and_hasher(cached.len(), Default::default()),
        problems: BTreeMap::new(),
        unwatched: HashMap::new(),
        watched: Vec::new(),
        restored: Vec::new(),
        folder_watches: BTreeSet::new(),
        ancestor_watches: BTreeSet::new(),
        appear: AppearWatch::new()
            .inspect_err(|error| tracing::debug!(%error, "cannot watch the folders missing chat stores would appear in; checked every second"))
            .ok()
            .map(Arc::new),
        no_notifications,
        last_health: Vec::new(),
        health_changed: true,
        events,
        quiet_pending: PathSet::default(),
        cached,
        cache_dirty: false,
        poll_every: POLL_EVERY,
        last_poll_pass: Duration::ZERO,
        last_poll_files: 0,
        start,
        saving: None,
        roots_seen: Vec::new(),
        scan: 0,
    };
    if watcher.is_none() {
        for root in &state.roots {
            state
                .unwatched
                .insert(root.path.clone(), state.no_notifications.clone());
        }
    }
    state.arm(&mut watcher, false);
    state.rescan().await;
    if !state.cached.is_empty() {
        // Entries for files that are gone: the cache is written again without them.
        state.cache_dirty = true;
    }
    state.cached = PathMap::default();
    state.log_start(started.elapsed());
    state.save_cache(false);
    crate::memory::return_freed_heap_pages();

    let mut rescan = tokio::time::interval(state.config.rescan);
    rescan.tick().await;
    let mut root_check = tokio::time::interval(ROOT_CHECK_EVERY);
    root_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    root_check.tick().await;
    let mut last_poll = std::time::Instant::now();
    let mut cache_save = tokio::time::interval(CACHE_SAVE_EVERY);
    cache_save.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    cache_save.tick().await;
    let quiet_every =
        (state.config.quiet / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut quiet = tokio::time::interval(quiet_every);
    quiet.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let appear = state.appear.clone();
    let appeared = || async {
        match appear.as_deref() {
            Some(appear) => appear.changed().await,
            None => std::future::pending().await,
        }
    };
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                if let Some(saving) = state.saving.take() {
                    let _ = saving.await;
                }
                state.save_cache(true);
                break;
            }
            appeared = appeared() => {
                for path in appeared {
                    state.on_change(&path, &mut watcher).await;
                }
                if state.health_changed {
                    state.report_health().await;
                }
            }
            Some(notice) = changed_rx.recv() => {
                let mut paths = Vec::new();
                let mut lost_events = false;
                for notice in std::iter::once(notice).chain(std::iter::from_fn(|| changed_rx.try_recv().ok())) {
                    match notice {
                        Notice::Changed(path) => {
                            if !paths.contains(&path) {
                                paths.push(path);
                            }
                        }
                        Notice::LostEvents => lost_events = true,
                    }
                }
                if lost_events {
                    tracing::info!("change notifications were lost (the kernel's queue overflowed); listing every chat store again");
                    state.refresh_roots(&mut watcher, false).await;
                    state.rescan().await;
                }
                for path in paths {
                    state.on_change(&path, &mut watcher).await;
                }
                if state.health_changed {
                    state.report_health().await;
                }
            }
            _ = root_check.tick() => {
                // One `stat` per root; the rest only when a root appeared, went away or
                // was replaced (notifications usually told already).
                let seen: Vec<Option<(u64, u64)>> = state.roots.iter().map(|r| identity(&r.path)).collect();
                if seen != state.roots_seen {
                    state.refresh_roots(&mut watcher, false).await;
                    state.roots_seen = state.roots.iter().map(|r| identity(&r.path)).collect();
                }
                state.retry_problems(false).await;
                if last_poll.elapsed() >= state.poll_every {
                    last_poll = std::time::Instant::now();
                    state.poll_unwatched().await;
                }
                if state.health_changed {
                    state.report_health().await;
                }
            }
            _ = rescan.tick() => {
                // Roots only: the watches the inotify limit refused are tried again (the
                // root check above sees roots come and go).
                if !state.unwatched.is_empty() {
                    state.refresh_roots(&mut watcher, true).await;
                }
                state.retry_problems(true).await;
                if state.health_changed {
                    state.report_health().await;
                }
            }
            _ = cache_save.tick() => state.save_cache(false),
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
            // Only while some file has a turn open or a recent change: a daemon at rest
            // is not woken for it.
            _ = quiet.tick(), if !state.quiet_pending.is_empty() => state.check_quiet().await,
        }
    }
}
