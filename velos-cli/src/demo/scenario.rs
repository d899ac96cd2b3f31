//! The demo's run: the cluster, the client threads, the crash, the checks.

use super::codec::KvCommand;
use super::kv::{KvMap, KvStore};
use super::report::{Batching, Checks, DemoReport, Interval, LeaderChange, survivors_rate};
use super::{DemoConfig, DemoError};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use velos::embed::{Cluster, Config, Error, MetricsSnapshot, Role, Session};

const REPLICAS: usize = 3;
/// How long a client keeps retrying one write, and the survivors may take to catch up.
const PATIENCE: Duration = Duration::from_secs(20);

/// The embedding's real-time defaults, with the demo's log size: entries of 128 bytes
/// hold about nine of its commands.
fn cluster_config(slots: u32) -> Config {
    let mut c = Config::new(REPLICAS as u16);
    c.log.slots = slots;
    c.log.max_value_bytes = 128;
    c.wait_timeout = PATIENCE;
    c
}

/// What one client saw. Clients write disjoint keys, so each one's acknowledged writes
/// decide its keys' final values.
#[derive(Default)]
struct ClientLog {
    /// When each write was acknowledged (from the start).
    acks: Vec<Duration>,
    /// Each acknowledged write and the log slot that decided it, in order (a power loss
    /// keeps those below the recovered log's end).
    written: Vec<(u64, KvCommand)>,
    /// When each get answered.
    gets_at: Vec<Duration>,
    /// The map the acknowledged writes make.
    model: KvMap,
    puts: u64,
    dels: u64,
    stale_gets: u64,
    /// Writes its session sent again after an unknown outcome.
    retries: u64,
    /// Writes whose response (the value replaced) was not the value this client's own
    /// writes had left there.
    wrong_responses: u64,
    /// A write given up on, whose outcome is unknown, and why.
    in_doubt: Option<(KvCommand, Error)>,
}

/// What one stretch of the run left: each client's log, the leader samples, the crash.
struct Phase {
    clients: Vec<ClientLog>,
    samples: Vec<(Duration, u16)>,
    crash: Option<(u16, Duration)>,
}

/// Runs the clients on `cluster` from `from` until `until` (from `start`), crashing the
/// leader at `crash_at` if that lies between; each client starts from `models[c]` (the
/// map its acknowledged writes made so far) and writes values numbered from
/// `first_value`.
fn phase(
    (cluster, stores): (&Cluster<KvStore>, &[KvStore]),
    config: &DemoConfig,
    (start, from, until): (Instant, Duration, Duration),
    models: Vec<KvMap>,
    first_value: u64,
) -> Phase {
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let clients: Vec<_> = models
            .into_iter()
            .enumerate()
            .map(|(c, model)| {
                let stop = &stop;
                let from = (start, first_value);
                s.spawn(move || client(c as u32, (cluster, stores), config, (stop, model), from))
            })
            .collect();
        let mut samples = Vec::new();
        let mut crash = None;
        while start.elapsed() < until {
            let t = start.elapsed();
            let leader = cluster.leader().unwrap_or(0);
            let due = t >= config.crash_at && (from..until).contains(&config.crash_at);
            if crash.is_none() && due && cluster.crash(leader).is_ok() {
                crash = Some((leader, t));
            }
            samples.push((t, cluster.leader().unwrap_or(0)));
            thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::SeqCst);
        let clients: Vec<ClientLog> = clients
            .into_iter()
            .map(|c| c.join().unwrap_or_default())
            .collect();
        Phase {
            clients,
            samples,
            crash,
        }
    })
}

