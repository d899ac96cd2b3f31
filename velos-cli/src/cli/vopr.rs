//! `velos vopr`: the seeded fault-injection campaign ([`velos_testkit::vopr`]). Exit status 1
//! when a seed violates a property (each is printed with the command that replays it),
//! 2 on bad input.

use super::flags::{MAX_JOBS, number};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;
use velos_testkit::check::linearizability::to_json_lines;
use velos_testkit::vopr::{
    DiskMutation, Modes, Mutation, RunReport, replay_command, replay_mutant_command, run_mutant,
};

/// Arguments of `velos vopr`.
#[derive(Args)]
pub struct VoprArgs {
    /// The seeds to run, `A..B` (B excluded).
    #[arg(long, default_value = "0..100", value_parser = parse_seeds)]
    seeds: (u64, u64),
    /// Print one JSON object (the summary) instead of text.
    #[arg(long)]
    json: bool,
    /// Write the clients' history of the one seed run as JSON lines (`--seeds S..S+1`).
    #[arg(long)]
    history_out: Option<PathBuf>,
    /// Worker threads, 1 to 256 (default: the machine's parallelism); each seed runs
    /// alone.
    #[arg(long, value_parser = number::<usize>(1, MAX_JOBS, ""))]
    jobs: Option<usize>,
    /// Print the names of the deliberately wrong protocol variants, one a line (built
    /// with `--features mutants`; none otherwise).
    #[arg(long)]
    list_mutants: bool,
    /// Run the seeds with the protocol variant NAME (`--list-mutants`): the campaign
    /// must find a violation. Needs `--features mutants`.
    #[arg(long, value_name = "NAME")]
    mutant: Option<String>,
    /// Let one seed in four start every slot near the overflow threshold (the overflow
    /// fallback runs; a known liveness bug shows there).
    #[arg(long)]
    overflow: bool,
    /// Clients submit their commands (`Replica::submit`): the leader gathers the commands
    /// waiting into batch entries, which the services unpack.
    #[arg(long)]
    submit: bool,
    /// Every replica persists what it applies on a simulated disk (slow syncs, a full
    /// disk, a flipped bit drawn per seed); at a drawn instant the whole cluster loses
    /// power, the disks' recoveries are checked against the decided log and the durable
    /// index, and the cluster restarts from disk and loses power again.
    #[arg(long)]
    power_loss: bool,
}

fn parse_seeds(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?}: seeds are A..B"))?;
    let a: u64 = a.parse().map_err(|_| format!("{a:?} is not a seed"))?;
    let b: u64 = b.parse().map_err(|_| format!("{b:?} is not a seed"))?;
    if b <= a {
        return Err(format!("{s:?}: an empty range (B must exceed A)"));
    }
    Ok((a, b))
}

/// The exit status of a run stopped by Ctrl-C (a shell's for SIGINT) without a violation.
const INTERRUPTED_EXIT: i32 = 130;

/// The campaign's summary (`--json`).
#[derive(serde::Serialize)]
struct Summary {
    seeds: u64,
    first_seed: u64,
    violating_seeds: Vec<Violating>,
    operations: u64,
    operations_completed: u64,
    /// Seeds whose leader crashed after a replacement joined (the budget it returned).
    crashes_after_join: u64,
    /// Faults the simulator applied over every seed (planned leader crashes included).
    faults_applied: u64,
    /// Of them, those that met their replica already down and did nothing.
    faults_idle: u64,
    /// The longest commit gap while operations waited and no fault was active, over
    /// every seed (ns), and its seed.
    longest_gap_ns: u64,
    longest_gap_seed: u64,
    /// Seeds in which the gap check charged a visit (an operation waited outside every
    /// fault's window): its premise.
    gap_checked_seeds: u64,
    /// Batch entries of several commands the runs decided (`--submit`): its premise.
    batched_entries: u64,
    /// `--power-loss`: the premises of its checks over every seed — entries durable at
    /// the first power loss (summed), seeds with some durable, records cut or files
    /// passed over by the recoveries, disks that stopped (full), snapshots checked
    /// against the decided log, entries the restarted clusters decided.
    power: Option<PowerSummary>,
    elapsed_s: f64,
    seeds_per_s: f64,
    /// Ctrl-C stopped the run before the range's end (`seeds` counts those that ran).
    interrupted: bool,
}

