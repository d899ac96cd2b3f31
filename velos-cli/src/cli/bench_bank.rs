//! `velos bench bank`: a bank service on `velos::embed` whose leader (or a follower) is
//! crashed and replaced while its clients write ([`velos_bench::bank`]).

use super::flags::{MAX_WALL_NS, duration, number};
use clap::Args;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use velos_bench::bank::{BankConfig, BankReport, BankRun, Place, TARGET_GAP_MS, measure};

/// Arguments of `velos bench bank` (defaults: the scenario, [`BankConfig`]).
#[derive(Args)]
pub struct BankArgs {
    /// Whose place is replaced: leader or follower.
    #[arg(long, default_value = "leader", value_parser = parse_place)]
    place: Place,
    /// Runs, each on a fresh cluster, 1 to 1000; medians and maxima are reported.
    #[arg(long, default_value_t = 5, value_parser = number::<usize>(1, 1_000, ""))]
    runs: usize,
    /// The accounts table's bytes (8 per account; every snapshot is this large): a
    /// multiple of 8 from 64 to 64 MiB.
    #[arg(long, default_value_t = 4 << 20, value_parser = number::<usize>(64, 64 << 20, " bytes"))]
    state_bytes: usize,
    /// Of the four clients, how many submit on a tokio runtime (the rest on threads), 0
    /// to 4.
    #[arg(long, default_value_t = 1, value_parser = number::<usize>(0, 4, ""))]
    async_clients: usize,
    /// How long the clients write before the crash (e.g. 2s), 100ms to 600s.
    #[arg(long, default_value = "2s", value_parser = duration(100_000_000, MAX_WALL_NS))]
    before_crash: u64,
    /// How long after the failover's first commit the replacement starts, 0 to 600s.
    #[arg(long, default_value = "300ms", value_parser = duration(0, MAX_WALL_NS))]
    settle: u64,
    /// How long the window goes on after the replacement voted and caught up, 0 to 600s.
    #[arg(long, default_value = "500ms", value_parser = duration(0, MAX_WALL_NS))]
    after: u64,
    /// A replacement that has not voted this long after `replace` fails the run (1ns to
    /// 600s).
    #[arg(long, default_value = "10s", value_parser = duration(1, MAX_WALL_NS))]
    vote_timeout: u64,
    /// The clients' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep the replicas' `DEBUG` events too (every aborted attempt, the lag bound's
    /// holds) and print each run's events of the replacement's window, with its commit
    /// gaps over 1 ms, under its line.
    #[arg(long)]
    events: bool,
    /// Sample every thread's scheduler statistics (Linux) and print, under the run's
    /// line, what each did during the longest gap of the window and until the
    /// replacement caught up (ran, waited for a core).
    #[arg(long)]
    sched: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

fn parse_place(s: &str) -> Result<Place, String> {
    Place::by_name(s).ok_or_else(|| format!("unknown place {s:?} (leader, follower)"))
}

impl BankArgs {
    fn config(&self) -> Result<BankConfig, String> {
        // The ranges are the flags' own (clap checks them); what is left spans flags.
        if self.state_bytes % 8 != 0 {
            return Err(format!(
                "--state-bytes {}: a multiple of 8 from 64 to 64 MiB",
                self.state_bytes
            ));
        }
        if self.async_clients > velos_bench::bank::machine::CLIENTS {
            return Err(format!(
                "--async-clients {}: at most {} (of the clients)",
                self.async_clients,
                velos_bench::bank::machine::CLIENTS
            ));
        }
        Ok(BankConfig {
            place: self.place,
            runs: self.runs,
            state_bytes: self.state_bytes,
            async_clients: self.async_clients,
            before_crash: Duration::from_nanos(self.before_crash),
            settle: Duration::from_nanos(self.settle),
            after: Duration::from_nanos(self.after),
            vote_timeout: Duration::from_nanos(self.vote_timeout),
            seed: self.seed,
            events: self.events,
            sched: self.sched,
        })
    }
}

/// A time in ms, `-` if none.
fn opt(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

fn pair(v: Option<[f64; 2]>) -> String {
    v.map_or("none".into(), |[m, x]| format!("{m:.2} ms (max {x:.2})"))
}

/// The table's head.
fn head(c: &BankConfig) -> String {
    let place = match c.place {
        Place::Leader => "the leader's place",
        Place::Follower => "a follower's place",
    };
    format!(
        "3 replicas (in-process backend, default config), 4 clients ({} async), {} KiB of \
         accounts; {place} crashed after {:?}, replaced {:?} after the failover; the window: \
         from the replace call to the vote and catching up, and {:?} more. Times in ms \
         (from the replace call: call, vote, caught up, at)\n\
         run  place  failover    call    vote  caught up  gap joining  gap window (at)  \
         baseline  longest  commits/s before → between → during  leads  dup  wrong  checks\n",
        c.async_clients,
        c.state_bytes >> 10,
        c.before_crash,
        c.settle,
        c.after,
    )
}

/// One run's line.
fn line(r: &BankRun) -> String {
    let at = r
        .replace_gap_at_ms
        .map_or("-".into(), |a| format!("+{a:.0}"));
    let window = format!("{} ({at})", opt(r.replace_gap_ms));
    format!(
        "{:>3}  {:>5}  {:>8}  {:>6.2}  {:>6}  {:>9}  {:>11}  {window:>15}  {:>8}  {:>7}  \
         {:>8.0} → {:>8.0} → {:>8.0}  {:>5}  {:>3}  {:>5}  {}\n",
        r.run,
        r.replaced,
        opt(r.failover_gap_ms),
        r.replace_call_ms,
        opt(r.vote_ms),
        opt(r.caught_up_ms),
        opt(r.joining_gap_ms),
        opt(r.baseline_gap_ms),
        opt(r.longest_gap_ms),
        r.rate_before,
        r.rate_between,
        r.rate_during,
        r.leader_changes_during,
        r.duplicates,
        r.wrong,
        if r.ok { "pass" } else { "FAIL" },
    )
}

/// The medians and maxima.
fn summary(r: &BankReport) -> String {
    let met = match r.replace_gap_ms {
        Some([_, max]) if max <= TARGET_GAP_MS => "met".to_string(),
        Some([_, max]) => format!("missed by {:.2} ms", max - TARGET_GAP_MS),
        None => "not measured".into(),
    };
    format!(
        "median (max) over {} runs: failover gap {}; longest gap while the replacement \
         joined {}, in the whole window {} (target {TARGET_GAP_MS} ms: {met}); first vote {}; \
         baseline gap (as long a window before the crash) {}; commits/s {:.0} before the \
         crash, {:.0} in the window; {} duplicates, {} wrong responses\n",
        r.runs.len(),
        pair(r.failover_gap_ms),
        pair(r.joining_gap_ms),
        pair(r.replace_gap_ms),
        pair(r.vote_ms),
        pair(r.baseline_gap_ms),
        r.rate_before_median,
        r.rate_during_median,
        r.duplicates,
        r.wrong,
    )
}

/// Runs `velos bench bank`.
pub fn run(args: &BankArgs) -> ExitCode {
    let config = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bench bank: {e}");
            return ExitCode::from(2);
        }
    };
    if !args.json {
        print!("{}", head(&config));
    }
    let each = |r: &BankRun| {
        if !args.json {
            print!("{}", line(r));
            if args.events {
                r.events.iter().for_each(|e| println!("     {e}"));
            }
            if !r.gap_threads.is_empty() {
                println!(
                    "     the longest gap of the window: {}",
                    r.gap_threads.join("\n     ")
                );
                println!(
                    "     until the replacement caught up: {}",
                    r.joining_threads.join("\n     ")
                );
            }
            let _ = std::io::stdout().flush();
        }
    };
    match measure(&config, each) {
        Ok(r) => {
            super::report::print_report(&r, args.json, summary);
            let failed: Vec<String> = r
                .runs
                .iter()
                .filter(|run| !run.ok)
                .map(|run| format!("run {}: {}", run.run, run.failures.join("; ")))
                .collect();
            if failed.is_empty() {
                return ExitCode::SUCCESS;
            }
            // A check failed, or the premise did not hold (never voted, nothing committed).
            eprintln!("bench bank: {}", failed.join("\n"));
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("bench bank: {e:#}");
            ExitCode::from(1)
        }
    }
}
