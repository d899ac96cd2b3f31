//! `velos sim`: a Velos cluster on the simulation driver, with crashes, a timeline and the
//! checks; exit status 1 when a check fails.

use super::flags::{MAX_DURATION_NS, duration, human, number, parse_duration};
use super::sim_report::print_report;
use clap::Args;
use std::process::ExitCode;
use velos::core::log::LogConfig;
use velos::core::log::membership::Members;
use velos::sim::latency::LatencyModel;
use velos_testkit::durable::disks::DiskFaults;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec, run};
use velos_testkit::harness::durable;
use velos_testkit::harness::script::ClientScript;
use velos_testkit::harness::spec::DurableSpec;

/// Arguments of `velos sim`.
#[derive(Args, Clone)]
pub struct SimArgs {
    /// Replicas, 1 to 31 (the word layout's proposers; every one an acceptor; the lowest
    /// live id leads first, and keeps the lead while it lives).
    #[arg(long, default_value_t = 3, value_parser = number::<u16>(1, 31, ""))]
    replicas: u16,
    /// The seed: it fixes the whole run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Virtual time to run: `500us`, `2ms`, `1s`, or nanoseconds (1ns to 3600s).
    #[arg(long, default_value = "2ms", value_parser = duration(1, MAX_DURATION_NS))]
    duration: u64,
    /// Crash whichever replica leads at this time.
    #[arg(long, value_parser = parse_duration)]
    crash_leader_at: Option<u64>,
    /// Crash replica NODE at time T (`NODE@T`, repeatable).
    #[arg(long, value_parser = parse_crash)]
    crash: Vec<(u16, u64)>,
    /// Crash replica NODE at time T and start a fresh process in its place D later (`NODE@T`
    /// or `NODE@T+D`, repeatable): it starts on blank memory at the next incarnation, and
    /// joins through the log (the leader removes the old incarnation, then adds it).
    #[arg(long, value_parser = parse_replace)]
    replace: Vec<(u16, u64, u64)>,
    /// The join path reaches replica NODE only D after each `--replace` starts its new
    /// process (`NODE@D`, repeatable; the others at once): until then NODE's queue pairs
    /// towards the new process fail, as over real RDMA when the joiner meets it late.
    #[arg(long, value_parser = parse_crash)]
    told_late: Vec<(u16, u64)>,
    /// Pause replica NODE's CPU at time T for D (`NODE@T+D`, repeatable): its NIC still
    /// serves the others.
    #[arg(long, value_parser = parse_pause)]
    pause: Vec<(u16, u64, u64)>,
    /// Slow every queue pair towards replica NODE from time T for D, each step costing
    /// EXTRA more (`NODE@T+D:EXTRA`, repeatable): its heartbeats and words read late.
    #[arg(long, value_parser = parse_delay)]
    delay: Vec<(u16, u64, u64, u64)>,
    /// Slow every queue pair replica NODE posts on from time T for D, each step costing
    /// EXTRA more (`NODE@T+D:EXTRA`, repeatable): the others read its memory at full speed,
    /// so it looks alive while everything it posts crawls (a leader that decides nothing).
    #[arg(long, value_parser = parse_delay)]
    delay_from: Vec<(u16, u64, u64, u64)>,
    /// Run a service on every replica that snapshots every N entries: the log's ring
    /// recycles its slots, and a replica that falls off it copies a snapshot (at least 1).
    #[arg(long, value_parser = number::<u64>(1, u64::MAX, ""))]
    snapshot_every: Option<u64>,
    /// The size of those snapshots in bytes (a digest padded with filler), so that
    /// copies of many words are exercised (0 to 16 MiB; at least 8 are sent).
    #[arg(long, default_value_t = 8, value_parser = number::<u32>(0, MAX_SNAPSHOT_BYTES, " bytes"))]
    snapshot_bytes: u32,
    /// The replicas that vote at first (`0,1,2`; default: all): the others follow the log
    /// and can be added with `--reconfigure`.
    #[arg(long, value_parser = parse_members)]
    members: Option<Members>,
    /// At time T, the leader proposes that MEMBERS vote from then on (`T=LIST`, e.g.
    /// `300us=0,1,2,3`; repeatable, one replica added or removed each time).
    #[arg(long, value_parser = parse_reconfigure)]
    reconfigure: Vec<(u64, Members)>,
    /// Leader leases of this length (`--lease 10us`; 1ns to the failure timeout, 20 µs):
    /// every replica is asked for a lease read every 2 µs, and every read served is
    /// checked against the entries applied anywhere before it was asked.
    #[arg(long, value_parser = duration(1, FAILURE_TIMEOUT_NS))]
    lease: Option<u64>,
    /// Log slots, 1 to 2^24 (the emulated memory of every replica holds at most 256 MiB
    /// in all).
    #[arg(long, default_value_t = 4096, value_parser = number::<u32>(1, 1 << 24, ""))]
    slots: u32,
    /// Bytes per value, 10 to 65536.
    #[arg(long, default_value_t = 16, value_parser = number::<usize>(10, MAX_VALUE_BYTES, " bytes"))]
    value_size: usize,
    /// Values each replica proposes while it leads (default: enough to fill the log).
    #[arg(long)]
    values: Option<u64>,
    /// Slots pre-prepared by the leader, 1 to 15.
    #[arg(long, default_value_t = 4, value_parser = number::<u32>(1, 15, ""))]
    pipeline: u32,
    /// Start every slot promised this many proposal numbers below the overflow threshold,
    /// at the last replica at the threshold itself (exercises the overflow fallback: slots
    /// freeze epoch 0 and move to epoch 1).
    #[arg(long)]
    near_overflow: Option<u64>,
    /// Epochs of the overflow fallback (acceptor words per slot), 1 to 256.
    #[arg(long, default_value_t = 2, value_parser = number::<u32>(1, 256, ""))]
    epochs: u32,
    /// Latency profile of the emulator: `cluster`, `paper-cx6`, `generic` or `uniform`.
    #[arg(long, default_value = "cluster")]
    latency: String,
    /// Jitter in ns instead of the profile's: each step's cost gets a uniformly drawn extra
    /// of at most this (0 to 1 s).
    #[arg(long, value_parser = number::<u64>(0, MAX_JITTER_NS, " ns"))]
    jitter: Option<u64>,
    /// Each step's extra is also at most the step's own cost (as in `velos vopr`): else a
    /// large jitter slows every CPU step by far more than its cost.
    #[arg(long)]
    jitter_within_cost: bool,
    /// Timeline interval (at most 10,000 lines: `--duration` / 10,000 or more).
    #[arg(long, default_value = "100us", value_parser = duration(1, MAX_DURATION_NS))]
    interval: u64,
    /// Every replica persists what it applies, the snapshots it takes and those it
    /// copies on a simulated disk of its own (an NVMe drive's costs: a write 2 µs, a sync
    /// 20 µs): the report shows the durable index (every slot below it on a majority's
    /// disks) and how long an acknowledged slot took to become durable.
    #[arg(long)]
    durable: bool,
    /// Every replica loses power at time T (with `--durable`): what each disk recovers
    /// is checked against the decided log and the durable index, and the cluster restarts
    /// from its disks for the rest of `--duration`. Faults come before T.
    #[arg(long, value_parser = parse_duration, requires = "durable")]
    power_loss_at: Option<u64>,
    /// With `--durable`: replica NODE's syncs take FACTOR times as long (`NODE@FACTOR`,
    /// 2 to 1000).
    #[arg(long, value_parser = parse_slow_syncs, requires = "durable")]
    slow_syncs: Option<(u16, u64)>,
    /// With `--durable`: replica NODE's disk holds BYTES at most (`NODE@BYTES`, 1 byte to
    /// 1 TiB): it fills, that replica stops persisting and says so, the others go on.
    #[arg(long, value_parser = parse_disk_full, requires = "durable")]
    disk_full: Option<(u16, u64)>,
    /// With `--power-loss-at`: replica NODE's disk has a bit flipped at the power loss (a
    /// bad sector): its checksums catch it, and the recovery takes what it lost from the
    /// others' logs.
    #[arg(long, requires = "power_loss_at")]
    flip_bit: Option<u16>,
    /// Print one JSON object (the last line of standard output) instead of the report.
    #[arg(long)]
    json: bool,
}

