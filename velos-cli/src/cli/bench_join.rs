//! `velos bench join`: a follower, or the crashed former leader, replaced while the leader
//! decides back to back, on the simulator ([`velos_bench::join`]).

use super::flags::number;
use clap::Args;
use std::process::ExitCode;
use velos_bench::join::{JoinConfig, JoinReport, measure};

/// Arguments of `velos bench join` (defaults: the setting, [`JoinConfig`]).
#[derive(Args)]
pub struct JoinArgs {
    /// Seeds 0..N, N from 1 to 1000.
    #[arg(long, default_value_t = 8, value_parser = number::<u64>(1, 1_000, ""))]
    seeds: u64,
    /// The ring's slots, 16 to 65536.
    #[arg(long, default_value_t = 64, value_parser = number::<u32>(16, 65_536, ""))]
    slots: u32,
    /// The services' snapshot size in bytes, 0 to 16 MiB.
    #[arg(long, default_value_t = 65_536, value_parser = number::<u32>(0, 16 << 20, " bytes"))]
    snapshot_bytes: u32,
    /// Every this many entries, 1 to 2^20.
    #[arg(long, default_value_t = 32, value_parser = number::<u64>(1, 1 << 20, ""))]
    snapshot_every: u64,
    /// The latency profile.
    #[arg(long, default_value = "cluster")]
    latency: String,
    /// Replace the crashed former leader (replica 0, started 300 µs after its crash, while
    /// replica 1 leads) instead of a follower (replica 2).
    #[arg(long)]
    former_leader: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

fn us(ns: Option<u64>) -> String {
    ns.map_or("never".into(), |ns| format!("{:.1} µs", ns as f64 / 1e3))
}

fn text(r: &JoinReport) -> String {
    let c = &r.config;
    let who = match c.former_leader {
        true => format!(
            "replica 0 (the leader) crashed at {} µs and replaced {} µs later while replica 1 \
             leads",
            c.start_ns / 1_000,
            velos_bench::join::FAILOVER_NS / 1_000
        ),
        false => format!(
            "replica 2 crashed and replaced at {} µs",
            c.start_ns / 1_000
        ),
    };
    let mut out = format!(
        "3 replicas, {} profile, a {}-slot ring, {}-byte snapshots every {} entries; {who}, \
         {} seeds\n",
        c.latency, c.slots, c.snapshot_bytes, c.snapshot_every, c.seeds
    );
    out += "seed  first vote   caught up    copies  decisions/µs before → during   longest gap  checks\n";
    for run in &r.runs {
        out += &format!(
            "{:>4}  {:>10}  {:>10}  {:>7}  {:>8.3} → {:<8.3} ({:>3.0} %)  {:>10}  {}\n",
            run.seed,
            us(run.vote_ns),
            us(run.caught_up_ns),
            run.installs,
            run.rate_before,
            run.rate_during,
            100.0 * run.rate_during / run.rate_before.max(f64::MIN_POSITIVE),
            us(Some(run.longest_gap_ns)),
            if run.ok { "pass" } else { "FAIL" }
        );
    }
    out += &format!(
        "median: first vote {} (target 200 µs), caught up {}, rate during the join {:.0} % of \
         before (target 80 %), longest gap {} (largest {}; target 20 µs)\n",
        us(r.vote_ns_median),
        us(r.caught_up_ns_median),
        100.0 * r.rate_ratio_median,
        us(r.longest_gap_ns_median),
        us(r.longest_gap_ns_max),
    );
    out
}

/// Runs `velos bench join`.
pub fn run(args: &JoinArgs) -> ExitCode {
    if args.seeds == 0 || args.snapshot_every == 0 || args.slots < 16 {
        eprintln!("bench join: --seeds and --snapshot-every at least 1, --slots at least 16");
        return ExitCode::from(2);
    }
    let config = JoinConfig {
        seeds: args.seeds,
        slots: args.slots,
        snapshot_bytes: args.snapshot_bytes,
        snapshot_every: args.snapshot_every,
        latency: args.latency.clone(),
        former_leader: args.former_leader,
        ..JoinConfig::default()
    };
    match measure(&config) {
        Ok(r) => {
            super::report::print_report(&r, args.json, text);
            let failed: Vec<u64> = r
                .runs
                .iter()
                .filter(|run| !run.ok)
                .map(|run| run.seed)
                .collect();
            if failed.is_empty() {
                return ExitCode::SUCCESS;
            }
            // A check failed, or the replacement never voted: nothing was measured there.
            eprintln!("bench join: seeds {failed:?} failed a check or never voted");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("bench join: {e:#}");
            ExitCode::from(2)
        }
    }
}
