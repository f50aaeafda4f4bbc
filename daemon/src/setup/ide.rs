//! The IDE part of `koru setup`: Koru's extension installed through each VS Code-family launcher found (`code`, `codium`, `cursor`, `windsurf`, `antigravity`, `code-server`, the flatpak apps), and Koru's plugin unpacked into each JetBrains IDE's plugins folder (found from its config folders and `product-info.json`).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{Change, Machine, Part, Run, ToolPlan, ToolState, Unpack};

/// The extension's id (`publisher.name` in plugins/vscode/package.json).
pub const EXTENSION_ID: &str = "koru.koru-vscode";
/// The top folder of the JetBrains plugin's zip, and the jar that tells its version.
pub const JETBRAINS_FOLDER: &str = "koru-jetbrains";
const JETBRAINS_JAR: &str = "koru-jetbrains/lib/koru-jetbrains.jar";

/// Where the extension and plugin come from: given on the command line, else built in this
/// repository (when the binary runs from a checkout).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub vsix: Option<PathBuf>,
    pub jetbrains_zip: Option<PathBuf>,
    /// The repository the binary was built from, when it is still there.
    pub repository: Option<PathBuf>,
}

impl Sources {
    /// `--vsix`/`--jetbrains-zip`, with this checkout as the fallback source.
    pub fn new(vsix: Option<PathBuf>, jetbrains_zip: Option<PathBuf>) -> Sources {
        let repository = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .filter(|root| root.join("plugins/vscode/package.json").is_file())
            .map(Path::to_path_buf);
        Sources {
            vsix,
            jetbrains_zip,
            repository,
        }
    }
}

/// A .vsix to install, or how it will be made.
#[derive(Debug, Clone, PartialEq)]
enum Vsix {
    Ready {
        path: PathBuf,
        version: String,
    },
    /// Built from the repository with npm before the installs.
    ToBuild {
        dir: PathBuf,
        path: PathBuf,
        version: String,
    },
    Missing(String),
}

/// The `version` in a package.json text.
fn package_version(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(value.get("version")?.as_str()?.to_string())
}

/// The version of the extension in a .vsix (`extension/package.json`).
pub fn vsix_version(path: &Path) -> Result<String, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| format!("{}: not a .vsix: {e}", path.display()))?;
    let mut text = String::new();
    archive
        .by_name("extension/package.json")
        .map_err(|e| format!("{}: no extension/package.json: {e}", path.display()))?
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: package.json: {e}", path.display()))?;
    let id = format!(
        "{}.{}",
        value["publisher"].as_str().unwrap_or(""),
        value["name"].as_str().unwrap_or("")
    );
    if id != EXTENSION_ID {
        return Err(format!(
            "{}: holds {id}, not Koru's {EXTENSION_ID}",
            path.display()
        ));
    }
    package_version(&text).ok_or_else(|| format!("{}: package.json has no version", path.display()))
}

fn find_vsix(machine: &Machine, sources: &Sources) -> Vsix {
    if let Some(path) = &sources.vsix {
        return match vsix_version(path) {
            Ok(version) => Vsix::Ready {
                path: path.clone(),
                version,
            },
            Err(error) => Vsix::Missing(error),
        };
    }
    let Some(repository) = &sources.repository else {
        return Vsix::Missing("no Koru .vsix: pass --vsix FILE (built in plugins/vscode with `npm ci && npm run package`)".into());
    };
    let dir = repository.join("plugins/vscode");
    let Some(version) = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|t| package_version(&t))
    else {
        return Vsix::Missing(format!("{}: no version in package.json", dir.display()));
    };
    let path = dir.join(format!("koru-vscode-{version}.vsix"));
    if path.is_file() {
        if let Ok(version) = vsix_version(&path) {
            return Vsix::Ready { path, version };
        }
    }
    if machine.which("npm").is_none() {
        return Vsix::Missing(format!(
            "no {} and no npm to build it: pass --vsix FILE",
            path.display()
        ));
    }
    Vsix::ToBuild { dir, path, version }
}

/// A VS Code-family launcher: its title and the command line before its own flags.
#[derive(Debug, Clone)]
struct Launcher {
    key: String,
    title: String,
    command: Vec<String>,
}

