//! `velos demo`: the replicated key-value demo (three in-process replicas, the leader
//! crashed mid-run); exit status 1 when a check fails, 2 on bad input.

use super::sim::parse_duration;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use velos_cli::demo::{DemoConfig, run};

/// Arguments of `velos demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Wall-clock time the client runs: `500ms`, `2s`, or nanoseconds.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    duration: u64,
    /// When to crash the leader (from the start).
    #[arg(long, default_value = "800ms", value_parser = parse_duration)]
    crash_at: u64,
    /// Timeline interval.
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    interval: u64,
    /// Client threads (each writes one command at a time; the leader batches them).
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// Write `report.json` and `timeline.svg` into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object (the last line of standard output) instead of the report.
    #[arg(long)]
    json: bool,
}

/// Runs `velos demo`.
pub fn run_cli(a: DemoArgs) -> ExitCode {
    let config = DemoConfig {
        duration: Duration::from_nanos(a.duration),
        crash_at: Duration::from_nanos(a.crash_at),
        interval: Duration::from_nanos(a.interval),
        clients: a.clients,
        ..DemoConfig::default()
    };
    if let Err(e) = config.validate() {
        eprintln!("velos demo: {e}");
        return ExitCode::from(2);
    }
    if let Some(dir) = &a.out
        && let Err(e) = writable_dir(dir)
    {
        eprintln!("velos demo: --out {}: {e}", dir.display());
        return ExitCode::from(2);
    }
    let report = match run(&config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("velos demo: {e}");
            return ExitCode::from(2);
        }
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("a report serialises")
        );
    } else {
        println!("{report}");
    }
    if let Some(dir) = &a.out {
        match report.write_files(dir) {
            Ok(paths) => {
                for p in paths {
                    eprintln!("wrote {}", p.display());
                }
            }
            Err(e) => {
                eprintln!("velos demo: writing {}: {e:#}", dir.display());
                return ExitCode::from(2);
            }
        }
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Checks, before the run, that the report can be written into `dir`: it is (or is made)
/// a directory, and a file can be created in it.
fn writable_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(".velos-demo-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}
