//! Chat-store roots that plugin sessions announce: a window's `window.storage` folders turned into store roots (checked: absolute, a directory the daemon's user owns), and the narrow handle through which the state machine hands them to the watcher for the life of the session.
//!
//! The state machine does no I/O: it only calls [`SessionStoreRoots::add`] when a plugin
//! greets with `window.storage` and [`SessionStoreRoots::remove`] when its session ends.
//! The daemon's implementation ([`WatcherSessionRoots`]) forwards both as
//! [`RootsChange`] to the watcher task, which derives, checks, deduplicates and watches.

use std::path::{Path, PathBuf};

use koru_protocol::WindowStorage;
use tokio::sync::mpsc;

use super::locations::Store;
use super::stores::{cline, copilot};

/// What the state machine tells the chat-store watcher about plugin sessions.
pub trait SessionStoreRoots: Send {
    /// A plugin session greeted with `storage`: observe its window's chat-store folders.
    /// `workspace` is the window's folder when it has exactly one: chats found in the
    /// window's own folders belong to it when the store does not say (code-server writes
    /// no `workspace.json`).
    fn add(&self, session_id: &str, storage: &WindowStorage, workspace: Option<&str>);
    /// The session ended: drop the folders only it announced.
    fn remove(&self, session_id: &str);
}

/// For a daemon that does not observe chat stores: announcements are ignored.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSessionStoreRoots;

impl SessionStoreRoots for NoSessionStoreRoots {
    fn add(&self, _session_id: &str, _storage: &WindowStorage, _workspace: Option<&str>) {}
    fn remove(&self, _session_id: &str) {}
}

/// A change to the announced roots, as the watcher task receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootsChange {
    Add {
        session_id: String,
        storage: WindowStorage,
        workspace: Option<String>,
    },
    Remove {
        session_id: String,
    },
}

/// Forwards announcements to the watcher task. The channel is unbounded because the state
/// machine must never wait; one message per session start or end cannot grow it far.
#[derive(Debug, Clone)]
pub struct WatcherSessionRoots {
    changes: mpsc::UnboundedSender<RootsChange>,
}

impl WatcherSessionRoots {
    pub fn new(changes: mpsc::UnboundedSender<RootsChange>) -> Self {
        WatcherSessionRoots { changes }
    }
}

impl SessionStoreRoots for WatcherSessionRoots {
    fn add(&self, session_id: &str, storage: &WindowStorage, workspace: Option<&str>) {
        // The watcher has stopped only when the daemon is shutting down.
        let _ = self.changes.send(RootsChange::Add {
            session_id: session_id.to_string(),
            storage: storage.clone(),
            workspace: workspace.map(str::to_string),
        });
    }

    fn remove(&self, session_id: &str) {
        let _ = self.changes.send(RootsChange::Remove {
            session_id: session_id.to_string(),
        });
    }
}

/// A fake for the state machine's unit tests: records every call in order.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct RecordingSessionStoreRoots {
    pub changes: std::sync::Arc<std::sync::Mutex<Vec<RootsChange>>>,
}

#[cfg(test)]
impl SessionStoreRoots for RecordingSessionStoreRoots {
    fn add(&self, session_id: &str, storage: &WindowStorage, workspace: Option<&str>) {
        self.changes.lock().unwrap().push(RootsChange::Add {
            session_id: session_id.to_string(),
            storage: storage.clone(),
            workspace: workspace.map(str::to_string),
        });
    }

    fn remove(&self, session_id: &str) {
        self.changes.lock().unwrap().push(RootsChange::Remove {
            session_id: session_id.to_string(),
        });
    }
}

/// Which stores announced folders map to, from the registry: a store the registry
/// disables is not observed in announced folders either.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnounceConfig {
    /// Observe `<workspace_storage>/chatSessions` (the Copilot chat-sessions interface is
    /// enabled).
    pub chat_sessions: bool,
    /// The Cline-family extension ids whose `<global_storage>/<id>/tasks` are observed.
    pub cline_extensions: Vec<String>,
}

impl AnnounceConfig {
    /// From the registry: whether the Copilot chat-sessions interface is enabled, and the
    /// extension ids its Cline locations use (`…/globalStorage/<id>/tasks`).
    pub fn from_registry(registry: &koru_registry::Registry) -> Self {
        let enabled = |id: &'static str| {
            registry
                .interfaces()
                .iter()
                .filter(move |i| i.id == id && i.enabled)
        };
        let mut cline_extensions: Vec<String> = enabled(cline::STORE)
            .flat_map(|i| i.locations.iter())
            .filter_map(|location| cline_extension_id(Path::new(location)))
            .collect();
        cline_extensions.sort();
        cline_extensions.dedup();
        AnnounceConfig {
            chat_sessions: enabled(copilot::STORE).next().is_some(),
            cline_extensions,
        }
    }
}