/// The most lines the timeline prints (`--duration` / `--interval`).
pub const MAX_TIMELINE_LINES: u64 = 10_000;

/// The largest `--value-size`.
const MAX_VALUE_BYTES: u64 = 65_536;

/// The largest `--snapshot-bytes`: 16 MiB.
const MAX_SNAPSHOT_BYTES: u64 = 16 << 20;

/// The largest `--jitter`: 1 s per step.
const MAX_JITTER_NS: u64 = 1_000_000_000;

/// The failure timeout of `velos sim`'s log (the longest `--lease`).
const FAILURE_TIMEOUT_NS: u64 = 20_000;

/// The emulated memory of all replicas together, in 8-byte words: 256 MiB.
const MAX_MEMORY_WORDS: u64 = 1 << 25;

fn parse_crash(s: &str) -> Result<(u16, u64), String> {
    let (node, at) = s
        .split_once('@')
        .ok_or_else(|| format!("{s:?}: expected NODE@TIME, e.g. 1@500us"))?;
    let node = node
        .parse()
        .map_err(|_| format!("{node:?} is not a replica id"))?;
    Ok((node, parse_duration(at)?))
}

/// `NODE@N` with `N` in `lo..=hi` (`what` names it in errors).
fn parse_node_number(s: &str, what: &str, (lo, hi): (u64, u64)) -> Result<(u16, u64), String> {
    let (node, n) = s
        .split_once('@')
        .ok_or_else(|| format!("{s:?}: expected NODE@{what}"))?;
    let node = node
        .parse()
        .map_err(|_| format!("{node:?} is not a replica id"))?;
    let n: u64 = n
        .parse()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("{n:?}: {what} is a whole number from {lo} to {hi}"))?;
    Ok((node, n))
}

