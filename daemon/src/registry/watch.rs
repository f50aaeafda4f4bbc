//! Reloading the registry while the daemon runs: notify watches the layer files' directories (debounced), SIGHUP forces a reload, and each reload is handed to the state machine.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{load_layers, LayerPaths};
use crate::app::DaemonEvent;

/// How long to wait after a change before reloading, so an editor's burst of writes
/// becomes one reload.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// Watches the layer files and sends `RegistryChanged` on every change and on SIGHUP,
/// until `shutdown`.
pub async fn run(
    paths: LayerPaths,
    events: mpsc::Sender<DaemonEvent>,
    shutdown: CancellationToken,
) {
    let (changed_tx, mut changed_rx) = mpsc::unbounded_channel::<()>();
    let targets: Vec<PathBuf> = paths.files().iter().map(|(_, p)| p.to_path_buf()).collect();
    let watch_dirs = directories_to_watch(&targets);
    let handler_targets = targets.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
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
    let mut watcher = match watcher {
        Ok(watcher) => Some(watcher),
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch registry files; reload with SIGHUP");
            None
        }
    };
    if let Some(watcher) = watcher.as_mut() {
        for dir in &watch_dirs {
            if let Err(err) = watcher.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %dir.display(), error = %err, "cannot watch a registry directory");
            } else {
                tracing::debug!(dir = %dir.display(), "watching for registry changes");
            }
        }
    }
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(err) => {
            tracing::warn!(error = %err, "cannot watch SIGHUP");
            None
        }
    };
    let mut watched: BTreeSet<PathBuf> = watch_dirs.into_iter().collect();
    loop {
        let reason = tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(()) = changed_rx.recv() => {
                // Debounce: swallow the rest of the burst.
                tokio::time::sleep(DEBOUNCE).await;
                while changed_rx.try_recv().is_ok() {}
                "a registry file changed"
            }
            Some(()) = async { match hangup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
        };
        // A layer directory created after start (e.g. ~/.config/koru) gets watched now.
        if let Some(watcher) = watcher.as_mut() {
            for dir in directories_to_watch(&targets) {
                if !watched.contains(&dir)
                    && watcher.watch(&dir, RecursiveMode::NonRecursive).is_ok()
                {
                    watched.insert(dir);
                }
            }
        }
        let loaded = tokio::task::spawn_blocking({
            let paths = paths.clone();
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
            .send(DaemonEvent::RegistryChanged {
                loaded: Box::new(loaded),
            })
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