/// Runs the scenario: three replicas, the clients, the leader crashed at `crash_at`;
/// with `power_loss_at`, every replica crashed at once then and the cluster recovered
/// from its directories, the clients going on.
pub fn run(config: &DemoConfig) -> Result<DemoReport, DemoError> {
    config.validate()?;
    let mut cluster_config = cluster_config(config.slots);
    if let Some(dir) = &config.data_dir {
        cluster_config = cluster_config.durable(dir);
    }
    let stores: Vec<KvStore> = (0..REPLICAS).map(|_| KvStore::default()).collect();
    let cluster = Cluster::start(cluster_config.clone(), stores.clone())
        .map_err(|e| DemoError::Start(e.to_string()))?;
    let start = Instant::now();
    let models = vec![KvMap::new(); config.clients as usize];
    let until = config.power_loss_at.unwrap_or(config.duration);
    let first = phase(
        (&cluster, &stores),
        config,
        (start, Duration::ZERO, until),
        models,
        0,
    );
    let (cluster, stores, first, power) = match config.power_loss_at {
        None => (cluster, stores, first, None),
        Some(_) => {
            let written: Vec<_> = first.clients.iter().map(|c| c.written.clone()).collect();
            let doubt: Vec<_> = first
                .clients
                .iter()
                .map(|c| c.in_doubt.clone().map(|d| d.0))
                .collect();
            let super::power::Recovered {
                cluster,
                stores,
                report: power,
                models,
            } = super::power::lose_and_recover(cluster, cluster_config, (&written, &doubt), start)?;
            let second = phase(
                (&cluster, &stores),
                config,
                (start, until, config.duration),
                models,
                1 << 32,
            );
            (cluster, stores, joined(first, second), Some(power))
        }
    };
    let Phase {
        clients,
        samples,
        crash,
    } = first;
    let survivors: Vec<u16> = (0..REPLICAS as u16)
        .filter(|&r| cluster.role(r) != Role::Crashed)
        .collect();
    let caught_up = Instant::now();
    let applied = || survivors.iter().map(|&r| cluster.applied_commands(r));
    while applied().min() != applied().max() && caught_up.elapsed() < PATIENCE {
        thread::sleep(Duration::from_millis(1));
    }
    let metrics = cluster.metrics();
    let machines = cluster.shutdown();
    let maps: Vec<(u16, KvMap)> = machines
        .iter()
        .enumerate()
        .filter_map(|(r, m)| m.as_ref().map(|m| (r as u16, m.map().clone())))
        .collect();
    let rejected = stores.iter().map(|s| s.rejected().len()).sum();
    let outcome = Outcome {
        clients,
        samples,
        crash,
        maps,
        rejected,
        metrics,
    };
    let mut report = report(config, outcome);
    report.power_loss = power;
    Ok(report)
}

/// The run as one: the second stretch's clients go on from the first's (their logs
/// joined, their models the second's), the samples in order, the crash of either.
fn joined(first: Phase, second: Phase) -> Phase {
    let clients = first
        .clients
        .into_iter()
        .zip(second.clients)
        .map(|(a, b)| ClientLog {
            acks: [a.acks, b.acks].concat(),
            written: [a.written, b.written].concat(),
            gets_at: [a.gets_at, b.gets_at].concat(),
            model: b.model,
            puts: a.puts + b.puts,
            dels: a.dels + b.dels,
            stale_gets: a.stale_gets + b.stale_gets,
            retries: a.retries + b.retries,
            wrong_responses: a.wrong_responses + b.wrong_responses,
            // The first stretch's write in doubt was settled by the recovery (the second
            // starts from the recovered map).
            in_doubt: b.in_doubt,
        })
        .collect();
    Phase {
        clients,
        samples: [first.samples, second.samples].concat(),
        crash: first.crash.or(second.crash),
    }
}