fn parse_slow_syncs(s: &str) -> Result<(u16, u64), String> {
    parse_node_number(s, "FACTOR", (2, 1_000))
}

fn parse_disk_full(s: &str) -> Result<(u16, u64), String> {
    parse_node_number(s, "BYTES", (1, 1 << 40))
}

fn parse_members(s: &str) -> Result<Members, String> {
    let ids: Result<Vec<u16>, String> = s
        .split(',')
        .map(|r| {
            r.trim()
                .parse::<u16>()
                .ok()
                .filter(|&r| r < 64)
                .ok_or_else(|| format!("{r:?} is not a replica id"))
        })
        .collect();
    Ok(Members::of(&ids?))
}

fn parse_reconfigure(s: &str) -> Result<(u64, Members), String> {
    let (at, members) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected TIME=LIST, e.g. 300us=0,1,2,3"))?;
    Ok((parse_duration(at)?, parse_members(members)?))
}

fn list(m: Members) -> String {
    m.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_pause(s: &str) -> Result<(u16, u64, u64), String> {
    let (crash, duration) = s
        .split_once('+')
        .ok_or_else(|| format!("{s:?}: expected NODE@TIME+DURATION, e.g. 2@100us+300us"))?;
    let (node, at) = parse_crash(crash)?;
    Ok((node, at, parse_duration(duration)?))
}

/// `NODE@TIME[+AFTER]` for `--replace`: `(node, at, after)`.
fn parse_replace(s: &str) -> Result<(u16, u64, u64), String> {
    match s.split_once('+') {
        Some(_) => parse_pause(s),
        None => parse_crash(s).map(|(node, at)| (node, at, 0)),
    }
    .map_err(|e| format!("{e} (--replace NODE@TIME or NODE@TIME+AFTER, e.g. 2@100us+50us)"))
}

/// `NODE@TIME+DURATION:EXTRA` for `--delay`: `(node, at, extra, duration)`.
fn parse_delay(s: &str) -> Result<(u16, u64, u64, u64), String> {
    let (pause, extra) = s.split_once(':').ok_or_else(|| {
        format!("{s:?}: expected NODE@TIME+DURATION:EXTRA, e.g. 0@100us+300us:10us")
    })?;
    let (node, at, duration) = parse_pause(pause)?;
    Ok((node, at, parse_duration(extra)?, duration))
}

/// Runs `velos sim`.
pub fn run_cli(a: SimArgs) -> ExitCode {
    let mut log = LogConfig::new(a.replicas, a.slots, a.value_size.max(10) as u32);
    log.pipeline = a.pipeline;
    log.epochs = a.epochs;
    if let Err(e) = check_shape(&a) {
        eprintln!("velos sim: {e}");
        return ExitCode::from(2);
    }
    if a.snapshot_every.is_some() {
        log.max_snapshot_bytes = a.snapshot_bytes.max(8); // the service's snapshot
    }
    log.lease_ns = a.lease.unwrap_or(0);
    if let Some(m) = a.members {
        if m.0 & !Members::all(a.replicas).0 != 0 {
            eprintln!(
                "velos sim: --members {}: replicas 0 to {} (--replicas {})",
                list(m),
                a.replicas - 1,
                a.replicas
            );
            return ExitCode::from(2);
        }
        log.members = m;
    }
    if let Err(e) = log.validate() {
        eprintln!("velos sim: {e}");
        return ExitCode::from(2);
    }
    let mut members = log.members;
    for &(t, next) in &a.reconfigure {
        if next.0 & !Members::all(a.replicas).0 != 0 || !members.one_change_to(next) {
            eprintln!(
                "velos sim: --reconfigure {t}={}: one of the {} replicas added to or removed \
                 from {} at a time, one left",
                list(next),
                a.replicas,
                list(members)
            );
            return ExitCode::from(2);
        }
        members = next;
    }
    if let Some(&(node, _)) = a.crash.iter().find(|(n, _)| *n >= a.replicas) {
        eprintln!(
            "velos sim: --crash {node}@…: there are {} replicas",
            a.replicas
        );
        return ExitCode::from(2);
    }
    if let Some(&(node, _, _)) = a.pause.iter().find(|(n, _, _)| *n >= a.replicas) {
        eprintln!(
            "velos sim: --pause {node}@…: there are {} replicas",
            a.replicas
        );
        return ExitCode::from(2);
    }
    if let Some(&(node, ..)) = a.replace.iter().find(|d| d.0 >= a.replicas) {
        eprintln!(
            "velos sim: --replace {node}@…: there are {} replicas",
            a.replicas
        );
        return ExitCode::from(2);
    }
    if let Some(&(node, _)) = a.told_late.iter().find(|d| d.0 >= a.replicas) {
        eprintln!(
            "velos sim: --told-late {node}@…: there are {} replicas",
            a.replicas
        );
        return ExitCode::from(2);
    }
    let disk_nodes = [
        ("--slow-syncs", a.slow_syncs.map(|f| f.0)),
        ("--disk-full", a.disk_full.map(|f| f.0)),
        ("--flip-bit", a.flip_bit),
    ];
    if let Some((flag, Some(node))) = disk_nodes
        .iter()
        .find(|(_, n)| n.is_some_and(|n| n >= a.replicas))
    {
        eprintln!(
            "velos sim: {flag} {node}: there are {} replicas",
            a.replicas
        );
        return ExitCode::from(2);
    }
    for (flag, delays) in [("--delay", &a.delay), ("--delay-from", &a.delay_from)] {
        if let Some(&(node, ..)) = delays.iter().find(|d| d.0 >= a.replicas) {
            eprintln!(
                "velos sim: {flag} {node}@…: there are {} replicas",
                a.replicas
            );
            return ExitCode::from(2);
        }
    }
    let Some(mut latency) = LatencyModel::by_name(&a.latency) else {
        eprintln!(
            "velos sim: --latency {}: profiles are cluster, paper-cx6, generic, uniform",
            a.latency
        );
        return ExitCode::from(2);
    };
    if let Some(j) = a.jitter {
        latency.jitter_ns = j;
    }
    latency.jitter_within_cost |= a.jitter_within_cost;
    let spec = ClusterSpec {
        log,
        seed: a.seed,
        duration_ns: a.duration,
        crash_leader_at: a.crash_leader_at,
        crashes: a.crash.clone(),
        slow: Vec::new(),
        client: ClientScript {
            count: a.values.unwrap_or(u64::from(a.slots)),
            size: a.value_size,
        },
        latency,
        near_overflow: a.near_overflow,
        device_memory: false,
        pauses: a.pause.clone(),
        delays: a.delay.clone(),
        delays_from: a.delay_from.clone(),
        snapshot_every: a.snapshot_every,
        snapshot_bytes: a.snapshot_bytes as usize,
        reconfigure: a.reconfigure.clone(),
        lease_reads: a.lease.is_some(),
        replace: a.replace.clone(),
        told_late: a.told_late.clone(),
        durable: a.durable.then(|| DurableSpec {
            power_loss_at: a.power_loss_at,
            flip_at_loss: a.flip_bit,
            faults: DiskFaults {
                slow_syncs: a.slow_syncs,
                full: a.disk_full,
                ..DiskFaults::default()
            },
        }),
    };
    if let Err(e) = check_times(&a, &spec).and_then(|()| check_power_loss(&a, &spec)) {
        eprintln!("velos sim: {e}");
        return ExitCode::from(2);
    }
    let mut report = if a.durable {
        durable::run(&spec)
    } else {
        run(&spec)
    };
    // Liveness over the first run: up to the power loss, if there is one (the restarted
    // run is checked to decide by the run itself).
    let first = ClusterSpec {
        duration_ns: a.power_loss_at.unwrap_or(a.duration),
        ..spec.clone()
    };
    let live = liveness(&report, &first);
    report.checks.insert("liveness".into(), live.is_ok());
    if let Err(e) = live {
        report.failures.push(e);
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("a report serialises")
        );
    } else {
        print_report(&report, a.interval);
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        let mut replay = format!(
            "velos sim --replicas {} --seed {} --duration {} --slots {} --value-size {} \
             --pipeline {} --latency {}",
            a.replicas, a.seed, a.duration, a.slots, a.value_size, a.pipeline, a.latency
        );
        if let Some(j) = a.jitter {
            replay += &format!(" --jitter {j}");
        }
        if a.jitter_within_cost {
            replay += " --jitter-within-cost";
        }
        if let Some(v) = a.values {
            replay += &format!(" --values {v}");
        }
        if let Some(t) = a.crash_leader_at {
            replay += &format!(" --crash-leader-at {t}");
        }
        for (n, t) in &a.crash {
            replay += &format!(" --crash {n}@{t}");
        }
        if let Some(k) = a.near_overflow {
            replay += &format!(" --near-overflow {k} --epochs {}", a.epochs);
        }
        for (n, t, d) in &a.pause {
            replay += &format!(" --pause {n}@{t}+{d}");
        }
        for (n, t, x, d) in &a.delay {
            replay += &format!(" --delay {n}@{t}+{d}:{x}");
        }
        for (n, t, x, d) in &a.delay_from {
            replay += &format!(" --delay-from {n}@{t}+{d}:{x}");
        }
        for (n, t, d) in &a.replace {
            replay += &format!(" --replace {n}@{t}+{d}");
        }
        for (n, d) in &a.told_late {
            replay += &format!(" --told-late {n}@{d}");
        }
        if let Some(k) = a.snapshot_every {
            replay += &format!(
                " --snapshot-every {k} --snapshot-bytes {}",
                a.snapshot_bytes
            );
        }
        if let Some(d) = a.lease {
            replay += &format!(" --lease {d}");
        }
        if a.durable {
            replay += " --durable";
        }
        if let Some(t) = a.power_loss_at {
            replay += &format!(" --power-loss-at {t}");
        }
        if let Some((n, f)) = a.slow_syncs {
            replay += &format!(" --slow-syncs {n}@{f}");
        }
        if let Some((n, b)) = a.disk_full {
            replay += &format!(" --disk-full {n}@{b}");
        }
        if let Some(n) = a.flip_bit {
            replay += &format!(" --flip-bit {n}");
        }
        if let Some(m) = a.members {
            replay += &format!(" --members {}", list(m));
        }
        for &(t, m) in &a.reconfigure {
            replay += &format!(" --reconfigure {t}={}", list(m));
        }
        eprintln!(
            "velos sim: a check failed (seed {}); replay: {replay}",
            a.seed
        );
        for f in report.failures.iter().take(20) {
            eprintln!("  {f}");
        }
        ExitCode::FAILURE
    }
}

