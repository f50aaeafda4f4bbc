//! `koru doctor [--json] [--only ID…] [--timeout MS]`: gathers facts, evaluates them against the registry (with each session's project layer), prints the report and exits 0, 1 or 2.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::DoctorArgs;
use crate::doctor::{build_report, render::render};
use crate::registry::LayerPaths;

pub async fn run(socket: &Path, args: DoctorArgs, layers: LayerPaths) -> anyhow::Result<ExitCode> {
    let timeout = Duration::from_millis(args.timeout.max(1));
    let report = build_report(socket, &args.only, timeout, &layers).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(ExitCode::from(report.summary.exit_code))
}
