//! Reloading the registry while the daemon runs: notify watches the layer files' directories (debounced), SIGHUP forces a reload, and each reload is handed to the state machine.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{load_layers, LayerPaths};

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
        let mut this = RegistryWatcher {
            paths,
            targets,
            watched: BTreeSet::new(),
            watcher,
            changed_rx,
        };
        this.arm();
        this
    }

    /// Watches every layer directory that exists and is not watched yet.
    fn arm(&mut self) {
        let Some(watcher) = self.watcher.as_mut() else {
            return;
        };
        for dir in directories_to_watch(&self.targets) {
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

/// Each target's directory if it exists, else its nearest existing ancestor (so the
/// directory's creation is seen).
fn directories_to_watch(targets: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = BTreeSet::new();
    for target in targets {
        if let Some(existing) = target
            .parent()
            .and_then(|p| p.ancestors().find(|a| a.is_dir()))
        {
            dirs.insert(existing.to_path_buf());
        }
    }
    dirs.into_iter().collect()
}
