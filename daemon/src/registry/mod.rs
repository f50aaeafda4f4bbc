//! The daemon's view of the interface registry: where the layer files are, loading them in order, and (in `watch.rs`) reloading when they change.

pub mod view;
pub mod watch;

use std::path::{Path, PathBuf};

use koru_registry::{load, Layer, LayerSource, Loaded};

/// Which layer files to read besides the built-in one.
#[derive(Debug, Clone, Default)]
pub struct LayerPaths {
    /// `$XDG_CONFIG_HOME/koru/registry.yaml` (or `~/.config/koru/registry.yaml`).
    pub user: Option<PathBuf>,
    /// `.koru/registry.yaml` of a workspace.
    pub project: Option<PathBuf>,
    /// `--registry FILE`.
    pub command_line: Option<PathBuf>,
}

impl LayerPaths {
    /// The standard locations: the user layer, the project layer found from `project_dir`
    /// upwards, and an explicit file.
    pub fn discover(project_dir: Option<&Path>, command_line: Option<&Path>) -> LayerPaths {
        LayerPaths {
            user: user_layer_path(),
            project: project_dir.and_then(find_project_layer),
            command_line: command_line.map(Path::to_path_buf),
        }
    }

    /// The layer files in merge order, with their layer.
    pub fn files(&self) -> Vec<(Layer, &Path)> {
        let mut files = Vec::new();
        if let Some(path) = &self.user {
            files.push((Layer::User, path.as_path()));
        }
        if let Some(path) = &self.project {
            files.push((Layer::Project, path.as_path()));
        }
        if let Some(path) = &self.command_line {
            files.push((Layer::CommandLine, path.as_path()));
        }
        files
    }
}

/// `$XDG_CONFIG_HOME/koru/registry.yaml`, else `$HOME/.config/koru/registry.yaml`.
pub fn user_layer_path() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("koru").join("registry.yaml"))
}

/// The nearest `.koru/registry.yaml` at or above `dir`.
pub fn find_project_layer(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join(".koru").join("registry.yaml"))
        .find(|candidate| candidate.is_file())
}

/// Reads and merges the built-in layer and every layer file that exists. A command-line
/// file that does not exist is an error diagnostic (the user named it); missing user or
/// project files are simply absent.
pub fn load_layers(paths: &LayerPaths) -> Loaded {
    let mut sources = vec![LayerSource::built_in()];
    let mut read_errors = Vec::new();
    for (layer, path) in paths.files() {
        match LayerSource::read(layer, path) {
            Ok(Some(source)) => sources.push(source),
            Ok(None) if layer == Layer::CommandLine => {
                read_errors.push(koru_registry::Diagnostic {
                    file: path.display().to_string(),
                    line: 0,
                    column: 0,
                    message: "no such registry file".into(),
                })
            }
            Ok(None) => {}
            Err(diagnostic) => read_errors.push(diagnostic),
        }
    }
    let mut loaded = load(&sources);
    read_errors.append(&mut loaded.diagnostics);
    loaded.diagnostics = read_errors;
    loaded
}
