//! `koru setup [--only PARTS] [--dry-run] [--yes] [--undo]`: prints what wiring Koru into this machine's IDEs, agents and MCP clients would change (per tool, with diffs and commands), asks once, applies it and says per tool what was done and what was not; `--undo` takes back what setup recorded.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::setup::{self, manifest, Change, Machine, Part, ToolPlan, ToolState};

/// `koru setup`'s flags.
#[derive(Debug, clap::Args)]
pub struct SetupArgs {
    /// Apply without asking (for scripts)
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print the plan (or, with --undo, what would be undone) and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Only these parts (comma-separated): login, ide, hooks, mcp
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Part>,
    /// Take back what setup did (recorded in $XDG_STATE_HOME/koru/setup/manifest.json),
    /// keeping what was changed by hand since
    #[arg(long)]
    pub undo: bool,
    /// The VS Code extension to install (default: the one built in this repository, built
    /// with npm when missing)
    #[arg(long, value_name = "FILE")]
    pub vsix: Option<std::path::PathBuf>,
    /// The JetBrains plugin zip to install (default: plugins/jetbrains/build/ in this repository)
    #[arg(long, value_name = "FILE")]
    pub jetbrains_zip: Option<std::path::PathBuf>,
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

fn print_plan(machine: &Machine, plans: &[ToolPlan]) -> usize {
    let mut changes = 0;
    let mut heading = None;
    for plan in plans {
        if heading != Some(plan.part) {
            println!("\n{}", plan.part.heading());
            heading = Some(plan.part);
        }
        match &plan.state {
            ToolState::Current { detail } => println!("  {} — already wired: {detail}", plan.tool),
            ToolState::Unavailable { why } => {
                println!("  {} — not possible here: {why}", plan.tool)
            }
            ToolState::Failed { error } => println!("  {} — CANNOT: {error}", plan.tool),
            ToolState::Changes {
                changes: steps,
                stale,
            } => {
                match stale {
                    Some(stale) => println!("  {} — stale ({stale}); will:", plan.tool),
                    None => println!("  {} — will:", plan.tool),
                }
                for step in steps {
                    changes += 1;
                    match step {
                        Change::Edit(edit) => {
                            println!("    {}", edit.summary);
                            print!("{}", indent(&edit.diff(machine), "      "));
                        }
                        Change::Run(run) => {
                            println!("    {}:", run.summary);
                            for argv in &run.argv {
                                println!("      $ {}", setup::show_command(argv));
                            }
                        }
                        Change::Unpack(unpack) => println!("    {}", unpack.summary),
                    }
                }
            }
        }
    }
    changes
}

/// Asks once on the terminal (or reads one line from a pipe); `false` on anything but yes.
fn confirm(question: &str) -> bool {
    print!("\n{question} [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).unwrap_or(0) == 0 {
        println!();
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn stamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ").to_string()
}

pub fn run(args: SetupArgs) -> anyhow::Result<ExitCode> {
    let koru = std::env::current_exe().context("cannot tell where this koru binary is")?;
    let machine =
        Machine::from_env(koru).context("HOME is not set: setup wires tools in a user's home")?;
    let parts: Vec<Part> = if args.only.is_empty() {
        Part::ALL.to_vec()
    } else {
        args.only.clone()
    };
    if args.undo {
        return undo(&machine, &parts, &args);
    }
    let sources = setup::ide::Sources::new(args.vsix.clone(), args.jetbrains_zip.clone());
    let plans = setup::plan(&machine, &parts, &sources);
    println!(
        "koru setup: wiring {} into this machine",
        machine.koru.display()
    );
    let changes = print_plan(&machine, &plans);
    let failed: Vec<&ToolPlan> = plans
        .iter()
        .filter(|p| matches!(p.state, ToolState::Failed { .. }))
        .collect();
    let tools_found = plans.iter().any(|p| p.part != Part::Login);
    if !tools_found && parts.iter().any(|p| *p != Part::Login) {
        println!(
            "\nNothing to wire on this machine: no IDE, terminal agent or MCP client found (looked for VS Code, VSCodium, Cursor, Windsurf, Antigravity, code-server, JetBrains IDEs, Claude Code, Codex CLI, Gemini CLI, opencode)."
        );
    }
    let finish = |failed: &[String]| -> ExitCode {
        if failed.is_empty() {
            ExitCode::SUCCESS
        } else {
            println!("\nNot done: {}.", failed.join("; "));
            ExitCode::FAILURE
        }
    };
    let mut not_done: Vec<String> = failed
        .iter()
        .map(|p| match &p.state {
            ToolState::Failed { error } => format!("{} ({error})", p.tool),
            _ => unreachable!(),
        })
        .collect();
    if changes == 0 {
        if tools_found {
            println!("\nNothing to change.");
        }
        return Ok(finish(&not_done));
    }
    if args.dry_run {
        println!("\n--dry-run: nothing was changed ({changes} changes planned).");
        return Ok(finish(&not_done));
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!("koru: stdin is not a terminal: reading the answer from it (--yes applies without asking)");
        }
        if !confirm(&format!("Make these {changes} changes?")) {
            println!("Nothing was changed.");
            return Ok(ExitCode::FAILURE);
        }
    }
    let results = manifest::apply(&machine, &plans, &stamp()).map_err(anyhow::Error::msg)?;
    println!();
    for (tool, result) in results {
        match result {
            manifest::Applied::Done(lines) => {
                for line in lines {
                    println!("  {tool} — done: {line}");
                }
            }
            manifest::Applied::Failed(error) => {
                println!("  {tool} — FAILED: {error}");
                not_done.push(format!("{tool} ({error})"));
            }
        }
    }
    println!(
        "\nRecorded in {}; `koru setup --undo` takes it back.",
        machine.show(&manifest::Manifest::path(&machine))
    );
    Ok(finish(&not_done))
}

fn undo(machine: &Machine, parts: &[Part], args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let path = machine.show(&manifest::Manifest::path(machine));
    let planned = manifest::undo(machine, parts, true, &stamp()).map_err(anyhow::Error::msg)?;
    if planned.is_empty() {
        println!("koru setup --undo: setup has changed nothing here ({path} records nothing); nothing to undo.");
        return Ok(ExitCode::SUCCESS);
    }
    println!("koru setup --undo: what setup did, newest first ({path}):");
    for (record, outcome) in &planned {
        match outcome {
            Ok(line) => println!("  {} — will: {line}", record.tool),
            Err(error) => println!("  {} — CANNOT: {error}", record.tool),
        }
    }
    if args.dry_run {
        println!("\n--dry-run: nothing was changed.");
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes && !confirm(&format!("Undo these {} changes?", planned.len())) {
        println!("Nothing was changed.");
        return Ok(ExitCode::FAILURE);
    }
    let results = manifest::undo(machine, parts, false, &stamp()).map_err(anyhow::Error::msg)?;
    let mut not_done = Vec::new();
    println!();
    for (record, outcome) in results {
        match outcome {
            Ok(line) => println!("  {} — undone: {line}", record.tool),
            Err(error) => {
                println!("  {} — NOT UNDONE: {error}", record.tool);
                not_done.push(record.tool);
            }
        }
    }
    if not_done.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "\nNot undone (still recorded, run --undo again once fixed): {}.",
            not_done.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}
