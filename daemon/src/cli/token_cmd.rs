//! `koru token create --role observe|drive [--name NAME] | ls | revoke ID|NAME`: the scoped HTTP/MCP bearer tokens, edited in the token file directly (so they work with or without a running daemon, which reads the file again when it changes).

use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use super::TokenCommand;
use crate::access::tokens::{self, TokenRecord};
use crate::access::Role;
use crate::table::{age, render};

/// One line of `koru token ls --json`: everything but the secret.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    id: &'a str,
    name: Option<&'a str>,
    role: Role,
    created_ms: Option<u64>,
}

pub fn run(command: TokenCommand) -> anyhow::Result<ExitCode> {
    let path = tokens::tokens_path();
    match command {
        TokenCommand::Create { role, name, json } => {
            let now_ms = now_ms();
            let (record, secret) =
                tokens::create(&path, role, name, now_ms).context("cannot create the token")?;
            if json {
                super::commands::print_json(&serde_json::json!({
                    "id": record.id,
                    "name": record.name,
                    "role": record.role,
                    "token": secret,
                }))?;
            } else {
                println!("{secret}");
                eprintln!(
                    "token {} ({}role {}): shown this once, only its SHA-256 is kept (in {}); send it as `Authorization: Bearer …`; `koru token revoke {}` ends it",
                    record.id,
                    record
                        .name
                        .as_deref()
                        .map(|n| format!("name {n}, "))
                        .unwrap_or_default(),
                    record.role,
                    path.display(),
                    record.label()
                );
            }
        }
        TokenCommand::Ls { json } => {
            let file = tokens::load(&path)?;
            let mut listed = vec![Listed {
                id: "default",
                name: None,
                role: Role::Drive,
                created_ms: None,
            }];
            listed.extend(file.tokens.iter().map(|t: &TokenRecord| Listed {
                id: &t.id,
                name: t.name.as_deref(),
                role: t.role,
                created_ms: Some(t.created_ms),
            }));
            if json {
                super::commands::print_json(&listed)?;
            } else {
                let now = now_ms();
                let rows: Vec<Vec<String>> = listed
                    .iter()
                    .map(|t| {
                        vec![
                            t.id.to_string(),
                            t.name.unwrap_or("-").to_string(),
                            t.role.to_string(),
                            t.created_ms
                                .map(|then| age(now, then))
                                .unwrap_or_else(|| "(`koru status`)".into()),
                        ]
                    })
                    .collect();
                print!("{}", render(&["ID", "NAME", "ROLE", "CREATED"], &rows));
            }
        }
        TokenCommand::Revoke { which } => {
            if which == "default" {
                anyhow::bail!(
                    "the default token cannot be revoked; remove {} and restart the daemon to get a new one",
                    path.with_file_name("http-token").display()
                );
            }
            let record = tokens::revoke(&path, &which)?;
            println!(
                "{} revoked (a running daemon refuses it from its next request on)",
                record.label()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}
