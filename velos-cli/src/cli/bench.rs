//! `velos bench`: measurements. Benchmarks report; they never assert speed.

use super::bench_failover_verbs::VerbsWanted;
use super::flags::{MAX_JOBS, number};
use super::report::Job;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use velos::sim::latency::LatencyModel;
use velos_bench::embed::{EmbedConfig, FollowerIdle};
use velos_bench::failover::FailoverConfig;
use velos_bench::latency::{LatencyConfig, Protocol};
use velos_bench::locks::{LockKind, LocksConfig};

/// Arguments of `velos bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Bench,
}

/// The litmus suite of the checkout this binary was built from.
const DEFAULT_SUITE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus");

#[derive(Subcommand)]
enum Bench {
    /// The emulator: explorer states/s over a litmus suite, simulated operations/s.
    Emulator {
        /// The litmus suite to explore (default: the repository's suite, by the path this
        /// binary was built from, so it runs from any directory).
        #[arg(long, default_value = DEFAULT_SUITE)]
        suite: PathBuf,
        /// Repetitions, 1 to 100; medians are reported.
        #[arg(long, default_value_t = 5, value_parser = number::<usize>(1, 100, ""))]
        repeats: usize,
        /// Operations per thread (4 threads) in the simulation run, 1 to 10^7.
        #[arg(long, default_value_t = 250_000, value_parser = number::<usize>(1, 10_000_000, ""))]
        ops: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Distributed locks in virtual time: throughput and acquire latency against the
    /// number of processes and the writer fraction (RMA-locks paper, Fig. 5).
    Locks(Box<LocksArgs>),
    /// Decision latency against the value size in virtual time, with and without NIC
    /// device memory, next to one CAS round to a majority (Velos paper, Fig. 1).
    Latency(Box<LatencyArgs>),
    /// Leader failover in virtual time: a steady stream of proposals, the leader crashes,
    /// many seeds; detection, the next decision and the timeline around the crash, Velos
    /// beside the Mu baseline (Velos paper, Fig. 2).
    Failover(Box<FailoverArgs>),
    /// Three replicas in this process: Velos on the in-process backend beside OmniPaxos
    /// (in-memory storage, messages moved in-process), commits per second with one client
    /// and with many, and CPU time per decision; medians over repeats run side by side.
    Embed(Box<EmbedArgs>),
    /// A follower replaced by a fresh process while the leader decides back to back, in
    /// virtual time: the replacement's first vote, its catching up, and the leader's
    /// decision rate meanwhile.
    Join(Box<super::bench_join::JoinArgs>),
    /// What durability costs on this machine's disk (`Config::durable`): commits per
    /// second and latency with it off and on, side by side; the durable acknowledgement
    /// against the machine's own `fdatasync`; the recovery's read rate against a plain
    /// read.
    Durable(Box<super::bench_durable::DurableArgs>),
    /// A bank service on the embedding (three replicas on the in-process backend, 4 MiB
    /// of accounts, four clients in exactly-once sessions): the leader or a follower
    /// crashed, then replaced while the clients write; the commit gaps the replacement
    /// causes, its first vote, and every answer checked.
    Bank(Box<super::bench_bank::BankArgs>),
}

/// Arguments of `velos bench embed`. Unset options take the full run's values (or, with
/// `--quick`, the small run's).
#[derive(Args)]
struct EmbedArgs {
    /// A small run (one repeat, a few thousand commits), for tests and a first look.
    #[arg(long)]
    quick: bool,
    /// Repeats of the six measurements, 1 to 100 (default 5); medians are reported.
    #[arg(long, value_parser = number::<usize>(1, 100, ""))]
    repeats: Option<usize>,
    /// Commits measured per one-client run, 1 to 10^7 (default 200000).
    #[arg(long, value_parser = number::<u64>(1, MAX_COMMITS, ""))]
    commits_1client: Option<u64>,
    /// Commits measured per many-client run, 1 to 10^7 (default 500000).
    #[arg(long, value_parser = number::<u64>(1, MAX_COMMITS, ""))]
    commits_many: Option<u64>,
    /// Commits before each measured window, 0 to 10^6 (default 5000).
    #[arg(long, value_parser = number::<u64>(0, 1_000_000, ""))]
    warmup_commits: Option<u64>,
    /// Commands outstanding in the many-client runs, 1 to 4096 and at most
    /// `--commits-many` (default 64).
    #[arg(long, value_parser = number::<u64>(1, 4096, ""))]
    outstanding: Option<u64>,
    /// Commands per log entry in the batched runs (both systems), 1 to 64, dividing
    /// `--outstanding` (default 16, or the largest divisor of `--outstanding` below it).
    #[arg(long, value_parser = number::<u64>(1, 64, ""))]
    batch: Option<u64>,
    /// Velos: slots the leader keeps prepared or accepting at once, 1 to 15 (default 4).
    #[arg(long, value_parser = number::<u32>(1, 15, ""))]
    velos_pipeline: Option<u32>,
    /// Velos: how followers idle, spin (the backend's idle back-off: spin, yield, then
    /// sleep; default) or sleep.
    #[arg(long, value_parser = ["spin", "sleep"])]
    velos_follower_idle: Option<String>,
    /// OmniPaxos: wall time between ticks, in µs, 1 to 10^6 (default 1000).
    #[arg(long, value_parser = number::<u64>(1, 1_000_000, " µs"))]
    omnipaxos_tick_us: Option<u64>,
    /// OmniPaxos: ticks before an election timeout, 1 to 1000 (default 10).
    #[arg(long, value_parser = number::<u64>(1, 1_000, ""))]
    omnipaxos_election_ticks: Option<u64>,
    /// Write embed.json into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

impl EmbedArgs {
    fn config(&self) -> Result<EmbedConfig, String> {
        let mut c = if self.quick {
            EmbedConfig::quick()
        } else {
            EmbedConfig::full()
        };
        c.repeats = self.repeats.unwrap_or(c.repeats);
        c.commits_1client = self.commits_1client.unwrap_or(c.commits_1client);
        c.commits_many = self.commits_many.unwrap_or(c.commits_many);
        c.warmup_commits = self.warmup_commits.unwrap_or(c.warmup_commits);
        c.outstanding = self.outstanding.unwrap_or(c.outstanding);
        c.batch = match self.batch {
            Some(b) if c.outstanding % b != 0 => {
                return Err(format!(
                    "--batch {b} does not divide --outstanding {}",
                    c.outstanding
                ));
            }
            Some(b) => b,
            None => (1..=c.batch.min(c.outstanding))
                .rev()
                .find(|b| c.outstanding % b == 0)
                .unwrap_or(1),
        };
        c.velos_pipeline = self.velos_pipeline.unwrap_or(c.velos_pipeline);
        if let Some(name) = &self.velos_follower_idle {
            c.velos_follower_idle = FollowerIdle::by_name(name)
                .ok_or_else(|| format!("unknown follower idle mode {name:?}"))?;
        }
        if let Some(us) = self.omnipaxos_tick_us {
            c.omnipaxos_tick_ns = us
                .checked_mul(1_000)
                .ok_or_else(|| format!("{us} µs is too long"))?;
        }
        c.omnipaxos_election_ticks = self
            .omnipaxos_election_ticks
            .unwrap_or(c.omnipaxos_election_ticks);
        if c.outstanding > c.commits_many {
            return Err(format!(
                "--outstanding {} is more than --commits-many {}",
                c.outstanding, c.commits_many
            ));
        }
        c.check().map_err(|e| format!("{e:#}"))?;
        Ok(c)
    }
}

fn run_embed(args: &EmbedArgs) -> ExitCode {
    use velos_bench::embed;
    let job = Job {
        name: "embed",
        run: embed::run,
        write: embed::write_outputs,
        missing_premises: |_| Vec::new(),
        text: &|r: &embed::EmbedReport| {
            format!(
                "{}{} repeats, {:.1} s wall\n",
                embed::table(r),
                r.config.repeats,
                r.wall_seconds
            )
        },
    };
    job.main(args.config(), args.out.as_deref(), args.json)
}

/// The most commits one `velos bench embed` run may measure.
const MAX_COMMITS: u64 = 10_000_000;

/// Arguments of `velos bench failover`. Unset options take the full sweep's values (or,
/// with `--quick`, the small sweep's).
#[derive(Args)]
struct FailoverArgs {
    /// Where: `sim` (default) runs the simulated sweep in virtual time; `verbs` crashes
    /// both protocols' leaders on a real RDMA device, every node in this process (a
    /// build with `--features verbs`).
    #[arg(long, value_enum, default_value = "sim")]
    backend: FailoverBackend,
    /// A small sweep (3 seeds, short runs; with `--backend verbs`, 3 trials), for tests
    /// and a first look.
    #[arg(long)]
    quick: bool,
    /// With `--backend verbs`: crashes per protocol, 1 to 1000 (default 20).
    #[arg(long, value_parser = number::<u32>(1, 1_000, ""))]
    trials: Option<u32>,
    /// With `--backend verbs`: the factor on both protocols' published timing, 1 to
    /// 100000 (default 1: the papers'; 1000 under soft-RoCE in an emulated machine).
    #[arg(long, value_parser = number::<u64>(1, 100_000, ""))]
    time_scale: Option<u64>,
    /// Protocols, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = parse_protocol)]
    protocols: Option<Vec<Protocol>>,
    /// Seeds per protocol, 1 to 10000 (default 200), each crashing its leader at its own
    /// instant within 40 µs after the crash time.
    #[arg(long, value_parser = number::<u64>(1, 10_000, ""))]
    seeds: Option<u64>,
    /// The first seed (default 1).
    #[arg(long)]
    first_seed: Option<u64>,
    /// Bytes per value, 10 to 4096 (default 10).
    #[arg(long, value_parser = number::<u32>(10, 4096, " bytes"))]
    value_bytes: Option<u32>,
    #[arg(long, value_parser = number::<u64>(100, 100_000, " µs"), help = format!("When Velos's leader crashes, in µs, a multiple of 100 from 100 to 100000 (default {}; {} with --quick)", FailoverConfig::full().velos_crash_ns / 1_000, FailoverConfig::quick().velos_crash_ns / 1_000))]
    velos_crash_us: Option<u64>,
    #[arg(long, value_parser = number::<u64>(100, 100_000, " µs"), help = format!("How long Velos runs after the crash, in µs, 100 to 100000 (default {}; {} with --quick)", FailoverConfig::full().velos_after_ns / 1_000, FailoverConfig::quick().velos_after_ns / 1_000))]
    velos_after_us: Option<u64>,
    #[arg(long, value_parser = number::<u64>(100, 100_000, " µs"), help = format!("When Mu's leader crashes, in µs, a multiple of 100 from 100 to 100000 (default {}; {} with --quick)", FailoverConfig::full().mu_crash_ns / 1_000, FailoverConfig::quick().mu_crash_ns / 1_000))]
    mu_crash_us: Option<u64>,
    #[arg(long, value_parser = number::<u64>(100, 100_000, " µs"), help = format!("How long Mu runs after the crash, in µs, 100 to 100000 (default {}; {} with --quick)", FailoverConfig::full().mu_after_ns / 1_000, FailoverConfig::quick().mu_after_ns / 1_000))]
    mu_after_us: Option<u64>,
    /// Latency profile: paper-cx6, cluster, generic or uniform (default paper-cx6).
    #[arg(long)]
    latency: Option<String>,
    /// Runs simulated at once, 1 to 256 (default: the number of cores).
    #[arg(long, value_parser = number::<usize>(1, MAX_JOBS, ""))]
    jobs: Option<usize>,
    /// Write failover.json and SVG plots (timeline, failover distribution) into this
    /// directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Where `velos bench failover` runs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FailoverBackend {
    /// The simulator, in virtual time.
    Sim,
    /// A real RDMA device.
    Verbs,
}

impl FailoverArgs {
    /// What `--backend verbs` runs with; the simulator's own options are refused.
    fn verbs_wanted(&self) -> Result<VerbsWanted, String> {
        let sim_only = [
            ("--seeds", self.seeds.is_some()),
            ("--first-seed", self.first_seed.is_some()),
            ("--velos-crash-us", self.velos_crash_us.is_some()),
            ("--velos-after-us", self.velos_after_us.is_some()),
            ("--mu-crash-us", self.mu_crash_us.is_some()),
            ("--mu-after-us", self.mu_after_us.is_some()),
            ("--latency", self.latency.is_some()),
            ("--jobs", self.jobs.is_some()),
            ("--out", self.out.is_some()),
        ];
        if let Some((flag, _)) = sim_only.iter().find(|(_, set)| *set) {
            return Err(format!(
                "{flag} is an option of the simulated sweep, not of --backend verbs"
            ));
        }
        Ok(VerbsWanted {
            protocols: self.protocols.clone(),
            trials: self.trials.or(self.quick.then_some(3)),
            time_scale: self.time_scale,
            value_bytes: self.value_bytes,
            json: self.json,
        })
    }