fn launchers(machine: &Machine) -> Vec<Launcher> {
    let mut found = Vec::new();
    for (program, title) in [
        ("code", "VS Code"),
        ("code-insiders", "VS Code Insiders"),
        ("codium", "VSCodium"),
        ("code-oss", "Code - OSS"),
        ("cursor", "Cursor"),
        ("windsurf", "Windsurf"),
        ("antigravity", "Antigravity"),
        ("code-server", "code-server"),
    ] {
        if let Some(path) = machine.which(program) {
            found.push(Launcher {
                key: program.into(),
                title: format!("{title} ({program})"),
                command: vec![path.display().to_string()],
            });
        }
    }
    if let Some(flatpak) = machine.which("flatpak") {
        for (app, title) in [
            ("com.visualstudio.code", "VS Code (flatpak)"),
            ("com.vscodium.codium", "VSCodium (flatpak)"),
        ] {
            let installed = [
                machine.data_home().join("flatpak/app").join(app),
                PathBuf::from("/var/lib/flatpak/app").join(app),
            ]
            .iter()
            .any(|dir| dir.is_dir());
            if installed {
                found.push(Launcher {
                    key: format!("flatpak:{app}"),
                    title: title.into(),
                    command: vec![flatpak.display().to_string(), "run".into(), app.into()],
                });
            }
        }
    }
    found
}

/// The version of Koru's extension the launcher lists (`None`: not installed).
fn installed_version(machine: &Machine, launcher: &Launcher) -> Result<Option<String>, String> {
    let output = machine
        .command(&launcher.command[0])
        .args(&launcher.command[1..])
        .args(["--list-extensions", "--show-versions"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", launcher.command.join(" ")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "`{} --list-extensions` failed ({}): {}",
            launcher.command.join(" "),
            output.status,
            stderr.trim().lines().last().unwrap_or("")
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let (id, version) = line.trim().split_once('@')?;
            id.eq_ignore_ascii_case(EXTENSION_ID)
                .then(|| version.to_string())
        }))
}

fn vscode_plans(machine: &Machine, sources: &Sources) -> Vec<ToolPlan> {
    let launchers = launchers(machine);
    if launchers.is_empty() {
        return Vec::new();
    }
    let vsix = find_vsix(machine, sources);
    let mut plans = Vec::new();
    let (path, version) = match &vsix {
        Vsix::Ready { path, version } => (path.clone(), version.clone()),
        Vsix::ToBuild { path, version, .. } => (path.clone(), version.clone()),
        Vsix::Missing(why) => {
            // Nothing to install from: say what is installed, or why nothing can be.
            return launchers
                .into_iter()
                .map(|launcher| {
                    let state = match installed_version(machine, &launcher) {
                        Err(error) => ToolState::Failed { error },
                        Ok(Some(installed)) => ToolState::Current {
                            detail: format!(
                                "{EXTENSION_ID}@{installed} (no .vsix here to compare it with)"
                            ),
                        },
                        Ok(None) => ToolState::Unavailable { why: why.clone() },
                    };
                    ToolPlan {
                        part: Part::Ide,
                        key: format!("ide:{}", launcher.key),
                        tool: launcher.title,
                        state,
                    }
                })
                .collect();
        }
    };
    let mut build = match &vsix {
        Vsix::ToBuild { dir, .. } => Some(ToolPlan {
            part: Part::Ide,
            key: "ide:vsix".into(),
            tool: "Koru's VS Code extension".into(),
            state: ToolState::Changes {
                changes: vec![Change::Run(Run {
                    summary: format!("build {} with npm", machine.show(&path)),
                    argv: vec![
                        vec![
                            "npm".into(),
                            "--prefix".into(),
                            dir.display().to_string(),
                            "ci".into(),
                            "--no-audit".into(),
                            "--no-fund".into(),
                        ],
                        vec![
                            "npm".into(),
                            "--prefix".into(),
                            dir.display().to_string(),
                            "run".into(),
                            "package".into(),
                        ],
                    ],
                    undo: Vec::new(),
                })],
                stale: None,
            },
        }),
        _ => None,
    };
    for launcher in launchers {
        let state = match installed_version(machine, &launcher) {
            Err(error) => ToolState::Failed { error },
            Ok(Some(installed)) if installed == version => ToolState::Current {
                detail: format!("{EXTENSION_ID}@{installed}"),
            },
            Ok(installed) => {
                let mut install = launcher.command.clone();
                install.extend([
                    "--install-extension".into(),
                    path.display().to_string(),
                    "--force".into(),
                ]);
                let mut uninstall = launcher.command.clone();
                uninstall.extend(["--uninstall-extension".into(), EXTENSION_ID.into()]);
                if let Some(build) = build.take() {
                    plans.push(build);
                }
                ToolState::Changes {
                    changes: vec![Change::Run(Run {
                        summary: format!("install {EXTENSION_ID}@{version}"),
                        argv: vec![install],
                        undo: vec![uninstall],
                    })],
                    stale: installed.map(|v| format!("{EXTENSION_ID}@{v} is installed")),
                }
            }
        };
        plans.push(ToolPlan {
            part: Part::Ide,
            key: format!("ide:{}", launcher.key),
            tool: launcher.title,
            state,
        });
    }
    plans
}

