//! Reloading the registry while the daemon runs: notify watches the layer files' directories (debounced), SIGHUP forces a reload, and each reload is handed to the state machine.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{load_layers, LayerPaths};
use crate::appear_watch::AppearWatch;

/// How long to wait after a change before reloading, so an editor's burst of writes
/// becomes one reload.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// The file watch, set up before the daemon accepts connections so that no change made
/// after start-up is missed.
pub struct RegistryWatcher {
    paths: LayerPaths,
    targets: Vec<PathBuf>,
    watched: BTreeSet<PathBuf>,
    watcher: Option<notify::RecommendedWatcher>,
    changed_rx: mpsc::UnboundedReceiver<()>,
    /// Ancestors of missing layer folders, watched only for names appearing (they are
    /// often busy folders whose writes are none of our business).
    appear: Option<AppearWatch>,
    appear_watched: BTreeSet<PathBuf>,
}

impl RegistryWatcher {
    /// Starts watching the layer files' directories now.
    pub fn start(paths: LayerPaths) -> RegistryWatcher {
        let (changed_tx, changed_rx) = mpsc::unbounded_channel::<()>();
        let targets: Vec<PathBuf> = paths.files().iter().map(|(_, p)| p.to_path_buf()).collect();
        let handler_targets = targets.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = event {
                // Reading a layer opens and closes it: those access events would make
                // every reload start the next one. A writer closing the file counts.
                use notify::event::{AccessKind, AccessMode, EventKind};
                if matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write))
                {
                    return;
                }
                let relevant = event.paths.iter().any(|changed| {
                    handler_targets
                        .iter()
                        .any(|target| changed == target || target.starts_with(changed))
                });
                if relevant {
                    let _ = changed_tx.send(());
                }
            }
        });
        let watcher = match watcher {
            Ok(watcher) => Some(watcher),
            Err(err) => {
                tracing::warn!(error = %err, "cannot watch registry files; reload with SIGHUP");
                None
            }
        };
        let appear = match AppearWatch::new() {
            Ok(appear) => Some(appear),
            Err(err) => {
                tracing::warn!(error = %err, "cannot watch for registry folders to appear; reload with SIGHUP");
                None
            }
        };
        let mut this = RegistryWatcher {
            paths,
            targets,
            watched: BTreeSet::new(),
            watcher,
            changed_rx,
            appear,
            appear_watched: BTreeSet::new(),
        };
        this.arm();
        this
    }

    /// Watches every layer directory that exists and is not watched yet (every change
    /// there), and the nearest existing folder above each missing one (only for names
    /// appearing there).
    fn arm(&mut self) {
        let (layer_dirs, ancestors) = directories_to_watch(&self.targets);
        if let Some(watcher) = self.watcher.as_mut() {
            for dir in layer_dirs {
                if self.watched.contains(&dir) {
                    continue;
                }
                match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        tracing::debug!(dir = %dir.display(), "watching for registry changes");
                        self.watched.insert(dir);
                    }
                    Err(err) => {
                        tracing::warn!(dir = %dir.display(), error = %err, "cannot watch a registry directory")
                    }
                }
            }
        }
        if let Some(appear) = self.appear.as_ref() {
            for gone in self.appear_watched.difference(&ancestors) {
                appear.unwatch(gone);
            }
            self.appear_watched.retain(|dir| ancestors.contains(dir));
            for dir in ancestors {
                if self.appear_watched.contains(&dir) && appear.is_watching(&dir) {
                    continue;
                }
                match appear.watch(&dir) {
                    Ok(()) => {
                        tracing::debug!(dir = %dir.display(), "watching for a registry folder to appear");
                        self.appear_watched.insert(dir);
                    }
                    Err(err) => {
                        tracing::warn!(dir = %dir.display(), error = %err, "cannot watch for a registry folder to appear")
                    }
                }
            }
        }
    }

    /// Whether a path that appeared (or a watched ancestor that went away) is on the way to
    /// a layer file.
    fn leads_to_a_layer(&self, appeared: &[PathBuf]) -> bool {
        appeared.iter().any(|changed| {
            self.targets
                .iter()
                .any(|target| changed == target || target.starts_with(changed))
        })
    }
}

/// The registry layers, read again after a change or SIGHUP (the daemon loop turns it into
/// its own event; this room does not know that event).
#[derive(Debug)]
pub struct RegistryReloaded {
    pub loaded: Box<koru_registry::Loaded>,
}

/// Reports [`RegistryReloaded`] on every change of a layer file and on SIGHUP, until
/// `shutdown`.
pub async fn run<E: From<RegistryReloaded>>(
    mut watch: RegistryWatcher,
    events: mpsc::Sender<E>,
    shutdown: CancellationToken,
) {
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch SIGHUP");
            None
        }
    };
    loop {
        let reason = tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(()) = watch.changed_rx.recv() => {
                // Debounce: swallow the rest of the burst.
                tokio::time::sleep(DEBOUNCE).await;
                while watch.changed_rx.try_recv().is_ok() {}
                "a registry file changed"
            }
            appeared = async { match watch.appear.as_ref() { Some(a) => a.changed().await, None => std::future::pending().await } } => {
                if !watch.leads_to_a_layer(&appeared) {
                    // Something else appeared in a folder above a missing layer folder; a
                    // watched folder that went away is watched again further up.
                    watch.arm();
                    continue;
                }
                tokio::time::sleep(DEBOUNCE).await;
                while watch.changed_rx.try_recv().is_ok() {}
                "a registry folder appeared"
            }
            Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
        };
        // A layer directory created after start (e.g. ~/.config/koru) gets watched now.
        watch.arm();
        let loaded = tokio::task::spawn_blocking({
            let paths = watch.paths.clone();
            move || load_layers(&paths)
        })
        .await;
        let Ok(loaded) = loaded else { continue };
        tracing::info!(
            reason,
            diagnostics = loaded.diagnostics.len(),
            "registry reloaded"
        );
        if events
            .send(E::from(RegistryReloaded {
                loaded: Box::new(loaded),
            }))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Each target's directory that exists (every change there counts), and for each one that
/// does not, its nearest existing ancestor (so the directory's creation is seen).
fn directories_to_watch(targets: &[PathBuf]) -> (BTreeSet<PathBuf>, BTreeSet<PathBuf>) {
    let mut dirs = BTreeSet::new();
    let mut ancestors = BTreeSet::new();
    for target in targets {
        let Some(dir) = target.parent() else { continue };
        if dir.is_dir() {
            dirs.insert(dir.to_path_buf());
        } else if let Some(existing) = dir.ancestors().find(|a| a.is_dir()) {
            ancestors.insert(existing.to_path_buf());
        }
    }
    // A folder that is a layer directory is heard whole already.
    ancestors.retain(|a| !dirs.contains(a));
    (dirs, ancestors)
}
