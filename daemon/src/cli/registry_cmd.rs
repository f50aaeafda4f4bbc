//! `koru registry validate|show|schema`: check layer files, show the merged registry with the layer each value came from, print the file schema.

use super::commands::print_json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use koru_registry::{Layer, LayerSource, Loaded};

use crate::registry::view::RegistryView;
use crate::registry::{load_layers, LayerPaths};
use crate::table::render;

/// `koru registry validate [FILE]`: every layer (or built-in + FILE); exit 1 with diagnostics.
pub fn validate(file: Option<&Path>, layers: &LayerPaths) -> anyhow::Result<ExitCode> {
    let loaded = match file {
        Some(file) => {
            let mut sources = vec![LayerSource::built_in()];
            match LayerSource::read(Layer::CommandLine, file) {
                Ok(Some(source)) => sources.push(source),
                Ok(None) => {
                    println!("{}: no such file", file.display());
                    return Ok(ExitCode::FAILURE);
                }
                Err(diagnostic) => {
                    println!("{diagnostic}");
                    return Ok(ExitCode::FAILURE);
                }
            }
            koru_registry::load(&sources)
        }
        None => load_layers(layers),
    };
    let layer_names = describe_layers(&loaded);
    if loaded.is_clean() {
        println!(
            "registry ok: {} interfaces from {}",
            loaded.registry.interfaces().len(),
            layer_names
        );
        return Ok(ExitCode::SUCCESS);
    }
    for diagnostic in &loaded.diagnostics {
        println!("{diagnostic}");
    }
    println!(
        "{} problem{} found (layers read: {layer_names})",
        loaded.diagnostics.len(),
        if loaded.diagnostics.len() == 1 {
            ""
        } else {
            "s"
        }
    );
    Ok(ExitCode::FAILURE)
}

fn describe_layers(loaded: &Loaded) -> String {
    loaded
        .registry
        .layers
        .iter()
        .map(|l| match l.layer {
            Layer::BuiltIn => "built-in".to_string(),
            layer => format!(
                "{} {}{}",
                layer.as_str(),
                l.file,
                if l.applied {
                    ""
                } else {
                    " (left out: has errors)"
                }
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `koru registry show [--json] [ID]`.
pub fn show(id: Option<&str>, json: bool, layers: &LayerPaths) -> anyhow::Result<ExitCode> {
    let loaded = load_layers(layers);
    for diagnostic in &loaded.diagnostics {
        eprintln!("warning: {diagnostic}");
    }
    let registry = &loaded.registry;
    let entry = |interface: &koru_registry::Interface| {
        serde_json::json!({
            "interface": interface,
            "origins": registry.origins(&interface.id),
        })
    };
    if let Some(id) = id {
        let Some(interface) = registry.get(id) else {
            let known: Vec<&str> = registry
                .interfaces()
                .iter()
                .map(|i| i.id.as_str())
                .collect();
            anyhow::bail!("no interface `{id}`; known: {}", known.join(", "));
        };
        if json {
            print_json(&entry(interface))?;
        } else {
            print_one(interface, registry);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if json {
        print_json(&RegistryView::of(&loaded))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("layers: {}", describe_layers(&loaded));
    let rows: Vec<Vec<String>> = registry
        .interfaces()
        .iter()
        .map(|i| {
            let layers: std::collections::BTreeSet<&str> = registry
                .origins(&i.id)
                .map(|o| o.values().map(|origin| origin.layer.as_str()).collect())
                .unwrap_or_default();
            vec![
                i.id.clone(),
                i.family.to_string(),
                i.route.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
                i.authority.to_string(),
                i.verification.mode.to_string(),
                if i.enabled { "yes" } else { "no" }.into(),
                layers.into_iter().collect::<Vec<_>>().join("+"),
            ]
        })
        .collect();
    print!(
        "{}",
        render(
            &[
                "ID",
                "FAMILY",
                "ROUTE",
                "AUTHORITY",
                "VERIFICATION",
                "ENABLED",
                "LAYERS"
            ],
            &rows
        )
    );
    Ok(ExitCode::SUCCESS)
}

fn print_one(interface: &koru_registry::Interface, registry: &koru_registry::Registry) {
    let value = serde_json::to_value(interface).unwrap_or_default();
    let origins = registry.origins(&interface.id);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", interface.id);
    if let serde_json::Value::Object(fields) = value {
        for (field, value) in fields {
            let from = origins
                .and_then(|o| o.get(&field))
                .map(|o| {
                    if o.layer == Layer::BuiltIn {
                        "built-in".to_string()
                    } else {
                        format!("{} {}:{}:{}", o.layer.as_str(), o.file, o.line, o.column)
                    }
                })
                .unwrap_or_else(|| "default".into());
            let _ = writeln!(out, "  {field}: {value}    # from {from}");
        }
    }
}

/// `koru registry schema`.
pub fn schema() -> anyhow::Result<ExitCode> {
    print_json(&koru_registry::file_schema())?;
    Ok(ExitCode::SUCCESS)
}

/// The layer paths a CLI command uses: user, the project found from the current
/// directory, and `--registry`.
pub fn cli_layer_paths(registry_file: Option<&PathBuf>) -> LayerPaths {
    let cwd = std::env::current_dir().ok();
    LayerPaths::discover(cwd.as_deref(), registry_file.map(PathBuf::as_path))
}