/// A JetBrains IDE version: its title and the `dataDirectoryName` its folders are named by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct JetBrainsIde {
    pub selector: String,
    pub title: String,
}

fn product_info(path: &Path) -> Option<JetBrainsIde> {
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let selector = value.get("dataDirectoryName")?.as_str()?.to_string();
    let name = value
        .get("name")
        .and_then(|v| v.as_str())
        .unwrap_or("JetBrains IDE");
    let version = value.get("version").and_then(|v| v.as_str()).unwrap_or("");
    Some(JetBrainsIde {
        title: format!("{name} {version}").trim().to_string(),
        selector,
    })
}

/// `product-info.json` files up to `depth` folders below `dir`.
fn product_infos(dir: &Path, depth: usize, found: &mut Vec<JetBrainsIde>) {
    let info = dir.join("product-info.json");
    if let Some(ide) = product_info(&info) {
        found.push(ide);
        return;
    }
    if depth == 0 {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                product_infos(&entry.path(), depth - 1, found);
            }
        }
    }
}

/// The JetBrains IDEs on this machine: installs with a `product-info.json` (Toolbox apps,
/// `/opt`, snaps, `~/`), and IDE versions that have run (a config folder with `options/`).
pub fn jetbrains_ides(machine: &Machine) -> Vec<JetBrainsIde> {
    let mut found = Vec::new();
    product_infos(
        &machine.data_home().join("JetBrains/Toolbox/apps"),
        4,
        &mut found,
    );
    product_infos(Path::new("/opt"), 2, &mut found);
    product_infos(Path::new("/snap"), 3, &mut found);
    product_infos(&machine.home, 1, &mut found);
    if let Ok(entries) = std::fs::read_dir(machine.config_home().join("JetBrains")) {
        for entry in entries.flatten() {
            let selector = entry.file_name().to_string_lossy().into_owned();
            if entry.path().join("options").is_dir()
                && !found.iter().any(|i| i.selector == selector)
            {
                found.push(JetBrainsIde {
                    title: selector.clone(),
                    selector,
                });
            }
        }
    }
    found.sort();
    found.dedup_by(|a, b| a.selector == b.selector);
    found
}

/// The folder an IDE loads plugins from: `idea.plugins.path` in the IDE's
/// `idea.properties` when set, else `$XDG_DATA_HOME/JetBrains/<selector>`.
pub fn plugins_dir(machine: &Machine, selector: &str) -> PathBuf {
    let properties = machine
        .config_home()
        .join("JetBrains")
        .join(selector)
        .join("idea.properties");
    if let Ok(text) = std::fs::read_to_string(properties) {
        for line in text.lines() {
            let line = line.trim();
            if let Some(value) = line.strip_prefix("idea.plugins.path").map(str::trim_start) {
                if let Some(value) = value.strip_prefix('=').or_else(|| value.strip_prefix(':')) {
                    let value = value
                        .trim()
                        .replace("${user.home}", &machine.home.display().to_string());
                    return PathBuf::from(value);
                }
            }
        }
    }
    machine.data_home().join("JetBrains").join(selector)
}