/// With `--power-loss-at T`: the first run ends at T, so every fault and its recovery
/// comes before it (as [`check_times`] asks of the end of a run), the restarted cluster
/// gets at least [`RECOVERY_TIMEOUTS`] failure timeouts, and the configuration is the
/// one the restart starts with (a membership change is not carried over yet).
fn check_power_loss(a: &SimArgs, spec: &ClusterSpec) -> Result<(), String> {
    let Some(t) = a.power_loss_at else {
        return Ok(());
    };
    let recovery = RECOVERY_TIMEOUTS * spec.log.failure_timeout_ns;
    if t.saturating_add(recovery) > a.duration {
        return Err(format!(
            "--power-loss-at {t} ns leaves less than {RECOVERY_TIMEOUTS} failure timeouts \
             ({recovery} ns) for the cluster restarted from disk before the end of the run \
             (--duration {} ns)",
            a.duration
        ));
    }
    if a.members.is_some() || !a.reconfigure.is_empty() {
        return Err(
            "--power-loss-at: the simulated restart from disk starts every \
                    replica as a member (--members and --reconfigure are not carried over \
                    it; the library's Cluster::recover does carry them)"
                .into(),
        );
    }
    let first = SimArgs {
        duration: t,
        ..a.clone()
    };
    let first_spec = ClusterSpec {
        duration_ns: t,
        ..spec.clone()
    };
    check_times(&first, &first_spec)
        .map_err(|e| format!("{e} (--power-loss-at {t} ns ends the first run)"))
}