/// `<id>` of a Cline location `…/globalStorage/<id>/tasks` (not the CLI's
/// `~/.cline/data/tasks`, which no window announces).
fn cline_extension_id(location: &Path) -> Option<String> {
    if location.file_name()? != "tasks" {
        return None;
    }
    let extension = location.parent()?;
    if extension.parent()?.file_name()? != "globalStorage" {
        return None;
    }
    let id = extension.file_name()?.to_str()?;
    Some(id.to_string())
}

/// The store roots a window's storage maps to, and the folders refused (with why).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowRoots {
    /// Each root as the resolved path (symbolic links followed, so the same folder
    /// announced under two spellings is one root).
    pub roots: Vec<(Store, PathBuf)>,
    pub refused: Vec<String>,
}

/// The chat-store roots of a window whose plugin announced `storage`, for a daemon running
/// as `uid`. An announced folder must be an absolute path to a directory `uid` owns (a
/// missing one counts when its nearest existing ancestor is such a directory); a derived
/// root that exists must be one too, so a link out of the window's folder is not followed.
pub fn window_store_roots(
    storage: &WindowStorage,
    config: &AnnounceConfig,
    uid: u32,
) -> WindowRoots {
    let mut out = WindowRoots::default();
    let mut wanted: Vec<(Store, PathBuf)> = Vec::new();
    let mut announced = |field: &str, raw: &Option<String>| -> Option<PathBuf> {
        let raw = raw.as_deref()?;
        match check_folder(Path::new(raw), uid) {
            Ok(()) => Some(PathBuf::from(raw)),
            Err(reason) => {
                out.refused.push(format!("{field} {raw:?}: {reason}"));
                None
            }
        }
    };
    let workspace_storage = announced("workspace_storage", &storage.workspace_storage);
    let global_storage = announced("global_storage", &storage.global_storage);
    if let Some(folder) = workspace_storage.filter(|_| config.chat_sessions) {
        wanted.push((Store::CopilotWindow, folder.join("chatSessions")));
    }
    if let Some(folder) = global_storage {
        for extension in &config.cline_extensions {
            wanted.push((Store::Cline, folder.join(extension).join("tasks")));
        }
    }
    for (store, root) in wanted {
        match check_folder(&root, uid) {
            Ok(()) => {
                let root = resolve(&root);
                if !out.roots.contains(&(store, root.clone())) {
                    out.roots.push((store, root));
                }
            }
            Err(reason) => out.refused.push(format!("{}: {reason}", root.display())),
        }
    }
    out
}

/// Why `path` may not be observed for a daemon running as `uid`, if so: it must be
/// absolute, and it (or, while it does not exist, its nearest existing ancestor) must be a
/// directory owned by `uid`. Symbolic links are followed, so a link to another user's
/// folder is refused.
pub fn check_folder(path: &Path, uid: u32) -> Result<(), FolderRefused> {
    use std::os::unix::fs::MetadataExt;
    if !path.is_absolute() {
        return Err(FolderRefused::NotAbsolute);
    }
    let mut existing = path;
    loop {
        match std::fs::metadata(existing) {
            Ok(meta) if !meta.is_dir() => {
                return Err(FolderRefused::NotADirectory(existing.to_path_buf()))
            }
            Ok(meta) if meta.uid() != uid => {
                return Err(FolderRefused::ForeignOwner {
                    path: existing.to_path_buf(),
                    owner: meta.uid(),
                    uid,
                })
            }
            Ok(_) => return Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                existing = existing.parent().ok_or(FolderRefused::Nowhere)?;
            }
            Err(error) => {
                return Err(FolderRefused::Uninspectable {
                    path: existing.to_path_buf(),
                    error: error.to_string(),
                })
            }
        }
    }
}

/// Why a folder may not be observed (see [`check_folder`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FolderRefused {
    #[error("not an absolute path")]
    NotAbsolute,
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{} is owned by uid {owner}, not by this daemon's user (uid {uid})", path.display())]
    ForeignOwner { path: PathBuf, owner: u32, uid: u32 },
    #[error("no part of the path exists")]
    Nowhere,
    #[error("cannot inspect {}: {error}", path.display())]
    Uninspectable { path: PathBuf, error: String },
}