#[derive(serde::Serialize)]
struct PowerSummary {
    durable_entries: u64,
    seeds_with_durable: u64,
    seeds_durable_after_restart: u64,
    cuts: u64,
    disks_stopped: u64,
    snapshots_checked: u64,
    decided_after_restart: u64,
    resumed: u64,
    resumes_checked: u64,
    own_restarts: u64,
    own_states_checked: u64,
}

impl PowerSummary {
    fn of(reports: &[RunReport]) -> Option<PowerSummary> {
        let powers: Vec<_> = reports.iter().filter_map(|r| r.power.as_ref()).collect();
        if powers.is_empty() {
            return None;
        }
        let sum = |f: &dyn Fn(&velos_testkit::vopr::PowerReport) -> u64| {
            powers.iter().map(|p| f(p)).sum::<u64>()
        };
        Some(PowerSummary {
            durable_entries: sum(&|p| p.durable[0]),
            seeds_with_durable: sum(&|p| u64::from(p.durable[0] > 0)),
            seeds_durable_after_restart: sum(&|p| u64::from(p.durable_after_restart())),
            cuts: sum(&|p| p.cuts as u64),
            disks_stopped: sum(&|p| p.stopped as u64),
            snapshots_checked: sum(&|p| p.snapshots_checked as u64),
            decided_after_restart: sum(&|p| p.decided_after),
            resumed: sum(&|p| p.resumed as u64),
            resumes_checked: sum(&|p| p.resumes_checked as u64),
            own_restarts: sum(&|p| p.own_restarts as u64),
            own_states_checked: sum(&|p| p.own_states_checked as u64),
        })
    }
}

#[derive(serde::Serialize)]
struct Violating {
    seed: u64,
    violations: Vec<String>,
    replay: String,
}