/// Refuses a log whose emulated memory would exceed [`MAX_MEMORY_WORDS`], before any of
/// it is allocated: per replica, the acceptor words (`--epochs` per slot), a value buffer
/// per replica per slot (`--value-size`), and the snapshot banks (`--snapshot-bytes`).
fn check_shape(a: &SimArgs) -> Result<(), String> {
    let (replicas, slots) = (u64::from(a.replicas), u64::from(a.slots));
    let value_words = 3 + (a.value_size as u64).div_ceil(8);
    let snapshot_words = match a.snapshot_every {
        Some(_) => 8 * (4 + u64::from(a.snapshot_bytes.max(8)).div_ceil(8)),
        None => 0,
    };
    let per_replica = slots * (u64::from(a.epochs) + replicas * value_words) + snapshot_words;
    let words = replicas * per_replica;
    if words > MAX_MEMORY_WORDS {
        return Err(format!(
            "--replicas {} with --slots {}, --value-size {}, --epochs {}{} need {} MiB of \
             emulated memory; at most {} MiB (fewer slots or smaller values)",
            a.replicas,
            a.slots,
            a.value_size,
            a.epochs,
            match a.snapshot_every {
                Some(_) => format!(", --snapshot-bytes {}", a.snapshot_bytes),
                None => String::new(),
            },
            (words * 8) >> 20,
            (MAX_MEMORY_WORDS * 8) >> 20
        ));
    }
    Ok(())
}

