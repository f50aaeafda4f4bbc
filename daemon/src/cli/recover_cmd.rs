//! `koru recover ACTION`: runs one recovery action through the daemon (the same actions as the dashboard's buttons and the MCP tool `recover`) and says what it did.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use koru_protocol::{Message, RecoveryAction, RecoveryRun, Route};

use super::RecoverArgs;

/// The actions by their wire names, for the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum ActionName {
    /// Run doctor's probes again
    Reprobe,
    /// Read the registry files again
    ReloadRegistry,
    /// Send a failed drive's prompt again (--drive, optionally --route); refused when it may have been submitted
    RetryDrive,
    /// Cancel a drive that has not finished (--drive)
    CancelDrive,
    /// Make a plugin reconnect (--session)
    ReconnectPlugin,
    /// Raise and focus a session's IDE window (--session)
    FocusWindow,
}

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
    let drive = || {
        args.drive.clone().with_context(|| {
            format!(
                "{} needs --drive ID (`koru drives` lists them)",
                name(args.action)
            )
        })
    };
    let session = || {
        args.session.clone().with_context(|| {
            format!(
                "{} needs --session ID (`koru sessions` lists them)",
                name(args.action)
            )
        })
    };
    if args.route.is_some() && args.action != ActionName::RetryDrive {
        bail!("--route only applies to retry_drive");
    }
    Ok(match args.action {
        ActionName::Reprobe => RecoveryAction::Reprobe {},
        ActionName::ReloadRegistry => RecoveryAction::ReloadRegistry {},
        ActionName::RetryDrive => RecoveryAction::RetryDrive {
            drive_id: drive()?,
            route: args.route.map(Route::from),
        },
        ActionName::CancelDrive => RecoveryAction::CancelDrive { drive_id: drive()? },
        ActionName::ReconnectPlugin => RecoveryAction::ReconnectPlugin {
            session_id: session()?,
        },
        ActionName::FocusWindow => RecoveryAction::FocusWindow {
            session_id: session()?,
        },
    })
}

fn name(action: ActionName) -> String {
    clap::ValueEnum::to_possible_value(&action)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

pub async fn run(socket: &Path, args: RecoverArgs) -> anyhow::Result<ExitCode> {
    let action = action_of(&args)?;
    let mut client = super::commands::connect(socket).await?;
    let reply = client
        .request(Message::RecoveryRun(RecoveryRun { action }))
        .await?;
    client.close().await;
    let Message::RecoveryResult(result) = reply else {
        bail!("the daemon answered recovery.run with something else");
    };
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
