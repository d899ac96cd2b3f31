//! The demo's run: the cluster, the client thread, the crash, the checks.

use super::codec::KvCommand;
use super::kv::{KvMap, KvStore};
use super::report::{Checks, DemoReport, Interval, LeaderChange};
use super::{DemoConfig, DemoError};
use crate::core::log::{Detector, LogConfig, ProposeError};
use crate::local::LocalCluster;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const REPLICAS: usize = 3;
/// How long the client keeps retrying one write, and the survivors may take to catch up.
const PATIENCE: Duration = Duration::from_secs(20);

/// Millisecond timing for replicas on threads of a possibly shared machine.
fn log_config(slots: u32) -> LogConfig {
    let mut c = LogConfig::new(REPLICAS as u16, slots, 64);
    c.heartbeat_period_ns = 200_000;
    c.failure_timeout_ns = 50_000_000;
    c.detector = Detector::Fixed; // real threads: OS scheduling gaps, not RDMA jitter
    c.idle_pause_ns = 20_000;
    c.catch_up_after_ns = 2_000_000;
    c
}

/// What the client saw.
#[derive(Default)]
struct ClientLog {
    /// When each write was acknowledged (from the start).
    acks: Vec<Duration>,
    /// When each get answered.
    gets_at: Vec<Duration>,
    /// The map the acknowledged writes make.
    model: KvMap,
    puts: u64,
    dels: u64,
    stale_gets: u64,
    retries: u64,
    /// A write given up on, whose outcome is unknown, and why.
    in_doubt: Option<(KvCommand, ProposeError)>,
}

/// Runs the scenario: three replicas, the client, the leader crashed at `crash_at`.
pub fn run(config: &DemoConfig) -> Result<DemoReport, DemoError> {
    config.validate()?;
    let stores: Vec<KvStore> = (0..REPLICAS).map(|_| KvStore::default()).collect();
    let cluster =
        LocalCluster::start(log_config(config.slots), stores.clone()).map_err(DemoError::Start)?;
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let (client, samples, crash) = thread::scope(|s| {
        let client = s.spawn(|| client(&cluster, &stores, config, &stop, start));
        let mut samples = Vec::new();
        let mut crash = None;
        while start.elapsed() < config.duration {
            let t = start.elapsed();
            let leader = seen_leader(&cluster);
            if crash.is_none() && t >= config.crash_at {
                cluster.crash(leader);
                crash = Some((leader, t));
            }
            samples.push((t, seen_leader(&cluster)));
            thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::SeqCst);
        let client = client.join().unwrap_or_default();
        (client, samples, crash)
    });
    let survivors: Vec<u16> = (0..REPLICAS as u16)
        .filter(|&r| !cluster.is_crashed(r))
        .collect();
    let caught_up = Instant::now();
    let top = || survivors.iter().map(|&r| cluster.applied(r)).max();
    while survivors.iter().map(|&r| cluster.applied(r)).min() != top()
        && caught_up.elapsed() < PATIENCE
    {
        thread::sleep(Duration::from_millis(1));
    }
    let machines = cluster.shutdown();
    let maps: Vec<(u16, KvMap)> = machines
        .iter()
        .enumerate()
        .filter_map(|(r, m)| m.as_ref().map(|m| (r as u16, m.map().clone())))
        .collect();
    let rejected = stores.iter().map(|s| s.rejected().len()).sum();
    Ok(report(config, client, &samples, crash, &maps, rejected))
}

/// The leader as the first live replica sees it.
fn seen_leader<S: crate::local::StateMachine>(cluster: &LocalCluster<S>) -> u16 {
    (0..cluster.replicas())
        .find(|&r| !cluster.is_crashed(r))
        .map_or(0, |r| cluster.leader_seen_by(r))
}

/// The client: puts (most operations), deletes and gets over `keys` keys until `stop`.
fn client(
    cluster: &LocalCluster<KvStore>,
    stores: &[KvStore],
    config: &DemoConfig,
    stop: &AtomicBool,
    start: Instant,
) -> ClientLog {
    let mut log = ClientLog::default();
    let mut i = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("k{}", i.wrapping_mul(7) % u64::from(config.keys));
        if i % 4 == 3 {
            let leader = usize::from(seen_leader(cluster));
            let got = stores[leader].map().get(&key).cloned();
            if got != log.model.get(&key).cloned() {
                log.stale_gets += 1;
            }
            log.gets_at.push(start.elapsed());
        } else {
            let command = if i % 16 == 14 {
                KvCommand::Del { key }
            } else {
                KvCommand::Put {
                    key,
                    value: format!("v{i}"),
                }
            };
            match write(cluster, &command, &mut log.retries) {
                Ok(()) => {
                    log.acks.push(start.elapsed());
                    match command {
                        KvCommand::Put { key, value } => {
                            log.puts += 1;
                            log.model.insert(key, value);
                        }
                        KvCommand::Del { key } => {
                            log.dels += 1;
                            log.model.remove(&key);
                        }
                    }
                }
                Err(e) => {
                    log.in_doubt = Some((command, e));
                    break;
                }
            }
        }
        i += 1;
    }
    log
}

