//! `velos demo`: the replicated key-value demo (three in-process replicas, the leader
//! crashed mid-run); exit status 1 when a check fails, 2 on bad input.

use super::flags::{MAX_WALL_NS, duration, number, writable_dir};
use super::sim::MAX_TIMELINE_LINES;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use velos_cli::demo::{DemoConfig, run};

/// Arguments of `velos demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Wall-clock time the client runs: `500ms`, `2s`, or nanoseconds (1ns to 600s).
    #[arg(long, default_value = "2s", value_parser = duration(1, MAX_WALL_NS))]
    duration: u64,
    /// When to crash the leader (from the start; before the end of the run).
    #[arg(long, default_value = "800ms", value_parser = duration(0, MAX_WALL_NS))]
    crash_at: u64,
    /// Timeline interval (at most 10,000 lines: `--duration` / 10,000 or more).
    #[arg(long, default_value = "50ms", value_parser = duration(1, MAX_WALL_NS))]
    interval: u64,
    /// Client threads, 1 to 256 (each writes one command at a time; the leader batches
    /// them).
    #[arg(long, default_value_t = 8, value_parser = number::<u32>(1, MAX_CLIENTS, ""))]
    clients: u32,
    /// Write `report.json` and `timeline.svg` into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Durability on: the replicas keep their logs under this directory (empty or
    /// missing; a directory that holds a log is refused).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Crash every replica at once at this time (a power loss of the whole cluster),
    /// recover the cluster from `--data-dir` and go on; checked: every write durable
    /// then came back. Needs `--data-dir`.
    #[arg(long, value_parser = duration(1, MAX_WALL_NS))]
    power_loss_at: Option<u64>,
    /// Print one JSON object (the last line of standard output) instead of the report.
    #[arg(long)]
    json: bool,
}

/// The most `--clients` threads.
const MAX_CLIENTS: u64 = 256;

/// Runs `velos demo`.
pub fn run_cli(a: DemoArgs) -> ExitCode {
    let lines = a.duration.div_ceil(a.interval);
    if lines > MAX_TIMELINE_LINES {
        eprintln!(
            "velos demo: --interval {} ns over --duration {} ns would make {lines} timeline \
             lines; at most {MAX_TIMELINE_LINES}",
            a.interval, a.duration
        );
        return ExitCode::from(2);
    }
    if a.crash_at >= a.duration {
        eprintln!(
            "velos demo: --crash-at {} ns is not before the end of the run (--duration {} ns)",
            a.crash_at, a.duration
        );
        return ExitCode::from(2);
    }
    let config = DemoConfig {
        duration: Duration::from_nanos(a.duration),
        crash_at: Duration::from_nanos(a.crash_at),
        interval: Duration::from_nanos(a.interval),
        clients: a.clients,
        data_dir: a.data_dir.clone(),
        power_loss_at: a.power_loss_at.map(Duration::from_nanos),
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