/// Runs `velos vopr`.
pub fn run_cli(a: VoprArgs) -> ExitCode {
    if a.list_mutants {
        for m in Mutation::ALL {
            println!("{}", m.name());
        }
        for m in DiskMutation::ALL {
            println!("{} (with --power-loss)", m.name());
        }
        return ExitCode::SUCCESS;
    }
    let disk_mutation = a.mutant.as_deref().and_then(DiskMutation::from_name);
    let disk_mutation = disk_mutation.filter(|&m| m != DiskMutation::None);
    if disk_mutation.is_some() && !a.power_loss {
        eprintln!(
            "velos vopr: the mutant {:?} of the durable point needs --power-loss",
            a.mutant
        );
        return ExitCode::from(2);
    }
    let core = a.mutant.as_deref().filter(|_| disk_mutation.is_none());
    let mutation = match core.map(|n| (n, Mutation::from_name(n))) {
        None => Mutation::None,
        Some((_, Some(m))) => m,
        Some((name, None)) if Mutation::ALL.is_empty() => {
            eprintln!(
                "velos vopr: no mutant {name:?} in this build: rebuild with \
                 `cargo run --release --features mutants -- vopr --mutant {name}`"
            );
            return ExitCode::from(2);
        }
        Some((name, None)) => {
            let core = Mutation::ALL.iter().map(|m| m.name());
            let names: Vec<&str> = core
                .chain(DiskMutation::ALL.iter().map(|m| m.name()))
                .collect();
            eprintln!(
                "velos vopr: no mutant {name:?}; the mutants: {}",
                names.join(", ")
            );
            return ExitCode::from(2);
        }
    };
    let modes = Modes {
        overflow: a.overflow,
        submit: a.submit,
        power_loss: a.power_loss,
        disk_mutation: disk_mutation.unwrap_or_default(),
    };
    let mutant_name = disk_mutation.map_or(mutation.name(), DiskMutation::name);
    let mutant = mutation != Mutation::None || disk_mutation.is_some();
    let replay = |seed: u64| {
        if mutant {
            replay_mutant_command(seed, mutant_name, modes)
        } else {
            replay_command(seed, modes)
        }
    };
    let (first, end) = a.seeds;
    if a.history_out.is_some() && end - first != 1 {
        eprintln!("velos vopr: --history-out writes one seed's history: use --seeds S..S+1");
        return ExitCode::from(2);
    }
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let total = end - first;
    let bar = if std::io::stderr().is_terminal() && !a.json {
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} seeds, {per_sec}, {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    // Ctrl-C stops handing out seeds; the seeds under way finish and the summary covers
    // what ran. A second Ctrl-C ends the process at once.
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    let handler = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(INTERRUPTED_EXIT);
        }
    });
    if let Err(e) = handler {
        eprintln!("velos vopr: Ctrl-C will not print a summary: {e}");
    }
    let started = Instant::now();
    let next = AtomicU64::new(first);
    let violating = AtomicUsize::new(0);
    let reports: Mutex<Vec<RunReport>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(total as usize) {
            s.spawn(|| {
                loop {
                    if interrupted.load(Ordering::SeqCst) {
                        break;
                    }
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let mut report = run_mutant(seed, mutation, modes);
                    if a.history_out.is_none() {
                        // Kept only to be written: a long run would hold every history.
                        report.history = Vec::new();
                    }
                    if !report.violations.is_empty() {
                        let n = violating.fetch_add(1, Ordering::Relaxed) + 1;
                        bar.println(format!("seed {seed}: {}", report.violations[0]));
                        bar.set_message(format!("{n} violating"));
                    }
                    bar.inc(1);
                    reports.lock().expect("no worker panicked").push(report);
                }
            });
        }
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let mut reports = reports.into_inner().expect("no worker panicked");
    reports.sort_by_key(|r| r.seed);
    // Seeds are handed out in order and each one taken runs to its end: what ran is a
    // prefix of the range.
    let interrupted = interrupted.load(Ordering::SeqCst) && (reports.len() as u64) < total;
    let (total, end) = (reports.len() as u64, first + reports.len() as u64);
    assert!(
        reports
            .iter()
            .enumerate()
            .all(|(i, r)| r.seed == first + i as u64),
        "the seeds that ran are a prefix of the range"
    );
    if total == 0 {
        eprintln!("velos vopr: interrupted before any seed ran");
        return ExitCode::from(INTERRUPTED_EXIT as u8);
    }
    if let Some(path) = &a.history_out {
        let text = to_json_lines(&reports[0].history);
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("velos vopr: writing {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    let bad: Vec<&RunReport> = reports
        .iter()
        .filter(|r| !r.violations.is_empty())
        .collect();
    let longest = reports
        .iter()
        .max_by_key(|r| (r.longest_gap.1, u64::MAX - r.seed));
    let summary = Summary {
        seeds: total,
        first_seed: first,
        violating_seeds: bad
            .iter()
            .map(|r| Violating {
                seed: r.seed,
                violations: r.violations.clone(),
                replay: replay(r.seed),
            })
            .collect(),
        operations: reports.iter().map(|r| r.operations[0] as u64).sum(),
        operations_completed: reports.iter().map(|r| r.operations[1] as u64).sum(),
        crashes_after_join: reports.iter().filter(|r| r.crashed_after_join).count() as u64,
        faults_applied: reports.iter().map(|r| r.faults_applied[0] as u64).sum(),
        faults_idle: reports.iter().map(|r| r.faults_applied[1] as u64).sum(),
        batched_entries: reports.iter().map(|r| r.batched_entries as u64).sum(),
        power: PowerSummary::of(&reports),
        longest_gap_ns: longest.map_or(0, |r| r.longest_gap.1),
        longest_gap_seed: longest.map_or(first, |r| r.seed),
        gap_checked_seeds: reports.iter().filter(|r| r.gap_visits > 0).count() as u64,
        elapsed_s: elapsed,
        seeds_per_s: total as f64 / elapsed.max(1e-9),
        interrupted,
    };
    if total == 1 && !a.json {
        let mut scenario = velos_testkit::vopr::Scenario::with_overflow(first, a.overflow);
        scenario.submit = a.submit;
        scenario.log.mutation = mutation;
        print!("{}", scenario.describe());
        if a.power_loss {
            let plan = velos_testkit::vopr::PowerPlan::draw(
                first,
                scenario.log.replicas,
                scenario.safety_ns,
            );
            println!("  power loss: {plan:?}");
        }
        let r = &reports[0];
        println!(
            "  {} operations ({} completed), {} entries, ended at {} ns",
            r.operations[0], r.operations[1], r.entries, r.end_ns
        );
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&summary).expect("the summary serialises")
        );
    } else {
        for r in &bad {
            println!("seed {} violates:", r.seed);
            for v in &r.violations {
                println!("  {v}");
            }
            println!("  replay: {}", replay(r.seed));
        }
        println!(
            "{} seeds ({}..{end}), {} violating; {} client operations, {} completed; {} \
             leader crashes after a replacement joined; {} faults applied, {} of them on a \
             replica already down (they did nothing); longest commit gap outside faults \
             {} ns (seed {}; {} seeds checked); {:.1} s, {:.1} seeds/s",
            total,
            first,
            bad.len(),
            summary.operations,
            summary.operations_completed,
            summary.crashes_after_join,
            summary.faults_applied,
            summary.faults_idle,
            summary.longest_gap_ns,
            summary.longest_gap_seed,
            summary.gap_checked_seeds,
            elapsed,
            summary.seeds_per_s
        );
        if a.submit {
            println!(
                "submitted commands: {} batch entries of several commands decided",
                summary.batched_entries
            );
        }
        if let Some(p) = &summary.power {
            println!(
                "power losses: {} entries durable at the first power loss ({} seeds with some); \
                 {} records cut or files passed over by the recoveries; {} \
                 disks full; {} snapshots checked against the decided log; {} entries decided \
                 after the restarts from disk ({} seeds made some durable); {} replaced \
                 processes resumed from their disks ({} checked against the decided log); {} \
                 restarts from each replica's own disk ({} services checked at the end)",
                p.durable_entries,
                p.seeds_with_durable,
                p.cuts,
                p.disks_stopped,
                p.snapshots_checked,
                p.decided_after_restart,
                p.seeds_durable_after_restart,
                p.resumed,
                p.resumes_checked,
                p.own_restarts,
                p.own_states_checked
            );
        }
    }
    if interrupted {
        eprintln!(
            "velos vopr: interrupted; the summary covers seeds {first}..{end}, the ones that ran"
        );
    }
    if mutant && !a.json {
        match bad.first() {
            Some(r) => println!(
                "mutant {} caught by {} of {total} seeds (first: seed {})",
                mutant_name,
                bad.len(),
                r.seed
            ),
            None => eprintln!(
                "velos vopr: mutant {} not caught by seeds {first}..{end}: the campaign's \
                 checks missed it",
                mutant_name
            ),
        }
    }
    ExitCode::from(exit_status(mutant, bad.len(), interrupted))
}

/// The exit status of a campaign: 1 when a check fails — a seed violates something, or,
/// running a mutant (`mutant`), no seed caught it (a mutant run's check is that the
/// campaign catches it: no violation there means the checks missed a wrong protocol) —,
/// else 130 if interrupted, else 0.
fn exit_status(mutant: bool, violating: usize, interrupted: bool) -> u8 {
    let failed = if mutant {
        violating == 0
    } else {
        violating > 0
    };
    if failed {
        1
    } else if interrupted {
        INTERRUPTED_EXIT as u8
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::exit_status;

    #[test]
    fn a_mutant_run_fails_when_no_seed_catches_it() {
        assert_eq!(
            exit_status(false, 0, false),
            0,
            "the protocol: no violation"
        );
        assert_eq!(exit_status(false, 3, false), 1, "the protocol: a violation");
        assert_eq!(exit_status(true, 3, false), 0, "a mutant caught");
        assert_eq!(exit_status(true, 0, false), 1, "a mutant the checks missed");
        assert_eq!(exit_status(true, 0, true), 1, "missed, though interrupted");
        assert_eq!(exit_status(false, 0, true), 130, "interrupted");
    }
}
