//! `koru audit`: a chat audited into its ledger — by the daemon (`chat.audit`: the chat by its `koru chats` id, from the file the observers read it from), or here without a daemon (`--source FILE --store ID`); the outcome printed, exit 1 when the part imported before was rewritten.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use koru_protocol::{AuditFindingKind, ChatAudit, ChatAuditResult};

use super::commands::{connect, print_json, single_host};
use super::AuditArgs;
use crate::control::hosts::HostChoice;
use crate::journal::canonical::Sealer;

pub async fn run(choice: &HostChoice, args: AuditArgs) -> anyhow::Result<ExitCode> {
    let absolute = |path: &Option<PathBuf>, what: &str| -> anyhow::Result<Option<PathBuf>> {
        path.as_deref()
            .map(|p| std::path::absolute(p).with_context(|| format!("{what} {}", p.display())))
            .transpose()
    };
    let out = absolute(&args.out, "--out")?;
    let html = absolute(&args.html, "--html")?;
    let result = match &args.source {
        Some(source) => offline(&args, source, out, html).await?,
        None => {
            let host = single_host(choice, "audit")?;
            let mut client = connect(&host).await?;
            let asked = client
                .audit_chat(ChatAudit {
                    chat_id: args.chat.clone(),
                    store: args.store.clone(),
                    out: out.map(|p| p.display().to_string()),
                    html: html.map(|p| p.display().to_string()),
                })
                .await;
            client.close().await;
            asked.context("the daemon did not audit the chat")?
        }
    };
    if args.json {
        print_json(&result)?;
    } else {
        print!("{}", crate::audit::render(&result));
    }
    Ok(match &result.finding {
        Some(finding) if finding.kind == AuditFindingKind::SourceRewritten => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

/// `--source FILE --store ID`: the audit done here, no daemon asked.
async fn offline(
    args: &AuditArgs,
    source: &Path,
    out: Option<PathBuf>,
    html: Option<PathBuf>,
) -> anyhow::Result<ChatAuditResult> {
    let store = args
        .store
        .clone()
        .context("--source needs --store (the store's id, as `koru chats` shows it)")?;
    let readable = crate::conversation::stores::READABLE_STORES;
    if !readable.contains(&store.as_str()) {
        anyhow::bail!(
            "--store {store}: not a store whose chats Koru reads; one of {}",
            readable.join(", ")
        );
    }
    if !source.exists() {
        anyhow::bail!("--source {}: no such file", source.display());
    }
    let chat_id = args.chat.clone().unwrap_or_else(|| chat_id_of(source));
    let dir = out.unwrap_or_else(|| crate::audit::default_dir(&store, &chat_id));
    let request = crate::audit::AuditRequest {
        store: store.clone(),
        chat_id,
        source: source.to_path_buf(),
        dir,
        sealer: Sealer::from_env(),
        html,
    };
    tokio::task::spawn_blocking(move || crate::audit::audit(&request))
        .await
        .context("the audit stopped")?
        .with_context(|| format!("auditing {} as {store}", source.display()))
}

/// A chat's id from its file when none is given: the file's name up to its first `.`
/// (a session's id in Claude Code, Codex, Gemini and Copilot), or the folder's name for a
/// Cline task's `ui_messages.json`.
fn chat_id_of(source: &Path) -> String {
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.split('.').next().unwrap_or("").to_string();
    if stem == "ui_messages" || stem.is_empty() {
        if let Some(folder) = source.parent().and_then(Path::file_name) {
            return folder.to_string_lossy().into_owned();
        }
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_id_is_taken_from_its_file_or_task_folder() {
        assert_eq!(chat_id_of(Path::new("/p/abc-1.jsonl")), "abc-1");
        assert_eq!(chat_id_of(Path::new("/t/1795/ui_messages.json")), "1795");
        assert_eq!(
            chat_id_of(Path::new("/x/rollout-2026.jsonl.zst")),
            "rollout-2026"
        );
    }
}
