//! `koru recover ACTION`: runs one recovery action through the daemon (the same actions as the dashboard's buttons and the MCP tool `recover`) and says what it did.

use std::process::ExitCode;

use anyhow::anyhow;
use koru_protocol::{RecoveryAction, Route};

use super::RecoverArgs;
use crate::control::hosts::HostChoice;
use crate::recovery::ArgumentError;

/// Routes by their wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum RouteName {
    NativeSend,
    PluginDrive,
    OsInjection,
}

impl From<RouteName> for Route {
    fn from(route: RouteName) -> Route {
        match route {
            RouteName::NativeSend => Route::NativeSend,
            RouteName::PluginDrive => Route::PluginDrive,
            RouteName::OsInjection => Route::OsInjection,
        }
    }
}

/// The protocol action for the command line's arguments, or what is missing.
pub fn action_of(args: &RecoverArgs) -> anyhow::Result<RecoveryAction> {
    let name = args.action.wire();
    args.action
        .with(
            args.drive.clone(),
            args.session.clone(),
            args.route.map(Route::from),
        )
        .map_err(|error| match error {
            ArgumentError::MissingDrive => {
                anyhow!("{name} needs --drive ID (`koru drives` lists them)")
            }
            ArgumentError::MissingSession => {
                anyhow!("{name} needs --session ID (`koru sessions` lists them)")
            }
            ArgumentError::RouteNotApplicable => anyhow!("--route only applies to retry_drive"),
        })
}

pub async fn run(choice: &HostChoice, mut args: RecoverArgs) -> anyhow::Result<ExitCode> {
    // A qualified `--drive HOST/d_…` or `--session HOST/s_…` names the host.
    let named = args.drive.clone().or_else(|| args.session.clone());
    let host = match named {
        Some(id) => {
            let (host, _) = super::commands::host_of_id(choice, &id, "recover")?;
            for id in [&mut args.drive, &mut args.session].into_iter().flatten() {
                let (other, bare) = super::commands::host_of_id(choice, id, "recover")?;
                if other.name != host.name {
                    anyhow::bail!(
                        "--drive and --session name different hosts ({} and {})",
                        host.name,
                        other.name
                    );
                }
                *id = bare;
            }
            host
        }
        None => super::commands::single_host(choice, "recover")?,
    };
    let action = action_of(&args)?;
    let mut client = super::commands::connect(&host).await?;
    let result = client.run_recovery(action).await;
    client.close().await;
    let result = result?;
    if args.json {
        super::commands::print_json(&result)?;
    } else if result.ok {
        println!("{}", result.summary);
        if let Some(drive) = &result.drive {
            println!("{} {}", drive.drive_id, drive.state);
        }
    } else {
        eprintln!("{}", result.summary);
    }
    Ok(if result.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(line: &[&str]) -> anyhow::Result<RecoveryAction> {
        let cli = crate::cli::Cli::try_parse_from(line)?;
        match cli.command {
            crate::cli::Command::Recover(args) => action_of(&args),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line_names_each_action_and_its_parameters() {
        assert_eq!(
            parse(&[
                "koru",
                "recover",
                "retry_drive",
                "--drive",
                "d_1",
                "--route",
                "os_injection"
            ])
            .unwrap(),
            RecoveryAction::RetryDrive {
                drive_id: "d_1".into(),
                route: Some(Route::OsInjection)
            }
        );
        assert_eq!(
            parse(&["koru", "recover", "reload_registry"]).unwrap(),
            RecoveryAction::ReloadRegistry {}
        );
        let missing = parse(&["koru", "recover", "focus_window"]).unwrap_err();
        assert!(missing.to_string().contains("--session"), "{missing}");
        let misplaced = parse(&[
            "koru",
            "recover",
            "cancel_drive",
            "--drive",
            "d_1",
            "--route",
            "native_send",
        ])
        .unwrap_err();
        assert!(misplaced.to_string().contains("--route"), "{misplaced}");
    }
}
