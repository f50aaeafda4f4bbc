//! `koru host add NAME ssh://… | ls | rm NAME`: the named hosts of `hosts.yaml`, which `--host NAME` resolves.

use std::process::ExitCode;

use anyhow::{bail, Context};

use super::HostCommand;
use crate::control::hosts::{check_host_name, HostChoice, HostEntry, HostsFile, SshUrl};
use crate::table::render;

pub fn run(command: HostCommand, choice: &HostChoice) -> anyhow::Result<ExitCode> {
    if !choice.requested.is_empty() {
        bail!("`koru host` edits this machine's list of hosts; it takes no --host");
    }
    let path = &choice.hosts_file;
    let mut file = HostsFile::load(path)?;
    match command {
        HostCommand::Add {
            name,
            url,
            koru,
            force,
        } => {
            check_host_name(&name)?;
            let parsed = SshUrl::parse(&url)?;
            if file.hosts.contains_key(&name) && !force {
                bail!(
                    "a host named {name:?} exists ({}); `koru host rm {name}` first, or add --force",
                    file.hosts[&name].url
                );
            }
            file.hosts.insert(
                name.clone(),
                HostEntry {
                    url: parsed.to_string(),
                    ssh_options: choice.ssh_options.clone(),
                    koru,
                },
            );
            file.save(path)?;
            println!("{name} → {parsed} (in {})", path.display());
        }
        HostCommand::Ls { json } => {
            if json {
                super::commands::print_json(&file.hosts)?;
            } else if file.hosts.is_empty() {
                println!(
                    "no named hosts ({}); add one with `koru host add NAME ssh://[user@]host[:port]`",
                    path.display()
                );
            } else {
                let rows: Vec<Vec<String>> = file
                    .hosts
                    .iter()
                    .map(|(name, entry)| {
                        vec![
                            name.clone(),
                            entry.url.clone(),
                            entry.ssh_options.join(" "),
                            entry.koru.clone().unwrap_or_else(|| "koru".into()),
                        ]
                    })
                    .collect();
                print!("{}", render(&["NAME", "URL", "SSH OPTIONS", "KORU"], &rows));
            }
        }
        HostCommand::Rm { name } => {
            file.hosts
                .remove(&name)
                .with_context(|| format!("no host named {name:?} in {}", path.display()))?;
            file.save(path)?;
            println!("{name} removed");
        }
    }
    Ok(ExitCode::SUCCESS)
}
