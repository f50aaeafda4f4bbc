//! Building a doctor report for any face (`koru doctor`, MCP `doctor`, `GET /api/v1/doctor`, the re-probe recovery): gather the facts, load each session's project layer, evaluate.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use super::{evaluate, probe, DoctorReport, Inputs};
use crate::registry::{find_project_layer, load_layers, LayerPaths};

/// Gathers facts and evaluates them: the report `koru doctor` prints (and the MCP `doctor` tool summarises).
pub async fn build_report(
    socket: &Path,
    only: &[String],
    timeout: Duration,
    layers: &LayerPaths,
) -> anyhow::Result<DoctorReport> {
    let loaded = load_layers(layers);
    let known: Vec<&str> = loaded
        .registry
        .interfaces()
        .iter()
        .map(|i| i.id.as_str())
        .collect();
    for id in only {
        if !known.contains(&id.as_str()) {
            anyhow::bail!(
                "--only {id}: no such interface; known: {}",
                known.join(", ")
            );
        }
    }
    let facts = probe::gather(&loaded.registry, socket, timeout).await;

    // Each session's own project layer, if its workspace has one.
    let mut session_registries = HashMap::new();
    for session in &facts.daemon.sessions {
        let project = session
            .window
            .workspace_folders
            .iter()
            .find_map(|folder| find_project_layer(Path::new(folder)));
        if let Some(project) = project {
            if Some(&project) == layers.project.as_ref() {
                continue;
            }
            let paths = LayerPaths {
                project: Some(project.clone()),
                ..layers.clone()
            };
            let session_loaded = load_layers(&paths);
            session_registries.insert(
                session.session_id.clone(),
                (session_loaded.registry, project.display().to_string()),
            );
        }
    }

    let report = evaluate(&Inputs {
        registry: &loaded.registry,
        registry_diagnostics: loaded.diagnostics.iter().map(|d| d.to_string()).collect(),
        facts: &facts,
        session_registries,
        only: only.to_vec(),
    });
    Ok(report)
}