/// Refuses `--replace` times that overlap for one replica: each replacement of a place
/// starts after the previous one's process started (a place is crashed, then filled,
/// then may be crashed again).
fn check_replacements(replace: &[(u16, u64, u64)]) -> Result<(), String> {
    let mut sorted = replace.to_vec();
    sorted.sort();
    for w in sorted.windows(2) {
        let ((n, t0, d0), (m, t1, d1)) = (w[0], w[1]);
        if n == m && t1 <= t0 + d0 {
            return Err(format!(
                "--replace {n}@{}+{} and --replace {m}@{}+{}: a replica's next replacement \
                 crashes it after the previous one started (after {})",
                human(t0),
                human(d0),
                human(t1),
                human(d1),
                human(t0 + d0)
            ));
        }
    }
    Ok(())
}

/// When a replica is down: from a crash to its restart (`None`: the end of the run), with
/// the flag that took it down.
struct Down {
    replica: u16,
    from: u64,
    until: Option<u64>,
    flag: String,
}

/// Refuses a `--crash` that would find its replica down already — crashed by an earlier
/// `--crash` or a replacement's crash, and not started again since: a fault that does
/// nothing (the run went on as if it were not there, and every check passed). Returns
/// when each replica is down.
fn check_crashes(crash: &[(u16, u64)], replace: &[(u16, u64, u64)]) -> Result<Vec<Down>, String> {
    /// What happens to a replica, in the order that decides ties at one time: a restart
    /// before a crash (the new process is the one crashed).
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Step {
        Restart,
        Crash { by_replace: bool },
    }
    // Per replica, in time order: (replica, time, step, the flag as typed).
    let mut events: Vec<(u16, u64, Step, String)> = Vec::new();
    for &(n, t) in crash {
        let step = Step::Crash { by_replace: false };
        events.push((n, t, step, format!("--crash {n}@{}", human(t))));
    }
    for &(n, t, d) in replace {
        let what = format!("--replace {n}@{}+{}", human(t), human(d));
        events.push((n, t, Step::Crash { by_replace: true }, what.clone()));
        events.push((n, t + d, Step::Restart, what));
    }
    events.sort_by_key(|e| (e.0, e.1, e.2));
    // The replica down, and the flag that took it down.
    let mut down: Option<(u16, String)> = None;
    let mut spans: Vec<Down> = Vec::new();
    for (n, t, step, what) in events {
        if down.as_ref().is_some_and(|(m, _)| *m != n) {
            down = None; // the next replica's events
        }
        match (step, &down) {
            (Step::Restart, _) => {
                if down.take().is_some() {
                    let open = spans.last_mut().expect("a crash opened the span");
                    open.until = Some(t);
                }
            }
            (Step::Crash { by_replace: false }, Some((_, earlier))) => {
                return Err(format!(
                    "{what}: replica {n} is down already at {} ({earlier}) and nothing \
                     restarts it before: that crash would do nothing",
                    human(t)
                ));
            }
            (Step::Crash { .. }, _) => {
                spans.push(Down {
                    replica: n,
                    from: t,
                    until: None,
                    flag: what.clone(),
                });
                down = Some((n, what));
            }
        }
    }
    assert!(
        spans.iter().all(|d| d.until.is_none_or(|u| u >= d.from)),
        "a replica restarts after it crashed"
    );
    Ok(spans)
}

