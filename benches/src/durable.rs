//! `velos bench durable`: what durability costs a `velos::embed` cluster on this machine's
//! disk, side by side in one run. Three replicas on the in-process backend, with
//! durability off and on (`Config::durable`, a directory on the disk), alternating the
//! order per repeat: commits per second and the submit latency with one client in a
//! closed loop and with 64 commands outstanding; with it on, the latency of
//! `submit_durable` (committed and on a majority's disks). Beside them, the machine's own
//! `fdatasync` (a 4 KiB append and its sync, in the same directory), and the recovery of a
//! directory of a snapshot and a log of `recovery_bytes` (`velos::disk::read` and
//! `velos_store::recover::recover`) against a plain sequential read of the same files.
//! Both reads run on a warm page cache (dropping it needs root): the comparison is the
//! recovery's own cost, checksums and decoding, against the bytes' copy.

use crate::embed::latency_histogram;
use crate::embed::submit::Count;
use crate::stats::median;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::VecDeque;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use velos::embed::{Cluster, Config};
use velos_store::segment::Kind;
use velos_store::writer::Writer;

/// What the benchmark runs.
#[derive(Clone, Debug, Serialize)]
pub struct DurableConfig {
    /// Repeats of the off/on pair; medians are reported.
    pub repeats: usize,
    /// Commits timed per load, after `warmup` more.
    pub commits: u64,
    /// Commits before the timing starts.
    pub warmup: u64,
    /// Commands outstanding in the pipelined load.
    pub outstanding: usize,
    /// `fdatasync`s timed.
    pub syncs: u64,
    /// Bytes of log entries in the recovery's directory (its snapshot is 64 MiB more).
    pub recovery_bytes: u64,
    /// Where the directories go (a fresh directory under the system's temporary one
    /// when `None`); removed at the end.
    pub dir: Option<PathBuf>,
    /// The clusters' group-commit pause with durability on (`Config::group_commit`).
    pub group_commit: Duration,
}

impl DurableConfig {
    /// The full run: three repeats of 20,000 commits a load, a 1 GiB recovery.
    pub fn full() -> DurableConfig {
        DurableConfig {
            repeats: 3,
            commits: 20_000,
            warmup: 2_000,
            outstanding: 64,
            syncs: 500,
            recovery_bytes: 1 << 30,
            dir: None,
            group_commit: velos::embed::DEFAULT_GROUP_COMMIT,
        }
    }

    /// A short run (tests, CI): one repeat of 1,000 commits, a 16 MiB recovery.
    pub fn quick() -> DurableConfig {
        DurableConfig {
            repeats: 1,
            commits: 1_000,
            warmup: 100,
            syncs: 50,
            recovery_bytes: 16 << 20,
            ..DurableConfig::full()
        }
    }
}

/// One load's figures in one cluster.
#[derive(Clone, Debug, Serialize)]
pub struct LoadRun {
    /// Commits per second of the timed window.
    pub commits_per_s: f64,
    /// Submit-to-commit latency, median and 99th percentile (ns).
    pub p50_ns: u64,
    /// The 99th percentile (ns).
    pub p99_ns: u64,
    /// With durability on: `fdatasync`s of all replicas' disks per 1,000 commits of the
    /// timed window.
    pub syncs_per_1000: Option<f64>,
}

/// One cluster's run: durability off or on.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterRun {
    /// Which repeat.
    pub repeat: usize,
    /// Durability on.
    pub durable: bool,
    /// One client, one command at a time.
    pub one_client: LoadRun,
    /// `outstanding` commands in flight.
    pub pipelined: LoadRun,
    /// With durability on: `submit_durable` in a closed loop.
    pub durable_ack: Option<LoadRun>,
}

/// The recovery of one directory, beside a plain read of its files.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryRun {
    /// Bytes of the directory's files.
    pub bytes: u64,
    /// Entries recovered.
    pub entries: u64,
    /// A plain sequential read of every file (bytes per second).
    pub read_bytes_per_s: f64,
    /// `velos::disk::read` and `recover` (bytes per second).
    pub recover_bytes_per_s: f64,
}

/// Everything measured.
#[derive(Clone, Debug, Serialize)]
pub struct DurableReport {
    /// The settings.
    pub config: DurableConfig,
    /// This machine's `fdatasync` after a 4 KiB append: median and 99th percentile (ns).
    pub fdatasync_p50_ns: u64,
    /// Its 99th percentile (ns).
    pub fdatasync_p99_ns: u64,
    /// The same with three threads syncing files of their own at once, as the three
    /// replicas' disk threads do on one machine: median and 99th percentile (ns).
    pub fdatasync_3_p50_ns: u64,
    /// Its 99th percentile (ns).
    pub fdatasync_3_p99_ns: u64,
    /// Every cluster run, in the order run.
    pub runs: Vec<ClusterRun>,
    /// The recoveries, one per repeat.
    pub recoveries: Vec<RecoveryRun>,
}