/// `path` with symbolic links resolved as far as it exists (the missing rest appended).
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(resolved) = std::fs::canonicalize(path) {
        return resolved;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolve(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// Whether `store` at `root` sees every session file an announced `announced_store` root
/// at `announced_root` would (both paths resolved): then the announced root is not
/// watched a second time.
pub fn covers(store: Store, root: &Path, announced_store: Store, announced_root: &Path) -> bool {
    if store.id() != announced_store.id() {
        return false;
    }
    let probe = match announced_store {
        Store::CopilotWindow => announced_root.join("koru-probe.jsonl"),
        Store::Cline => announced_root.join("koru-probe").join("ui_messages.json"),
        _ => return store == announced_store && root == announced_root,
    };
    store.is_session_under(root, &probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AnnounceConfig {
        AnnounceConfig {
            chat_sessions: true,
            cline_extensions: vec![
                "rooveterinaryinc.roo-cline".into(),
                "saoudrizwan.claude-dev".into(),
            ],
        }
    }

    fn uid() -> u32 {
        nix::unistd::getuid().as_raw()
    }

    fn storage(workspace: Option<&Path>, global: Option<&Path>) -> WindowStorage {
        WindowStorage {
            workspace_storage: workspace.map(|p| p.display().to_string()),
            global_storage: global.map(|p| p.display().to_string()),
        }
    }

    #[test]
    fn a_windows_storage_maps_to_its_chat_sessions_and_cline_task_folders() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().canonicalize().unwrap().join("code-server/User");
        let workspace = user.join("workspaceStorage/4f2a");
        let global = user.join("globalStorage");
        std::fs::create_dir_all(workspace.join("chatSessions")).unwrap();
        std::fs::create_dir_all(global.join("saoudrizwan.claude-dev/tasks")).unwrap();
        // Roo Code has no folder yet: still a root, picked up once it appears.
        let found = window_store_roots(&storage(Some(&workspace), Some(&global)), &config(), uid());
        assert_eq!(found.refused, Vec::<String>::new());
        assert_eq!(
            found.roots,
            [
                (Store::CopilotWindow, workspace.join("chatSessions")),
                (
                    Store::Cline,
                    global.join("rooveterinaryinc.roo-cline/tasks")
                ),
                (Store::Cline, global.join("saoudrizwan.claude-dev/tasks")),
            ]
        );
        // Only what the registry enables.
        let found = window_store_roots(
            &storage(Some(&workspace), Some(&global)),
            &AnnounceConfig::default(),
            uid(),
        );
        assert_eq!(found, WindowRoots::default());
        assert_eq!(
            window_store_roots(&WindowStorage::default(), &config(), uid()),
            WindowRoots::default()
        );
    }

    #[test]
    fn relative_missing_foreign_and_non_directory_folders_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let file = base.join("a-file");
        std::fs::write(&file, "x").unwrap();
        let found = window_store_roots(
            &storage(Some(Path::new("User/workspaceStorage/1")), Some(&file)),
            &config(),
            uid(),
        );
        assert!(found.roots.is_empty(), "{found:?}");
        assert_eq!(found.refused.len(), 2, "{found:?}");
        assert!(
            found.refused[0]
                .starts_with("workspace_storage \"User/workspaceStorage/1\": not an absolute path"),
            "{found:?}"
        );
        assert!(found.refused[1].contains("is not a directory"), "{found:?}");

        // Another user's folder (here: the folder seen by a daemon running as another uid).
        let foreign = uid() + 1;
        let workspace = base.join("workspaceStorage/1");
        std::fs::create_dir_all(&workspace).unwrap();
        let found = window_store_roots(&storage(Some(&workspace), None), &config(), foreign);
        assert!(found.roots.is_empty());
        assert!(
            found.refused[0].contains(&format!("not by this daemon's user (uid {foreign})")),
            "{found:?}"
        );

        // A link from the window's own folder into a folder the daemon's user does not
        // own is not followed; checked here through a daemon uid that owns only `own`.
        let own = base.join("own/workspaceStorage/2");
        std::fs::create_dir_all(&own).unwrap();
        assert_eq!(check_folder(&own, uid()), Ok(()));
        assert_eq!(check_folder(&own.join("not/yet/there"), uid()), Ok(()));
        assert_eq!(
            check_folder(&own.join("not/yet/there"), foreign),
            Err(FolderRefused::ForeignOwner {
                path: own.clone(),
                owner: uid(),
                uid: foreign
            })
        );
        assert_eq!(
            check_folder(Path::new(""), uid()),
            Err(FolderRefused::NotAbsolute)
        );
    }

    #[test]
    fn a_link_out_of_the_windows_folder_is_judged_by_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let workspace = base.join("workspaceStorage/3");
        std::fs::create_dir_all(&workspace).unwrap();
        // A folder of another user: made and handed to `nobody` when the test runs as
        // root, else `/` (owned by root).
        let theirs = if uid() == 0 {
            let theirs = base.join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            let nobody = Some(nix::unistd::Uid::from_raw(65534));
            nix::unistd::chown(&theirs, nobody, Some(nix::unistd::Gid::from_raw(65534))).unwrap();
            theirs
        } else {
            PathBuf::from("/")
        };
        std::os::unix::fs::symlink(&theirs, workspace.join("chatSessions")).unwrap();
        let found = window_store_roots(&storage(Some(&workspace), None), &config(), uid());
        assert!(found.roots.is_empty(), "{found:?}");
        assert_eq!(found.refused.len(), 1, "{found:?}");
        let expected = format!("{}: ", workspace.join("chatSessions").display());
        assert!(found.refused[0].starts_with(&expected), "{found:?}");
        assert!(found.refused[0].contains("is owned by uid"), "{found:?}");
    }

    #[test]
    fn the_same_folder_under_two_spellings_is_one_root() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let workspace = base.join("workspaceStorage/5");
        std::fs::create_dir_all(workspace.join("chatSessions")).unwrap();
        std::os::unix::fs::symlink(base.join("workspaceStorage"), base.join("link")).unwrap();
        let plain = window_store_roots(&storage(Some(&workspace), None), &config(), uid());
        let linked =
            window_store_roots(&storage(Some(&base.join("link/5")), None), &config(), uid());
        assert_eq!(plain.roots, linked.roots);
        let dotted = window_store_roots(
            &storage(
                Some(&base.join("workspaceStorage/../workspaceStorage/5")),
                None,
            ),
            &config(),
            uid(),
        );
        assert_eq!(plain.roots, dotted.roots);
    }

    #[test]
    fn registry_locations_cover_announced_folders_inside_them_and_only_those() {
        let chat_sessions = (
            Store::CopilotWindow,
            "/h/.config/Code/User/workspaceStorage/9f/chatSessions",
        );
        let roo_tasks = (
            Store::Cline,
            "/h/.config/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks",
        );
        // (observed root, announced root, covered)
        let cases = [
            (
                (Store::Copilot, "/h/.config/Code/User/workspaceStorage"),
                chat_sessions,
                true,
            ),
            (chat_sessions, chat_sessions, true),
            (
                (Store::Copilot, "/h/.config/Code/User/workspaceStorage/9f"),
                chat_sessions,
                false,
            ),
            (
                (
                    Store::Copilot,
                    "/h/.local/share/code-server/User/workspaceStorage",
                ),
                chat_sessions,
                false,
            ),
            (
                (Store::CursorLegacy, "/h/.config/Code/User/workspaceStorage"),
                chat_sessions,
                false,
            ),
            (roo_tasks, roo_tasks, true),
            (
                (
                    Store::Cline,
                    "/h/.config/Code/User/globalStorage/kilocode.kilo-code/tasks",
                ),
                roo_tasks,
                false,
            ),
            (
                (Store::Copilot, "/h/.config/Code/User/workspaceStorage"),
                roo_tasks,
                false,
            ),
        ];
        for ((store, root), (announced_store, announced_root), covered) in cases {
            assert_eq!(
                covers(
                    store,
                    Path::new(root),
                    announced_store,
                    Path::new(announced_root)
                ),
                covered,
                "{store:?} {root} / {announced_store:?} {announced_root}"
            );
        }
    }

    #[test]
    fn the_cline_extension_ids_come_from_the_registrys_cline_locations() {
        let loaded = koru_registry::load(&[koru_registry::LayerSource::built_in()]);
        let config = AnnounceConfig::from_registry(&loaded.registry);
        assert!(config.chat_sessions);
        assert_eq!(
            config.cline_extensions,
            [
                "kilocode.kilo-code",
                "rooveterinaryinc.roo-cline",
                "saoudrizwan.claude-dev"
            ]
        );
        assert_eq!(
            cline_extension_id(Path::new("/x/globalStorage/a.b/other")),
            None
        );
        assert_eq!(cline_extension_id(Path::new("tasks")), None);
        assert_eq!(
            cline_extension_id(Path::new("/h/.cline/data/tasks")),
            None,
            "the Cline CLI's own folder is no extension"
        );
    }
}