/// Client `c`: puts (most operations), deletes and gets over its own `keys` keys until
/// `stop`, one operation at a time, from `model` (what its writes so far made), its
/// values numbered from `first_value`.
fn client(
    c: u32,
    (cluster, stores): (&Cluster<KvStore>, &[KvStore]),
    config: &DemoConfig,
    (stop, model): (&AtomicBool, KvMap),
    (start, first_value): (Instant, u64),
) -> ClientLog {
    let mut log = ClientLog {
        model,
        ..ClientLog::default()
    };
    let mut session = cluster.session();
    let mut i = first_value;
    while !stop.load(Ordering::SeqCst) {
        let key = format!("c{c}k{}", i.wrapping_mul(7) % u64::from(config.keys));
        if i % 4 == 3 {
            // Reads the map of the leader as seen now, outside the log: may be stale.
            let leader = usize::from(cluster.leader().unwrap_or(0));
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
            let written = write(&mut session, &command);
            log.retries = session.resends();
            match written {
                Ok((slot, replaced)) => {
                    log.acks.push(start.elapsed());
                    log.written.push((slot, command.clone()));
                    // Keys are this client's alone, and a session applies each write
                    // once however often it was sent: every write replaced what the
                    // client's last one left.
                    let key = match &command {
                        KvCommand::Put { key, .. } | KvCommand::Del { key } => key,
                    };
                    if replaced != log.model.get(key).cloned() {
                        log.wrong_responses += 1;
                    }
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

/// Submits `command` in the client's session until it commits: the session follows the
/// leader and sends the command again after an unknown outcome (the leader crashed
/// holding it), and every replica applies it once. Other errors (the log full, a wait
/// that timed out) end the client. The value the write replaced, as the state machine
/// answered, and the slot that decided the write.
fn write(
    session: &mut Session<'_, KvStore>,
    command: &KvCommand,
) -> Result<(u64, Option<String>), Error> {
    let bytes = command.encode().map_err(|e| Error::CommandTooLarge {
        len: e.0,
        max: usize::from(u8::MAX),
    })?;
    session
        .submit(bytes)
        .map(|info| (info.position.slot, info.response))
}

/// What the run left.
struct Outcome {
    clients: Vec<ClientLog>,
    samples: Vec<(Duration, u16)>,
    crash: Option<(u16, Duration)>,
    maps: Vec<(u16, KvMap)>,
    rejected: usize,
    metrics: MetricsSnapshot,
}

/// The values a key may hold at the end: the acknowledged writes' value, or the effect of
/// its client's write in doubt (`None`: absent).
fn allowed(clients: &[ClientLog]) -> BTreeMap<String, Vec<Option<String>>> {
    let mut allowed: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    for c in clients {
        for (k, v) in &c.model {
            allowed.entry(k.clone()).or_default().push(Some(v.clone()));
        }
        match &c.in_doubt {
            Some((KvCommand::Put { key, value }, _)) => {
                let a = allowed.entry(key.clone()).or_default();
                if a.is_empty() {
                    a.push(None);
                }
                a.push(Some(value.clone()));
            }
            Some((KvCommand::Del { key }, _)) => {
                let a = allowed.entry(key.clone()).or_default();
                if a.is_empty() {
                    a.push(None);
                }
                a.push(None);
            }
            None => {}
        }
    }
    allowed
}

/// Whether the survivors' maps are the same; its premise, two maps to compare (one
/// alone, or none, agrees with nothing).
fn agree(maps: &[(u16, KvMap)]) -> bool {
    maps.len() >= 2 && maps.windows(2).all(|w| w[0].1 == w[1].1)
}

/// The timeline and the checks.
fn report(config: &DemoConfig, o: Outcome) -> DemoReport {
    let intervals = (config.duration.as_nanos()).div_ceil(config.interval.as_nanos()) as u32;
    let mut acks: Vec<Duration> = o.clients.iter().flat_map(|c| c.acks.clone()).collect();
    acks.sort();
    let gets_at: Vec<Duration> = o.clients.iter().flat_map(|c| c.gets_at.clone()).collect();
    let count = |times: &[Duration], k: u32| {
        let (lo, hi) = (config.interval * k, config.interval * (k + 1));
        times.iter().filter(|&&t| t >= lo && t < hi).count() as u64
    };
    let timeline: Vec<Interval> = (0..intervals)
        .map(|k| {
            let end = config.interval * (k + 1);
            Interval {
                start_ms: (config.interval * k).as_secs_f64() * 1e3,
                commits: count(&acks, k),
                gets: count(&gets_at, k),
                leader: o
                    .samples
                    .iter()
                    .take_while(|(t, _)| *t < end)
                    .last()
                    .map(|&(_, l)| l),
            }
        })
        .collect();
    let leader_changes = o.samples.windows(2).filter(|w| w[0].1 != w[1].1).count() as u32;
    let change = o.crash.map(|(crashed, at)| {
        let new = o.samples.iter().find(|(t, l)| *t >= at && *l != crashed);
        let crash_ms = at.as_secs_f64() * 1e3;
        let first_commit_after_ms = new.and_then(|&(seen, _)| {
            acks.iter()
                .find(|&&t| t >= seen)
                .map(|&t| (t - at).as_secs_f64() * 1e3)
        });
        let interval_ms = config.interval.as_secs_f64() * 1e3;
        LeaderChange {
            crashed,
            crash_ms,
            new_leader: new.map(|&(_, l)| l),
            elected_after_ms: new.map(|&(t, _)| (t - at).as_secs_f64() * 1e3),
            first_commit_after_ms,
            survivors_rate: first_commit_after_ms.and_then(|after| {
                let end_ms = config.duration.as_secs_f64() * 1e3;
                survivors_rate(&timeline, interval_ms, crash_ms, (crash_ms + after, end_ms))
            }),
        }
    });
    let allowed = allowed(&o.clients);
    let mut missing = Vec::new();
    for (r, map) in &o.maps {
        for (k, values) in &allowed {
            if !values.contains(&map.get(k).cloned()) {
                missing.push(format!("replica {r}: {k} is {:?}", map.get(k)));
            }
        }
        for k in map.keys().filter(|k| !allowed.contains_key(*k)) {
            missing.push(format!("replica {r}: {k} was never written"));
        }
    }
    // Rule (a demo of failover shows one): the leader crashed, a survivor took over and a
    // write was acknowledged under it; a run that shows none fails.
    let failed_over = change
        .as_ref()
        .is_some_and(|c| c.first_commit_after_ms.is_some());
    let checks = Checks {
        failed_over,
        survivors: o.maps.iter().map(|(r, _)| *r).collect(),
        survivors_agree: agree(&o.maps),
        match_acknowledged: missing.is_empty(),
        missing_writes: missing,
        wrong_responses: o.clients.iter().map(|c| c.wrong_responses).sum(),
        keys_at_end: o.maps.first().map_or(0, |(_, m)| m.len()),
        rejected_entries: o.rejected,
    };
    let m = &o.metrics;
    let batching = Batching {
        batches: m.batches,
        commands_per_batch: m.commands_per_batch(),
        batch_commands_max: m.batch_commands_max,
        latency_p50_ms: m.latency_at(0.5).as_secs_f64() * 1e3,
        latency_p99_ms: m.latency_at(0.99).as_secs_f64() * 1e3,
    };
    let stopped: Vec<String> = o
        .clients
        .iter()
        .enumerate()
        .filter_map(|(c, l)| {
            l.in_doubt
                .as_ref()
                .map(|(cmd, e)| format!("client {c}: {cmd:?} given up: {e}"))
        })
        .collect();
    DemoReport {
        config: config.clone(),
        puts_acked: o.clients.iter().map(|c| c.puts).sum(),
        dels_acked: o.clients.iter().map(|c| c.dels).sum(),
        gets: gets_at.len() as u64,
        stale_gets: o.clients.iter().map(|c| c.stale_gets).sum(),
        retries: o.clients.iter().map(|c| c.retries).sum(),
        client_stopped: (!stopped.is_empty()).then(|| stopped.join("; ")),
        leader_changes,
        leader_change: change,
        batching,
        timeline,
        checks,
        power_loss: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fewer than two survivors' maps compare nothing: they do not agree.
    #[test]
    fn agreement_needs_two_maps() {
        let map: KvMap = [("k".to_string(), "v".to_string())].into_iter().collect();
        assert!(agree(&[(1, map.clone()), (2, map.clone())]));
        assert!(!agree(&[(1, map.clone()), (2, KvMap::new())]));
        assert!(!agree(&[(1, map)]));
        assert!(!agree(&[]));
    }
}
