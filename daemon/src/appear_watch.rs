//! Watching folders only for what appears in them (a file or folder created or moved in) and for the folder itself going away, never for writes inside: the nearest existing ancestor of a missing chat store or registry folder is often a busy folder (a home, a sandbox holding logs), and the `notify` crate's inotify watches always hear every write there.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures::StreamExt;
use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask, Watches};

/// What an ancestor watch listens for: a name appearing (created, moved in) and the folder
/// itself deleted or moved (the next existing ancestor is then watched instead).
fn mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// One inotify instance of our own with non-recursive watches on folders, reporting the
/// paths that appeared in them (and a watched folder's own path when it went away). Shared
/// by reference: one task waits in [`AppearWatch::changed`] while another adds and removes
/// folders.
pub struct AppearWatch {
    events: tokio::sync::Mutex<EventStream<Vec<u8>>>,
    watched: Mutex<Watched>,
}

struct Watched {
    watches: Watches,
    folders: HashMap<WatchDescriptor, PathBuf>,
    by_folder: HashMap<PathBuf, WatchDescriptor>,
}

impl AppearWatch {
    /// A new inotify instance (fails like `notify` does when the user's instance limit is
    /// reached). Needs the tokio runtime.
    pub fn new() -> io::Result<AppearWatch> {
        let events = Inotify::init()?.into_event_stream(vec![0u8; 4096])?;
        let watches = events.watches();
        Ok(AppearWatch {
            events: tokio::sync::Mutex::new(events),
            watched: Mutex::new(Watched {
                watches,
                folders: HashMap::new(),
                by_folder: HashMap::new(),
            }),
        })
    }

    /// Starts listening on `folder` (no-op when it already is).
    pub fn watch(&self, folder: &Path) -> io::Result<()> {
        let mut watched = self.watched();
        if watched.by_folder.contains_key(folder) {
            return Ok(());
        }
        // One folder reached by two paths (a link) is one watch descriptor.
        let wd = watched.watches.add(folder, mask())?;
        watched.folders.insert(wd.clone(), folder.to_path_buf());
        watched.by_folder.insert(folder.to_path_buf(), wd);
        Ok(())
    }

    /// Stops listening on `folder`.
    pub fn unwatch(&self, folder: &Path) {
        let mut watched = self.watched();
        if let Some(wd) = watched.by_folder.remove(folder) {
            if !watched.by_folder.values().any(|other| *other == wd) {
                watched.folders.remove(&wd);
                let _ = watched.watches.remove(wd);
            }
        }
    }

    /// Whether `folder` is listened on.
    pub fn is_watching(&self, folder: &Path) -> bool {
        self.watched().by_folder.contains_key(folder)
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the next events: the paths that appeared, and each watched folder that
    /// went away (its watch is then dropped). Never ends if the instance fails.
    pub async fn changed(&self) -> Vec<PathBuf> {
        let mut events = self.events.lock().await;
        loop {
            let Some(Ok(event)) = events.next().await else {
                return std::future::pending().await;
            };
            let mut paths = Vec::new();
            let mut take = |event: inotify::Event<std::ffi::OsString>| {
                let mut watched = self.watched();
                if event.mask.contains(EventMask::IGNORED) {
                    // The kernel dropped the watch (the folder is gone).
                    if let Some(folder) = watched.folders.remove(&event.wd) {
                        watched.by_folder.retain(|_, wd| *wd != event.wd);
                        paths.push(folder);
                    }
                    return;
                }
                if let Some(folder) = watched.folders.get(&event.wd) {
                    paths.push(match event.name {
                        Some(name) => folder.join(name),
                        None => folder.clone(),
                    });
                }
            };
            take(event);
            // The rest of what is already read, without waiting.
            while let Some(Some(Ok(event))) = futures::FutureExt::now_or_never(events.next()) {
                take(event);
            }
            if !paths.is_empty() {
                return paths;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn next(watch: &AppearWatch) -> Option<Vec<PathBuf>> {
        tokio::time::timeout(Duration::from_secs(2), watch.changed())
            .await
            .ok()
    }

    #[tokio::test]
    async fn hears_names_appear_and_the_folder_go_but_not_writes_inside() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path().join("home");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("daemon.log"), b"first line\n").unwrap();
        let watch = AppearWatch::new().unwrap();
        watch.watch(&folder).unwrap();

        // Writes to a file already there: nothing.
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(folder.join("daemon.log"))
            .unwrap();
        for _ in 0..100 {
            log.write_all(b"another line\n").unwrap();
        }
        drop(log);
        assert_eq!(
            tokio::time::timeout(Duration::from_millis(300), watch.changed())
                .await
                .ok(),
            None,
            "writes inside the folder are not heard"
        );

        // A folder created: heard.
        std::fs::create_dir(folder.join(".claude")).unwrap();
        assert_eq!(next(&watch).await, Some(vec![folder.join(".claude")]));

        // A folder moved in: heard.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::rename(&elsewhere, folder.join(".codex")).unwrap();
        assert_eq!(next(&watch).await, Some(vec![folder.join(".codex")]));

        // The folder itself removed: its own path, and the watch is dropped.
        std::fs::remove_dir_all(&folder).unwrap();
        let mut gone = Vec::new();
        while let Some(paths) = next(&watch).await {
            gone.extend(paths);
            if !watch.is_watching(&folder) {
                break;
            }
        }
        assert!(gone.contains(&folder), "{gone:?}");
        assert!(!watch.is_watching(&folder));
    }

    #[tokio::test]
    async fn a_folder_no_longer_watched_is_not_heard() {
        let tmp = tempfile::tempdir().unwrap();
        let watch = AppearWatch::new().unwrap();
        watch.watch(tmp.path()).unwrap();
        watch.unwatch(tmp.path());
        std::fs::create_dir(tmp.path().join("new")).unwrap();
        assert_eq!(
            tokio::time::timeout(Duration::from_millis(300), watch.changed())
                .await
                .ok(),
            None
        );
    }
}
