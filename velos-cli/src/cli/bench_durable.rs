//! `velos bench durable`: what durability costs a `velos::embed` cluster on this
//! machine's disk, side by side in one run ([`velos_bench::durable`]).

use super::flags::{duration, number};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use velos_bench::durable::{ClusterRun, DurableConfig, DurableReport, LoadRun, measure};
use velos_bench::stats::median;

/// Arguments of `velos bench durable` (defaults: the full run, [`DurableConfig::full`]).
#[derive(Args)]
pub struct DurableArgs {
    /// The short run: one repeat of 1,000 commits a load, a 16 MiB recovery.
    #[arg(long)]
    quick: bool,
    /// Repeats of the off/on pair, 1 to 50; medians are reported.
    #[arg(long, value_parser = number::<usize>(1, 50, ""))]
    repeats: Option<usize>,
    /// Commits timed per load, 100 to 10^7.
    #[arg(long, value_parser = number::<u64>(100, 10_000_000, ""))]
    commits: Option<u64>,
    /// Bytes of log in the recovery's directory, 1 MiB to 16 GiB.
    #[arg(long, value_parser = number::<u64>(1 << 20, 16 << 30, " bytes"))]
    recovery_bytes: Option<u64>,
    /// The directory the clusters and the recovery write under (default: the system's
    /// temporary directory); what the run writes there is removed at its end.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The clusters' group-commit pause with durability on: while nobody waits for
    /// durability, a disk batch at most this often (`Config::group_commit`; `0`: a batch
    /// as soon as the last is on disk; default 1ms, at most 1s).
    #[arg(long, value_parser = duration(0, 1_000_000_000))]
    group_commit: Option<u64>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// One load's figures of a run.
type Pick = fn(&ClusterRun) -> &LoadRun;

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}

fn text(r: &DurableReport) -> String {
    let c = &r.config;
    let mut out = format!(
        "3 replicas on the in-process backend, durability off and on (group commit {:?}) side \
         by side, {} repeat(s) of {} commits a load; fdatasync after a 4 KiB append on this disk: p50 {}, \
         p99 {}; three threads at once (the replicas' disk threads share this disk): p50 {}, \
         p99 {}\n",
        c.group_commit,
        c.repeats,
        c.commits,
        us(r.fdatasync_p50_ns as f64),
        us(r.fdatasync_p99_ns as f64),
        us(r.fdatasync_3_p50_ns as f64),
        us(r.fdatasync_3_p99_ns as f64)
    );
    out += "load             commits/s off   commits/s on   on/off   p50 off      p50 on   \
            syncs per 1000 commits\n";
    let rows: [(&str, Pick); 2] = [
        ("1 client", |r| &r.one_client),
        ("64 outstanding", |r| &r.pipelined),
    ];
    for (name, pick) in rows {
        let rate = |on| r.median_of(on, |run| Some(pick(run).commits_per_s));
        let p50 = |on| r.median_of(on, |run| Some(pick(run).p50_ns as f64));
        let syncs = r.median_of(true, |run| pick(run).syncs_per_1000);
        out += &format!(
            "{name:<16} {:>13.0}   {:>12.0}   {:>5.2}x   {:>10}   {:>10}   {:>8.1}\n",
            rate(false),
            rate(true),
            rate(true) / rate(false).max(f64::MIN_POSITIVE),
            us(p50(false)),
            us(p50(true)),
            syncs,
        );
    }
    let ack = r.median_of(true, |run| {
        run.durable_ack.as_ref().map(|a| a.p50_ns as f64)
    });
    let ack99 = r.median_of(true, |run| {
        run.durable_ack.as_ref().map(|a| a.p99_ns as f64)
    });
    let decision = r.median_of(true, |run| Some(run.one_client.p50_ns as f64));
    let bound = decision + 1.5 * r.fdatasync_p50_ns as f64;
    let bound3 = decision + 1.5 * r.fdatasync_3_p50_ns as f64;
    out += &format!(
        "durable acknowledgement (submit_durable, 1 client): p50 {} (p99 {}); the decision \
         p50 with durability on {} + 1.5 x fdatasync p50 = {} (target: at most that; {} with \
         the three-thread fdatasync)\n",
        us(ack),
        us(ack99),
        us(decision),
        us(bound),
        us(bound3)
    );
    let read = median(r.recoveries.iter().map(|x| x.read_bytes_per_s).collect()).unwrap_or(0.0);
    let recover =
        median(r.recoveries.iter().map(|x| x.recover_bytes_per_s).collect()).unwrap_or(0.0);
    let first = r.recoveries.first();
    out += &format!(
        "recovery of {} MiB ({} entries and a 64 MiB snapshot), warm page cache: {:.0} MiB/s \
         against a plain sequential read at {:.0} MiB/s: {:.2}x (target: at least 0.5x)\n",
        first.map_or(0, |x| x.bytes >> 20),
        first.map_or(0, |x| x.entries),
        recover / f64::from(1 << 20),
        read / f64::from(1 << 20),
        recover / read.max(f64::MIN_POSITIVE)
    );
    out
}

/// Runs `velos bench durable`.
pub fn run(args: &DurableArgs) -> ExitCode {
    let base = if args.quick {
        DurableConfig::quick()
    } else {
        DurableConfig::full()
    };
    let config = DurableConfig {
        repeats: args.repeats.unwrap_or(base.repeats),
        commits: args.commits.unwrap_or(base.commits),
        recovery_bytes: args.recovery_bytes.unwrap_or(base.recovery_bytes),
        dir: args.dir.clone(),
        group_commit: args
            .group_commit
            .map_or(base.group_commit, std::time::Duration::from_nanos),
        ..base
    };
    if let Some(dir) = &config.dir {
        if !dir.is_dir() {
            eprintln!("bench durable: {} is not a directory", dir.display());
            return ExitCode::from(2);
        }
    }
    match measure(&config) {
        Ok(r) => {
            super::report::print_report(&r, args.json, text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench durable: {e:#}");
            ExitCode::from(1)
        }
    }
}