impl DurableReport {
    /// The median over repeats of `f` of the runs with durability `durable`.
    pub fn median_of(&self, durable: bool, f: impl Fn(&ClusterRun) -> Option<f64>) -> f64 {
        let values = self.runs.iter().filter(|r| r.durable == durable);
        median(values.filter_map(f).collect()).unwrap_or(0.0)
    }
}

fn load(h: &Histogram<u64>, wall: Duration, syncs: Option<u64>) -> LoadRun {
    LoadRun {
        commits_per_s: h.len() as f64 / wall.as_secs_f64().max(f64::MIN_POSITIVE),
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        syncs_per_1000: syncs.map(|n| n as f64 * 1000.0 / h.len().max(1) as f64),
    }
}

/// The syncs `c`'s disks ran so far (durability on).
fn syncs(c: &Cluster<Count>) -> Option<u64> {
    let m = c.metrics();
    m.durable_index.map(|_| m.disk_syncs)
}

/// The command of commit `n`: 16 bytes.
fn command(n: u64) -> Vec<u8> {
    let mut c = n.to_le_bytes().to_vec();
    c.extend_from_slice(&[0xA5; 8]);
    c
}

/// One client in a closed loop: `submit` (or `submit_durable`) `warmup + commits` times.
fn closed_loop(
    c: &Cluster<Count>,
    config: &DurableConfig,
    durable: bool,
) -> anyhow::Result<LoadRun> {
    let mut h = latency_histogram();
    let mut window = Instant::now();
    let mut before = None;
    for n in 0..config.warmup + config.commits {
        if n == config.warmup {
            window = Instant::now();
            before = syncs(c);
        }
        let sent = Instant::now();
        let done = if durable {
            c.submit_durable(command(n))
        } else {
            c.submit(command(n))
        };
        done.map_err(|e| anyhow::anyhow!("commit {n}: {e}"))?;
        if n >= config.warmup {
            h.record(sent.elapsed().as_nanos() as u64)?;
        }
    }
    let wall = window.elapsed();
    let ran = syncs(c).zip(before).map(|(after, before)| after - before);
    Ok(load(&h, wall, ran))
}

/// `outstanding` commands in flight (`propose_async` at the leader), each replaced as
/// the oldest commits.
fn pipelined(c: &Cluster<Count>, config: &DurableConfig) -> anyhow::Result<LoadRun> {
    let leader = c.wait_for_leader(Duration::from_secs(10))?;
    let mut h = latency_histogram();
    let mut flight = VecDeque::new();
    let total = config.warmup + config.commits;
    let mut window = Instant::now();
    let (mut sent, mut done) = (0u64, 0u64);
    let mut before = None;
    while done < total {
        while sent < total && flight.len() < config.outstanding {
            flight.push_back((Instant::now(), c.propose_at(leader, command(sent))));
            sent += 1;
        }
        let (at, receipt) = flight.pop_front().expect("in flight");
        receipt
            .wait()
            .map_err(|e| anyhow::anyhow!("commit {done}: {e}"))?;
        if done == config.warmup {
            window = Instant::now();
            before = syncs(c);
        }
        if done >= config.warmup {
            h.record(at.elapsed().as_nanos() as u64)?;
        }
        done += 1;
    }
    let wall = window.elapsed();
    let ran = syncs(c).zip(before).map(|(after, before)| after - before);
    Ok(load(&h, wall, ran))
}

fn cluster_run(
    config: &DurableConfig,
    dir: Option<&Path>,
    repeat: usize,
) -> anyhow::Result<ClusterRun> {
    let mut c = Config::new(3);
    if let Some(dir) = dir {
        c = c.durable(dir).group_commit(config.group_commit);
    }
    let cluster = Cluster::start(c, (0..3).map(|_| Count::default()))?;
    cluster.wait_for_leader(Duration::from_secs(10))?;
    let one_client = closed_loop(&cluster, config, false)?;
    let pipelined = pipelined(&cluster, config)?;
    let durable_ack = match dir {
        Some(_) => Some(closed_loop(&cluster, config, true)?),
        None => None,
    };
    drop(cluster.shutdown());
    Ok(ClusterRun {
        repeat,
        durable: dir.is_some(),
        one_client,
        pipelined,
        durable_ack,
    })
}

/// This machine's `fdatasync` after a 4 KiB append, in `dir`, by `threads` threads at
/// once (each on a file of its own): median and 99th percentile over all of them.
fn fdatasync(dir: &Path, syncs: u64, threads: usize) -> anyhow::Result<(u64, u64)> {
    let all = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || fdatasync_one(&dir.join(format!("fdatasync-{t}")), syncs)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probe thread"))
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let mut h = latency_histogram();
    for one in &all {
        h.add(one)?;
    }
    Ok((h.value_at_quantile(0.5), h.value_at_quantile(0.99)))
}