/// The SHA-256 of one file in a zip.
fn zip_entry_digest(archive: &Path, name: &str) -> Result<String, String> {
    use sha2::Digest;
    let file = std::fs::File::open(archive)
        .map_err(|e| format!("cannot read {}: {e}", archive.display()))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|e| format!("{}: not a zip: {e}", archive.display()))?;
    let mut bytes = Vec::new();
    zip.by_name(name)
        .map_err(|_| {
            format!(
                "{}: no {name}: not Koru's JetBrains plugin",
                archive.display()
            )
        })?
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", archive.display()))?;
    Ok(format!("{:x}", sha2::Sha256::digest(&bytes)))
}

fn file_digest(path: &Path) -> Option<String> {
    use sha2::Digest;
    Some(format!(
        "{:x}",
        sha2::Sha256::digest(std::fs::read(path).ok()?)
    ))
}

fn find_jetbrains_zip(sources: &Sources) -> Result<PathBuf, String> {
    if let Some(path) = &sources.jetbrains_zip {
        return Ok(path.clone());
    }
    let build = sources
        .repository
        .as_ref()
        .map(|r| r.join("plugins/jetbrains/build"))
        .ok_or("no Koru JetBrains plugin: pass --jetbrains-zip FILE")?;
    std::fs::read_dir(&build)
        .ok()
        .and_then(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("koru-jetbrains-") && n.ends_with(".zip"))
                })
                .max()
        })
        .ok_or_else(|| {
            format!(
                "no plugin zip in {}: build it with plugins/jetbrains/build.sh, or pass --jetbrains-zip FILE",
                build.display()
            )
        })
}

fn jetbrains_plans(machine: &Machine, sources: &Sources) -> Vec<ToolPlan> {
    let ides = jetbrains_ides(machine);
    if ides.is_empty() {
        return Vec::new();
    }
    let archive = find_jetbrains_zip(sources)
        .and_then(|zip| zip_entry_digest(&zip, JETBRAINS_JAR).map(|digest| (zip, digest)));
    ides.into_iter()
        .map(|ide| {
            let into = plugins_dir(machine, &ide.selector);
            let state = match &archive {
                Err(why) => ToolState::Unavailable { why: why.clone() },
                Ok((zip, digest)) => {
                    let jar = into.join(JETBRAINS_JAR);
                    let installed = file_digest(&jar);
                    if installed.as_deref() == Some(digest.as_str()) {
                        ToolState::Current {
                            detail: machine.show(&into.join(JETBRAINS_FOLDER)),
                        }
                    } else {
                        ToolState::Changes {
                            changes: vec![Change::Unpack(Unpack {
                                summary: format!(
                                    "unpack {} into {} (the IDE loads it at its next start)",
                                    machine.show(zip),
                                    machine.show(&into)
                                ),
                                archive: zip.clone(),
                                into,
                                folder: JETBRAINS_FOLDER.into(),
                            })],
                            stale: installed.map(|_| "another build of the plugin is there".into()),
                        }
                    }
                }
            };
            ToolPlan {
                part: Part::Ide,
                key: format!("ide:jetbrains:{}", ide.selector),
                tool: ide.title,
                state,
            }
        })
        .collect()
}

/// A plan for each IDE found.
pub fn plan(machine: &Machine, sources: &Sources) -> Vec<ToolPlan> {
    let mut plans = vscode_plans(machine, sources);
    plans.extend(jetbrains_plans(machine, sources));
    plans
}