/// Refuses a `--pause`, `--delay` or `--delay-from` whose whole window falls while its
/// replica is down (crashed by `--crash` or a replacement's crash, not started again
/// before the window ends): a fault that does nothing, though the run would list it.
fn check_faults_on_the_down(a: &SimArgs, down: &[Down]) -> Result<(), String> {
    let pauses = a.pause.iter().map(|&(n, t, d)| {
        let flag = format!("--pause {n}@{}+{}", human(t), human(d));
        (n, t, d, flag)
    });
    let delays = [("--delay", &a.delay), ("--delay-from", &a.delay_from)]
        .into_iter()
        .flat_map(|(name, delays)| {
            delays.iter().map(move |&(n, t, x, d)| {
                let flag = format!("{name} {n}@{}+{}:{}", human(t), human(d), human(x));
                (n, t, d, flag)
            })
        });
    for (n, t, d, flag) in pauses.chain(delays) {
        let end = t.saturating_add(d);
        let within = |s: &&Down| s.replica == n && s.from <= t && s.until.is_none_or(|u| end <= u);
        if let Some(s) = down.iter().find(within) {
            let until = s.until.map_or("the end".to_string(), human);
            return Err(format!(
                "{flag}: replica {n} is down from {} to {until} ({}), the whole window: \
                 that fault would do nothing",
                human(s.from),
                s.flag
            ));
        }
    }
    Ok(())
}

/// Failure timeouts a run keeps after its last crash: time for a new leader and for the
/// liveness check to see the log move again.
const RECOVERY_TIMEOUTS: u64 = 10;

/// Refuses times no run can honour: an empty timeline interval or one that would print
/// more than [`MAX_TIMELINE_LINES`] lines, faults at or after the end of the run, and a
/// crash that leaves less than [`RECOVERY_TIMEOUTS`] failure timeouts before the end.
fn check_times(a: &SimArgs, spec: &ClusterSpec) -> Result<(), String> {
    check_replacements(&a.replace)?;
    let down = check_crashes(&a.crash, &a.replace)?;
    check_faults_on_the_down(a, &down)?;
    if !a.json && a.duration.div_ceil(a.interval) > MAX_TIMELINE_LINES {
        return Err(format!(
            "--interval {} ns over --duration {} ns would print {} timeline lines; at most {MAX_TIMELINE_LINES}",
            a.interval,
            a.duration,
            a.duration.div_ceil(a.interval)
        ));
    }
    let late = |what: &str, t: u64| {
        Err(format!(
            "{what} at {t} ns is not before the end of the run (--duration {} ns)",
            a.duration
        ))
    };
    if let Some(t) = a.crash_leader_at.filter(|&t| t >= a.duration) {
        return late("--crash-leader-at", t);
    }
    if let Some(&(n, t)) = a.crash.iter().find(|&&(_, t)| t >= a.duration) {
        return late(&format!("--crash {n}@…"), t);
    }
    if let Some(&(n, t, _)) = a.pause.iter().find(|&&(_, t, _)| t >= a.duration) {
        return late(&format!("--pause {n}@…"), t);
    }
    if let Some(&(n, t, ..)) = a.delay.iter().find(|d| d.1 >= a.duration) {
        return late(&format!("--delay {n}@…"), t);
    }
    if let Some(&(n, t, ..)) = a.delay_from.iter().find(|d| d.1 >= a.duration) {
        return late(&format!("--delay-from {n}@…"), t);
    }
    if let Some(&(t, _)) = a.reconfigure.iter().find(|&&(t, _)| t >= a.duration) {
        return late("--reconfigure", t);
    }
    let recovery = RECOVERY_TIMEOUTS * spec.log.failure_timeout_ns;
    if let Some(t) = spec.last_crash().filter(|&t| t + recovery > a.duration) {
        return Err(format!(
            "a crash at {t} ns leaves less than {RECOVERY_TIMEOUTS} failure timeouts \
             ({recovery} ns) before the end of the run (--duration {} ns): nothing could \
             show the log recovered",
            a.duration
        ));
    }
    Ok(())
}