/// Submits `command` until some leader decides it; errors other than leadership moving
/// (the log full, a value too large) end the client.
fn write(
    cluster: &LocalCluster<KvStore>,
    command: &KvCommand,
    retries: &mut u64,
) -> Result<(), ProposeError> {
    let bytes = command
        .encode()
        .map_err(|e| ProposeError::ValueTooLarge { len: e.0, max: 255 })?;
    let since = Instant::now();
    loop {
        match cluster.submit(bytes.clone()) {
            Ok(_) => return Ok(()),
            // Deposed: maybe decided, maybe not; a put or delete applied twice in a row is
            // the same as once, and nothing else of this client's is in flight.
            Err(
                e @ (ProposeError::NotLeader { .. }
                | ProposeError::Deposed
                | ProposeError::Busy(_)
                | ProposeError::ShuttingDown),
            ) => {
                *retries += 1;
                if since.elapsed() > PATIENCE {
                    return Err(e);
                }
                thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The timeline and the checks.
fn report(
    config: &DemoConfig,
    client: ClientLog,
    samples: &[(Duration, u16)],
    crash: Option<(u16, Duration)>,
    maps: &[(u16, KvMap)],
    rejected: usize,
) -> DemoReport {
    let intervals = (config.duration.as_nanos()).div_ceil(config.interval.as_nanos()) as u32;
    let count = |times: &[Duration], k: u32| {
        let (lo, hi) = (config.interval * k, config.interval * (k + 1));
        times.iter().filter(|&&t| t >= lo && t < hi).count() as u64
    };
    let timeline: Vec<Interval> = (0..intervals)
        .map(|k| {
            let end = config.interval * (k + 1);
            Interval {
                start_ms: (config.interval * k).as_secs_f64() * 1e3,
                commits: count(&client.acks, k),
                gets: count(&client.gets_at, k),
                leader: samples
                    .iter()
                    .take_while(|(t, _)| *t < end)
                    .last()
                    .map(|&(_, l)| l),
            }
        })
        .collect();
    let leader_changes = samples.windows(2).filter(|w| w[0].1 != w[1].1).count() as u32;
    let change = crash.map(|(crashed, at)| {
        let new = samples.iter().find(|(t, l)| *t >= at && *l != crashed);
        LeaderChange {
            crashed,
            crash_ms: at.as_secs_f64() * 1e3,
            new_leader: new.map(|&(_, l)| l),
            elected_after_ms: new.map(|&(t, _)| (t - at).as_secs_f64() * 1e3),
            first_commit_after_ms: new.and_then(|&(seen, _)| {
                client
                    .acks
                    .iter()
                    .find(|&&t| t >= seen)
                    .map(|&t| (t - at).as_secs_f64() * 1e3)
            }),
        }
    });
    let mut alternative = client.model.clone();
    match &client.in_doubt {
        Some((KvCommand::Put { key, value }, _)) => {
            alternative.insert(key.clone(), value.clone());
        }
        Some((KvCommand::Del { key }, _)) => {
            alternative.remove(key);
        }
        None => {}
    }
    let mut missing = Vec::new();
    let mut matches = true;
    for (r, map) in maps {
        if *map == client.model || *map == alternative {
            continue;
        }
        matches = false;
        for (k, v) in &client.model {
            if map.get(k) != Some(v) {
                missing.push(format!("replica {r}: {k}={v}"));
            }
        }
    }
    let checks = Checks {
        survivors: maps.iter().map(|(r, _)| *r).collect(),
        survivors_agree: maps.windows(2).all(|w| w[0].1 == w[1].1),
        missing_writes: missing,
        match_acknowledged: matches,
        keys_at_end: maps.first().map_or(0, |(_, m)| m.len()),
        rejected_entries: rejected,
    };
    DemoReport {
        config: config.clone(),
        puts_acked: client.puts,
        dels_acked: client.dels,
        gets: client.gets_at.len() as u64,
        stale_gets: client.stale_gets,
        retries: client.retries,
        client_stopped: client.in_doubt.map(|(c, e)| format!("{c:?} given up: {e}")),
        leader_changes,
        leader_change: change,
        timeline,
        checks,
    }
}