/// Unpacks `unpack.folder` of the archive into `unpack.into`: into a fresh folder beside the
/// target first, then renamed into place, so an IDE never sees half a plugin.
pub fn unpack(unpack: &Unpack) -> Result<(), String> {
    let file = std::fs::File::open(&unpack.archive)
        .map_err(|e| format!("cannot read {}: {e}", unpack.archive.display()))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|e| format!("{}: {e}", unpack.archive.display()))?;
    std::fs::create_dir_all(&unpack.into).map_err(|e| format!("{}: {e}", unpack.into.display()))?;
    let staging = unpack
        .into
        .join(format!(".{}.koru-{}", unpack.folder, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let prefix = format!("{}/", unpack.folder);
    for index in 0..zip.len() {
        let mut entry = zip.by_index(index).map_err(|e| e.to_string())?;
        let Some(name) = entry.enclosed_name() else {
            return Err(format!(
                "{}: an entry escapes the archive",
                unpack.archive.display()
            ));
        };
        let Ok(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let target = staging.join(rest);
        if entry.is_dir() {
            std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        let mut out =
            std::fs::File::create(&target).map_err(|e| format!("{}: {e}", target.display()))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| format!("{}: {e}", target.display()))?;
    }
    let target = unpack.into.join(&unpack.folder);
    std::fs::rename(&staging, &target).map_err(|e| {
        let _ = std::fs::remove_dir_all(&staging);
        format!("{}: {e}", target.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    pub fn plugin_zip(path: &Path, jar: &[u8]) {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default();
        zip.add_directory("koru-jetbrains/lib/", options).unwrap();
        zip.start_file(JETBRAINS_JAR, options).unwrap();
        zip.write_all(jar).unwrap();
        zip.start_file("koru-jetbrains/lib/gson.jar", options)
            .unwrap();
        zip.write_all(b"gson").unwrap();
        zip.finish().unwrap();
    }

    #[test]
    fn jetbrains_ides_are_found_by_product_info_and_config_folders() {
        let home = tempfile::tempdir().unwrap();
        let m = Machine::with_vars(home.path(), Path::new("/opt/koru"), &[("PATH", "")]);
        let toolbox = home
            .path()
            .join(".local/share/JetBrains/Toolbox/apps/intellij-idea-ultimate");
        std::fs::create_dir_all(&toolbox).unwrap();
        std::fs::write(
            toolbox.join("product-info.json"),
            r#"{"name": "IntelliJ IDEA", "version": "2024.3", "productCode": "IU", "dataDirectoryName": "IntelliJIdea2024.3"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(home.path().join(".config/JetBrains/PyCharm2024.2/options"))
            .unwrap();
        std::fs::create_dir_all(home.path().join(".config/JetBrains/consentOptions")).unwrap();
        let ides: Vec<_> = jetbrains_ides(&m)
            .into_iter()
            .filter(|i| !i.selector.is_empty())
            .collect();
        let mine: Vec<_> = ides
            .iter()
            .filter(|i| ["IntelliJIdea2024.3", "PyCharm2024.2"].contains(&i.selector.as_str()))
            .map(|i| (i.selector.as_str(), i.title.as_str()))
            .collect();
        assert_eq!(
            mine,
            [
                ("IntelliJIdea2024.3", "IntelliJ IDEA 2024.3"),
                ("PyCharm2024.2", "PyCharm2024.2")
            ]
        );
        assert_eq!(
            plugins_dir(&m, "PyCharm2024.2"),
            home.path().join(".local/share/JetBrains/PyCharm2024.2")
        );
        std::fs::write(
            home.path()
                .join(".config/JetBrains/PyCharm2024.2/idea.properties"),
            "# mine\nidea.plugins.path=${user.home}/pyplugins\n",
        )
        .unwrap();
        assert_eq!(
            plugins_dir(&m, "PyCharm2024.2"),
            home.path().join("pyplugins")
        );
    }

    #[test]
    fn the_plugin_is_unpacked_whole_and_counts_as_current_after() {
        let home = tempfile::tempdir().unwrap();
        let m = Machine::with_vars(home.path(), Path::new("/opt/koru"), &[("PATH", "")]);
        std::fs::create_dir_all(home.path().join(".config/JetBrains/GoLand2024.3/options"))
            .unwrap();
        let zip = home.path().join("koru-jetbrains-0.1.0.zip");
        plugin_zip(&zip, b"jar bytes");
        let sources = Sources {
            jetbrains_zip: Some(zip.clone()),
            ..Sources::default()
        };
        let plans: Vec<_> = jetbrains_plans(&m, &sources)
            .into_iter()
            .filter(|p| p.key == "ide:jetbrains:GoLand2024.3")
            .collect();
        let ToolState::Changes { changes, .. } = &plans[0].state else {
            panic!("{:?}", plans[0].state)
        };
        let Change::Unpack(step) = &changes[0] else {
            panic!()
        };
        unpack(step).unwrap();
        let dir = home
            .path()
            .join(".local/share/JetBrains/GoLand2024.3/koru-jetbrains/lib");
        assert_eq!(
            std::fs::read(dir.join("koru-jetbrains.jar")).unwrap(),
            b"jar bytes"
        );
        assert_eq!(std::fs::read(dir.join("gson.jar")).unwrap(), b"gson");
        let again: Vec<_> = jetbrains_plans(&m, &sources)
            .into_iter()
            .filter(|p| p.key == "ide:jetbrains:GoLand2024.3")
            .collect();
        assert!(
            matches!(again[0].state, ToolState::Current { .. }),
            "{:?}",
            again[0].state
        );
        // Another build of the plugin: replaced.
        plugin_zip(&zip, b"newer jar");
        let newer: Vec<_> = jetbrains_plans(&m, &sources)
            .into_iter()
            .filter(|p| p.key == "ide:jetbrains:GoLand2024.3")
            .collect();
        assert!(matches!(
            &newer[0].state,
            ToolState::Changes { stale: Some(_), .. }
        ));
    }

    /// A stand-in for a VS Code-family launcher (no VS Code here): answers
    /// `--list-extensions --show-versions` with `listed`.
    fn fake_launcher(bin: &Path, name: &str, listed: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\nprintf '{listed}'\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn without_a_vsix_one_is_built_first_when_npm_is_there_and_an_installed_one_is_reported() {
        let home = tempfile::tempdir().unwrap();
        let bin = home.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let repository = home.path().join("repo");
        std::fs::create_dir_all(repository.join("plugins/vscode")).unwrap();
        std::fs::write(
            repository.join("plugins/vscode/package.json"),
            r#"{"name": "koru-vscode", "publisher": "koru", "version": "0.3.0"}"#,
        )
        .unwrap();
        fake_launcher(&bin, "codium", "ms-python.python@2025.1.0\\n");
        let path = bin.display().to_string();
        let m = Machine::with_vars(home.path(), Path::new("/opt/koru"), &[("PATH", &path)]);
        let sources = Sources {
            repository: Some(repository.clone()),
            ..Sources::default()
        };
        // No npm: nothing to install from, and nothing installed.
        let plans = vscode_plans(&m, &sources);
        let ToolState::Unavailable { why } = &plans[0].state else {
            panic!("{:?}", plans[0].state)
        };
        assert!(
            why.contains("koru-vscode-0.3.0.vsix and no npm to build it: pass --vsix FILE"),
            "{why}"
        );
        // With npm: the build is a step of the plan, before the install.
        fake_launcher(&bin, "npm", "");
        let plans = vscode_plans(&m, &sources);
        let keys: Vec<_> = plans.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["ide:vsix", "ide:codium"]);
        let ToolState::Changes { changes, .. } = &plans[1].state else {
            panic!("{:?}", plans[1].state)
        };
        let Change::Run(run) = &changes[0] else {
            panic!()
        };
        assert_eq!(
            run.argv[0][1..],
            [
                "--install-extension".to_string(),
                repository
                    .join("plugins/vscode/koru-vscode-0.3.0.vsix")
                    .display()
                    .to_string(),
                "--force".to_string()
            ]
        );
        assert_eq!(run.undo[0][1..], ["--uninstall-extension", EXTENSION_ID]);
        // Installed already, in this version: current, and no build.
        fake_launcher(&bin, "codium", "koru.koru-vscode@0.3.0\\n");
        let plans = vscode_plans(&m, &sources);
        assert_eq!(plans.len(), 1);
        assert!(
            matches!(plans[0].state, ToolState::Current { .. }),
            "{:?}",
            plans[0].state
        );
        // An older one: stale.
        fake_launcher(&bin, "codium", "koru.koru-vscode@0.2.0\\n");
        let ToolState::Changes { stale, .. } = &vscode_plans(&m, &sources)[1].state else {
            panic!()
        };
        assert_eq!(
            stale.as_deref(),
            Some("koru.koru-vscode@0.2.0 is installed")
        );
    }
}