/// Liveness, measured: two failure timeouts after the last crash (decisions in flight at
/// the crash are learned before that), some live replica applied an entry, or every value
/// proposed is applied at every live replica (the clients had no more). A log whose
/// majority crashed stops, and fails here.
fn liveness(report: &ClusterReport, spec: &ClusterSpec) -> Result<(), String> {
    let settled = 2 * spec.log.failure_timeout_ns;
    let last_crash = spec.last_crash().unwrap_or(0);
    let live: Vec<_> = report.replicas.iter().filter(|r| !r.crashed).collect();
    if live.is_empty() {
        return Err("liveness: every replica crashed".into());
    }
    // The premise: something was proposed (else every test below passes on nothing).
    if report.proposed.is_empty() {
        return Err(
            "liveness: nothing was proposed (--values 0?): no run shows the log live".into(),
        );
    }
    let moved = live
        .iter()
        .any(|r| r.applied_at.iter().any(|&t| t > last_crash + settled));
    let done = live.iter().all(|r| {
        report
            .proposed
            .iter()
            .all(|v| r.applied.iter().any(|(_, a)| a == v))
    });
    // A replacement catches up and votes: it applied entries and its last configuration
    // names it.
    if let Some(r) = live
        .iter()
        .find(|r| r.incarnation > 0 && (r.applied.is_empty() || r.members >> r.id & 1 == 0))
    {
        return Err(format!(
            "liveness: replica {}'s replacement (incarnation {}) applied {} entries and is {}a \
             voter at the end",
            r.id,
            r.incarnation,
            r.applied.len(),
            if r.members >> r.id & 1 == 1 {
                ""
            } else {
                "not "
            }
        ));
    }
    if !(moved || done) {
        return Err(format!(
            "liveness: no live replica applied an entry from {} ns after the last crash at \
             {last_crash} ns on ({} of {} replicas live: a log needs a majority)",
            settled,
            live.len(),
            spec.log.replicas
        ));
    }
    // The log still moves at the end of the run — else a log that stopped early under a
    // slow replica passed (a gray failure) — unless it finished: the ring that does not
    // recycle is full, or the last leader has applied every value it had to propose.
    let tail = (spec.duration_ns / 10).max(10 * spec.log.failure_timeout_ns);
    let last = live.iter().filter_map(|r| r.applied_at.last()).max();
    let moving = last.is_some_and(|&t| t + tail >= spec.duration_ns);
    let slots = u64::from(spec.log.slots);
    let full = spec.snapshot_every.is_none()
        && live
            .iter()
            .any(|r| r.applied.last().is_some_and(|&(s, _)| s + 1 >= slots));
    if moving || done || full || proposed_all(report, spec) {
        return Ok(());
    }
    Err(format!(
        "liveness: the log stopped at {} ns (no live replica applied an entry in the last \
         {tail} ns of the run) while the leader had values left to propose",
        last.copied().unwrap_or(0)
    ))
}

/// Whether the last leader (as the last change of leader names it) applied every value
/// its process could propose (`client.count` of its own, at its incarnation): nothing
/// was left to decide.
fn proposed_all(report: &ClusterReport, spec: &ClusterSpec) -> bool {
    let Some(leader) = report.leader_changes.last().map(|c| c.leader) else {
        return false;
    };
    let Some(r) = report
        .replicas
        .iter()
        .filter(|r| r.id == leader && !r.crashed)
        .max_by_key(|r| r.incarnation)
    else {
        return false;
    };
    // Values are reported as hex; their proposer is in their first bytes.
    let own = |v: &str| {
        let bytes = velos_cli::node::client::parse_hex_value(v).unwrap_or_default();
        ClientScript::proposer(&bytes) == Some((r.id, r.incarnation as u16))
    };
    let mine = r.applied.iter().filter(|(_, v)| own(v)).count() as u64;
    mine >= spec.client.count
}
