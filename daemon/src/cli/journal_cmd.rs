//! `koru verify` and `koru journal export`: they read the journal's files directly, so they work with or without a daemon (the running daemon only says where its journal is).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use koru_protocol::VerifyVerdict;

use super::{ExportArgs, VerifyArgs};
use crate::clock::{Clock, SystemClock};
use crate::control::Controller;
use crate::journal::canonical::HMAC_KEY_ENV;

/// The folder to read: the one given, else the running daemon's, else the one a daemon on
/// `socket` would keep.
async fn journal_dir(socket: &Path, given: Option<PathBuf>) -> PathBuf {
    if let Some(dir) = given {
        return dir;
    }
    let asked = Controller::new(socket.to_path_buf(), "koru-cli")
        .once(|c| Box::pin(c.status()))
        .await;
    match asked {
        Ok(status) => status
            .journal
            .map(|j| PathBuf::from(j.dir))
            .unwrap_or_else(|| crate::journal::default_dir_for(socket)),
        Err(_) => crate::journal::default_dir_for(socket),
    }
}

fn key_from_env() -> Option<Vec<u8>> {
    std::env::var(HMAC_KEY_ENV)
        .ok()
        .filter(|k| !k.is_empty())
        .map(String::into_bytes)
}

pub async fn verify(socket: &Path, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let dir = journal_dir(socket, args.dir).await;
    let key = key_from_env();
    let report =
        tokio::task::spawn_blocking(move || crate::journal::verify::verify(&dir, key.as_deref()))
            .await
            .context("the check stopped")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::journal::verify::render(&report));
    }
    Ok(ExitCode::from(match report.verdict {
        VerifyVerdict::Intact => 0,
        VerifyVerdict::Tampered => 1,
        VerifyVerdict::Unusable => 2,
    }))
}

pub async fn export(socket: &Path, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let dir = journal_dir(socket, args.dir).await;
    let since_ms = args
        .since
        .as_deref()
        .map(|text| super::commands::parse_since(text, SystemClock.now_ms()))
        .transpose()?;
    let selection = match (args.drive, since_ms) {
        (Some(drive), _) => crate::journal::export::Selection::Drive(drive),
        (None, Some(since)) => crate::journal::export::Selection::Since(since),
        (None, None) => crate::journal::export::Selection::All,
    };
    let key = key_from_env();
    let html = args.html.clone();
    let summary = tokio::task::spawn_blocking(move || {
        crate::journal::export::export_html(&dir, &selection, key.as_deref(), &html)
    })
    .await
    .context("the export stopped")??;
    println!("{summary}");
    Ok(ExitCode::SUCCESS)
}