fn fdatasync_one(path: &Path, syncs: u64) -> anyhow::Result<Histogram<u64>> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let mut h = latency_histogram();
    let block = vec![0x5A; 4096];
    for _ in 0..syncs {
        file.write_all(&block)?;
        let at = Instant::now();
        file.sync_data()?;
        h.record(at.elapsed().as_nanos() as u64)?;
    }
    fs::remove_file(path)?;
    Ok(h)
}

/// Writes a directory of a 64 MiB snapshot and `bytes` of 4 KiB entries after it.
fn write_log(dir: &Path, bytes: u64) -> anyhow::Result<()> {
    let mut w = Writer::new(0, 64 << 20);
    let entry = vec![0xC3; 4096];
    let mut ops = Vec::new();
    let mut run = |w: &mut Writer| -> anyhow::Result<()> {
        loop {
            ops.clear();
            w.poll(&mut ops);
            if ops.is_empty() {
                return Ok(());
            }
            velos::disk::execute(dir, &ops).map_err(|e| anyhow::anyhow!("{e}"))?;
            w.done();
        }
    };
    w.append(0, Kind::Service, &entry);
    w.snapshot(1, vec![0x3C; 64 << 20]);
    run(&mut w)?;
    let records = bytes / entry.len() as u64;
    for slot in 1..=records {
        w.append(slot, Kind::Service, &entry);
        if slot % 4096 == 0 {
            run(&mut w)?;
        }
    }
    run(&mut w)
}

/// A plain sequential read of every file in `dir`: the bytes read.
fn read_all(dir: &Path) -> anyhow::Result<u64> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    names.sort();
    let mut total = 0;
    for n in names {
        total += std::hint::black_box(fs::read(&n)?).len() as u64;
    }
    Ok(total)
}

fn recovery_run(dir: &Path) -> anyhow::Result<RecoveryRun> {
    let at = Instant::now();
    let bytes = read_all(dir)?;
    let read = at.elapsed();
    let at = Instant::now();
    let files = velos::disk::read(dir)?;
    let found = velos_store::recover::recover_owned(files);
    let recover = at.elapsed();
    anyhow::ensure!(found.cuts.is_empty(), "a clean directory: {:?}", found.cuts);
    anyhow::ensure!(found.snapshot.is_some(), "its snapshot recovered");
    Ok(RecoveryRun {
        bytes,
        entries: found.entries.len() as u64,
        read_bytes_per_s: bytes as f64 / read.as_secs_f64().max(f64::MIN_POSITIVE),
        recover_bytes_per_s: bytes as f64 / recover.as_secs_f64().max(f64::MIN_POSITIVE),
    })
}

/// Runs the benchmark.
pub fn measure(config: &DurableConfig) -> anyhow::Result<DurableReport> {
    anyhow::ensure!(config.repeats > 0 && config.commits > 0 && config.outstanding > 0);
    let root = match &config.dir {
        Some(d) => d.join(format!("velos-bench-durable-{}", std::process::id())),
        None => std::env::temp_dir().join(format!("velos-bench-durable-{}", std::process::id())),
    };
    fs::create_dir_all(&root)?;
    let result = measure_in(config, &root);
    let _ = fs::remove_dir_all(&root);
    result
}

fn measure_in(config: &DurableConfig, root: &Path) -> anyhow::Result<DurableReport> {
    let (fdatasync_p50_ns, fdatasync_p99_ns) = fdatasync(root, config.syncs, 1)?;
    let (fdatasync_3_p50_ns, fdatasync_3_p99_ns) = fdatasync(root, config.syncs, 3)?;
    let mut runs = Vec::new();
    let mut recoveries = Vec::new();
    let log = root.join("recovery");
    fs::create_dir_all(&log)?;
    write_log(&log, config.recovery_bytes)?;
    read_all(&log)?; // both reads then run on a warm cache
    for repeat in 0..config.repeats {
        // Side by side: the order alternates, so a machine that slows down mid-run
        // charges both alike.
        let order = if repeat % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for durable in order {
            let dir = root.join(format!("cluster-{repeat}"));
            let run = cluster_run(config, durable.then_some(dir.as_path()), repeat)?;
            let _ = fs::remove_dir_all(&dir);
            runs.push(run);
        }
        recoveries.push(recovery_run(&log)?);
    }
    Ok(DurableReport {
        config: config.clone(),
        fdatasync_p50_ns,
        fdatasync_p99_ns,
        fdatasync_3_p50_ns,
        fdatasync_3_p99_ns,
        runs,
        recoveries,
    })
}