    fn config(&self) -> Result<FailoverConfig, String> {
        for (flag, set) in [
            ("--trials", self.trials.is_some()),
            ("--time-scale", self.time_scale.is_some()),
        ] {
            if set {
                return Err(format!("{flag} is an option of --backend verbs"));
            }
        }
        let mut c = if self.quick {
            FailoverConfig::quick()
        } else {
            FailoverConfig::full()
        };
        if let Some(v) = &self.protocols {
            c.protocols.clone_from(v);
        }
        c.seeds = self.seeds.unwrap_or(c.seeds);
        c.first_seed = self.first_seed.unwrap_or(c.first_seed);
        if c.first_seed.checked_add(c.seeds).is_none() {
            return Err(format!(
                "--first-seed {} with --seeds {}: the last seed passes 2^64 - 1",
                c.first_seed, c.seeds
            ));
        }
        for (flag, us) in [
            ("--velos-crash-us", self.velos_crash_us),
            ("--mu-crash-us", self.mu_crash_us),
        ] {
            if let Some(us) = us.filter(|us| us % 100 != 0) {
                return Err(format!("{flag} {us}: a multiple of 100 µs"));
            }
        }
        c.value_bytes = self.value_bytes.unwrap_or(c.value_bytes);
        let ns = |us: Option<u64>, default: u64| -> Result<u64, String> {
            us.map_or(Ok(default), |us| {
                us.checked_mul(1_000)
                    .ok_or_else(|| format!("{us} µs is too long"))
            })
        };
        c.velos_crash_ns = ns(self.velos_crash_us, c.velos_crash_ns)?;
        c.velos_after_ns = ns(self.velos_after_us, c.velos_after_ns)?;
        c.mu_crash_ns = ns(self.mu_crash_us, c.mu_crash_ns)?;
        c.mu_after_ns = ns(self.mu_after_us, c.mu_after_ns)?;
        c.jobs = self.jobs.unwrap_or(c.jobs);
        if let Some(name) = &self.latency {
            c.latency = LatencyModel::by_name(name)
                .ok_or_else(|| format!("unknown latency profile {name:?}"))?;
        }
        c.check().map_err(|e| format!("{e:#}"))?;
        Ok(c)
    }
}

fn run_failover(args: &FailoverArgs) -> ExitCode {
    use velos_bench::failover;
    if args.backend == FailoverBackend::Verbs {
        return match args.verbs_wanted() {
            Ok(wanted) => super::bench_failover_verbs::run(&wanted),
            Err(e) => {
                eprintln!("bench failover: {e}");
                ExitCode::from(2)
            }
        };
    }
    let job = Job {
        name: "failover",
        run: failover::run,
        write: failover::write_outputs,
        missing_premises: failover::FailoverReport::missing_premises,
        text: &|r: &failover::FailoverReport| {
            format!(
                "{}{} seeds per protocol, latency model {:?}, {:.1} s wall\n",
                failover::table(r),
                r.config.seeds,
                r.config.latency.name,
                r.wall_seconds
            )
        },
    };
    job.main(args.config(), args.out.as_deref(), args.json)
}

/// Arguments of `velos bench latency`. Unset options take the full sweep's values (or,
/// with `--quick`, the tiny sweep's).
#[derive(Args)]
struct LatencyArgs {
    /// A tiny sweep (3 sizes, a few decisions), for tests and a first look.
    #[arg(long)]
    quick: bool,
    /// Protocols, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = parse_protocol)]
    protocols: Option<Vec<Protocol>>,
    /// Value sizes in bytes, each 1 to 65536, comma-separated (default 1,2,4,...,4096).
    #[arg(long, value_delimiter = ',', value_parser = number::<usize>(1, 65_536, " bytes"))]
    sizes: Option<Vec<usize>>,
    /// Placement: host, device or both (default both).
    #[arg(long, value_parser = ["host", "device", "both"])]
    memory: Option<String>,
    /// Decisions measured per point, 1 to 100000 (default 200).
    #[arg(long, value_parser = number::<usize>(1, 100_000, ""))]
    proposals: Option<usize>,
    /// Decisions before those, not measured, 0 to 100000 (default 20).
    #[arg(long, value_parser = number::<usize>(0, 100_000, ""))]
    warmup_proposals: Option<usize>,
    /// Think time between a decision and the next proposal, in ns, 0 to 10^6 (default
    /// 5000).
    #[arg(long, value_parser = number::<u64>(0, 1_000_000, " ns"))]
    gap_ns: Option<u64>,
    /// The leader's pause when idle, in ns, 0 to 10^6 (default 200, the engine's).
    #[arg(long, value_parser = number::<u64>(0, 1_000_000, " ns"))]
    idle_pause_ns: Option<u64>,
    /// The replicas' failure timeout, in ns, 2001 to 10^9 (default 1000000: a stable leader).
    #[arg(long, value_parser = number::<u64>(2_001, 1_000_000_000, " ns"))]
    failure_timeout_ns: Option<u64>,
    /// Replays of the leader's recorded inputs timed for the CPU-charged latency; each
    /// decision keeps its fastest, 1 to 1000 (default 15, 3 with --quick).
    #[arg(long, value_parser = number::<usize>(1, 1_000, ""))]
    cpu_replays: Option<usize>,
    /// The seed (default 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Latency profile: paper-cx6, cluster, generic or uniform (default paper-cx6).
    #[arg(long)]
    latency: Option<String>,
    /// Points simulated at once, 1 to 256 (default: the number of cores).
    #[arg(long, value_parser = number::<usize>(1, MAX_JOBS, ""))]
    jobs: Option<usize>,
    /// Write latency.json and latency.svg into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// The most virtual think time (`--gap-ns` per decision) of one `bench latency` point.
const MAX_THINK_NS: u64 = 1_000_000_000;

fn parse_protocol(s: &str) -> Result<Protocol, String> {
    Protocol::by_name(s).ok_or_else(|| {
        let names: Vec<&str> = Protocol::ALL.iter().map(|p| p.name()).collect();
        format!("unknown protocol {s:?} (known: {})", names.join(", "))
    })
}

impl LatencyArgs {
    fn config(&self) -> Result<LatencyConfig, String> {
        let mut c = if self.quick {
            LatencyConfig::quick()
        } else {
            LatencyConfig::full()
        };
        if let Some(v) = &self.protocols {
            c.protocols.clone_from(v);
        }
        if let Some(v) = &self.sizes {
            c.sizes.clone_from(v);
        }
        match self.memory.as_deref() {
            Some("host") => c.device_memory = vec![false],
            Some("device") => c.device_memory = vec![true],
            _ => {}
        }
        c.proposals = self.proposals.unwrap_or(c.proposals);
        c.warmup_proposals = self.warmup_proposals.unwrap_or(c.warmup_proposals);
        c.gap_ns = self.gap_ns.unwrap_or(c.gap_ns);
        // The log is not recycled: every decision keeps a value buffer per replica.
        let largest = c.sizes.iter().copied().max().unwrap_or(1);
        let words = c.words_per_node();
        if words > velos_bench::latency::MAX_WORDS_PER_NODE {
            return Err(format!(
                "--proposals {} and --warmup-proposals {} of values up to {largest} bytes \
                 (--sizes) need {words} words per node; at most 2^24",
                c.proposals, c.warmup_proposals
            ));
        }
        let think = (c.proposals + c.warmup_proposals) as u64 * c.gap_ns;
        if think > MAX_THINK_NS {
            return Err(format!(
                "--proposals {} and --warmup-proposals {} with --gap-ns {} think for {think} ns \
                 of virtual time per point; at most {MAX_THINK_NS} (1 s)",
                c.proposals, c.warmup_proposals, c.gap_ns
            ));
        }
        c.idle_pause_ns = self.idle_pause_ns.unwrap_or(c.idle_pause_ns);
        c.failure_timeout_ns = self.failure_timeout_ns.unwrap_or(c.failure_timeout_ns);
        c.cpu_replays = self.cpu_replays.unwrap_or(c.cpu_replays);
        c.seed = self.seed.unwrap_or(c.seed);
        c.jobs = self.jobs.unwrap_or(c.jobs);
        if let Some(name) = &self.latency {
            c.latency = LatencyModel::by_name(name)
                .ok_or_else(|| format!("unknown latency profile {name:?}"))?;
        }
        c.check().map_err(|e| format!("{e:#}"))?;
        Ok(c)
    }
}

fn run_latency(args: &LatencyArgs) -> ExitCode {
    use velos_bench::latency;
    let job = Job {
        name: "latency",
        run: latency::run,
        write: latency::write_outputs,
        missing_premises: |_| Vec::new(),
        text: &|r: &latency::LatencyReport| {
            format!(
                "{}{} points, latency model {:?}, {:.1} s wall\n",
                latency::table(r),
                r.points.len(),
                r.config.latency.name,
                r.wall_seconds
            )
        },
    };
    job.main(args.config(), args.out.as_deref(), args.json)
}

/// Arguments of `velos bench locks`. Unset options take the full sweep's values (or,
/// with `--quick`, the tiny sweep's).
#[derive(Args)]
struct LocksArgs {
    /// A tiny sweep (P = 4, 8; short windows), for tests and a first look.
    #[arg(long)]
    quick: bool,
    /// Locks, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_parser = parse_lock)]
    locks: Option<Vec<LockKind>>,
    /// Numbers of processes P, each 1 to 1024, comma-separated (default 4,8,16,32,64).
    #[arg(long, short = 'p', value_delimiter = ',', value_parser = number::<usize>(1, 1_024, ""))]
    processes: Option<Vec<usize>>,
    /// Writer fractions F_W in percent, comma-separated (default 0.2,2,5,25,100).
    #[arg(long, value_delimiter = ',')]
    writer_percent: Option<Vec<f64>>,
    /// Processes per node, 1 to 1024 (default 4).
    #[arg(long, value_parser = number::<usize>(1, 1_024, ""))]
    per_node: Option<usize>,
    /// RMA-RW T_DC: processes per physical reader counter, 1 to 1024 (default: processes per node).
    #[arg(long, value_parser = number::<usize>(1, 1_024, ""))]
    t_dc: Option<usize>,
    /// RMA-RW T_L at the node level, 1 to 32767 (default 16).
    #[arg(long, value_parser = number::<u64>(1, 32_767, ""))]
    t_l_node: Option<u64>,
    /// RMA-RW T_L at the root level, 1 to 32767 (default 64).
    #[arg(long, value_parser = number::<u64>(1, 32_767, ""))]
    t_l_root: Option<u64>,
    /// RMA-RW T_R: readers in a row before a waiting writer, 1 to 2^20 (default 256).
    #[arg(long, value_parser = number::<u64>(1, 1 << 20, ""))]
    t_r: Option<u64>,
    /// Local operations in the critical section: one store, then loads, 1 to 10000 (default 1).
    #[arg(long, value_parser = number::<u32>(1, 10_000, ""))]
    cs_ops: Option<u32>,
    /// Local loads between a release and the next acquire, 0 to 10000 (default 0).
    #[arg(long, value_parser = number::<u32>(0, 10_000, ""))]
    think_ops: Option<u32>,
    /// Virtual warm-up before measuring, in µs, 0 to 10^6 (default 50 on the cluster
    /// profile, as many lock rounds on the others).
    #[arg(long, value_parser = number::<u64>(0, 1_000_000, " µs"))]
    warmup_us: Option<u64>,
    /// The measured window of virtual time, in µs, 1 to 10^6 (default 1000 on the cluster
    /// profile, as many lock rounds on the others; a sweep estimated past 10^9 steps is
    /// refused).
    #[arg(long, value_parser = number::<u64>(1, 1_000_000, " µs"))]
    measure_us: Option<u64>,
    /// The seed (default 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Latency profile: cluster, paper-cx6, generic or uniform (default cluster).
    #[arg(long)]
    latency: Option<String>,
    /// Points simulated at once, 1 to 256 (default: the number of cores).
    #[arg(long, value_parser = number::<usize>(1, MAX_JOBS, ""))]
    jobs: Option<usize>,
    /// Write locks.json and SVG plots (throughput vs P per F_W) into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

fn parse_lock(s: &str) -> Result<LockKind, String> {
    LockKind::by_name(s).ok_or_else(|| {
        let names: Vec<&str> = LockKind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown lock {s:?} (known: {})", names.join(", "))
    })
}

impl LocksArgs {
    fn config(&self) -> Result<LocksConfig, String> {
        let mut c = if self.quick {
            LocksConfig::quick()
        } else {
            LocksConfig::full()
        };
        if let Some(v) = &self.locks {
            c.locks.clone_from(v);
        }
        if let Some(v) = &self.processes {
            c.processes.clone_from(v);
        }
        if let Some(v) = &self.writer_percent {
            if let Some(f) = v.iter().find(|f| !(0.0..=100.0).contains(*f)) {
                return Err(format!("--writer-percent {f}: from 0 to 100"));
            }
            c.writer_percents.clone_from(v);
        }
        c.per_node = self.per_node.unwrap_or(c.per_node);
        // The emulator tracks which nodes may write a node's memory in 64 bits.
        if let Some(&p) = c.processes.iter().find(|&&p| c.nodes(p) > 64) {
            return Err(format!(
                "--processes {p} at --per-node {} make {} nodes; at most 64",
                c.per_node,
                c.nodes(p)
            ));
        }
        c.t_dc = self.t_dc.or(c.t_dc);
        c.t_l_node = self.t_l_node.unwrap_or(c.t_l_node);
        c.t_l_root = self.t_l_root.unwrap_or(c.t_l_root);
        c.t_r = self.t_r.unwrap_or(c.t_r);
        c.cs_ops = self.cs_ops.unwrap_or(c.cs_ops);
        c.think_ops = self.think_ops.unwrap_or(c.think_ops);
        if let Some(name) = &self.latency {
            // The default windows hold as many lock rounds on every profile.
            c = c.on_profile(
                LatencyModel::by_name(name)
                    .ok_or_else(|| format!("unknown latency profile {name:?}"))?,
            );
        }
        c.warmup_ns = self.warmup_us.map_or(c.warmup_ns, |us| us * 1_000);
        c.measure_ns = self.measure_us.map_or(c.measure_ns, |us| us * 1_000);
        c.seed = self.seed.unwrap_or(c.seed);
        c.jobs = self.jobs.unwrap_or(c.jobs);
        c.check().map_err(|e| format!("{e:#}"))?;
        Ok(c)
    }
}

fn run_locks(args: &LocksArgs) -> ExitCode {
    use velos_bench::locks;
    let job = Job {
        name: "locks",
        run: locks::run,
        write: locks::write_outputs,
        missing_premises: |_| Vec::new(),
        text: &|r: &locks::LocksReport| {
            format!(
                "{}{} points, latency model {:?}, {:.1} s wall\n",
                locks::table(r),
                r.points.len(),
                r.config.latency.name,
                r.wall_seconds
            )
        },
    };
    job.main(args.config(), args.out.as_deref(), args.json)
}

/// Runs the subcommand.
pub fn run(args: BenchArgs) -> ExitCode {
    match args.what {
        Bench::Emulator { suite, .. } if !suite.exists() => {
            eprintln!(
                "bench emulator: --suite {}: no such file or directory (the litmus suite is \
                 velos-sim/litmus in the repository)",
                suite.display()
            );
            ExitCode::from(2)
        }
        Bench::Emulator {
            suite,
            repeats,
            ops,
            json,
        } => match velos_bench::emulator::measure(&suite, repeats, ops) {
            Ok(r) => {
                if json {
                    println!("{}", serde_json::to_string(&r).expect("report serialises"));
                } else {
                    println!(
                        "explorer: {} files, {} states, median {:.3} s, {:.0} states/s",
                        r.suite_files,
                        r.suite_states,
                        r.suite_seconds_median,
                        r.explorer_states_per_s
                    );
                    println!(
                        "simulator: {} ops ({} steps), median {:.3} s, {:.0} ops/s, {:.0} steps/s (one core)",
                        r.sim_ops,
                        r.sim_steps,
                        r.sim_seconds_median,
                        r.sim_ops_per_s,
                        r.sim_steps_per_s
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench emulator: {e:#}");
                ExitCode::from(2)
            }
        },
        Bench::Locks(args) => run_locks(&args),
        Bench::Latency(args) => run_latency(&args),
        Bench::Failover(args) => run_failover(&args),
        Bench::Embed(args) => run_embed(&args),
        Bench::Join(args) => super::bench_join::run(&args),
        Bench::Durable(args) => super::bench_durable::run(&args),
        Bench::Bank(args) => super::bench_bank::run(&args),
    }
}
