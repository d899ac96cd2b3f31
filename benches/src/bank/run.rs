//! One run of the bank scenario: start, write, crash, fail over, replace while writing,
//! stop, check, and the measurement from the clients' commit times.

use super::clients::{Client, Shared, run_async, run_blocking};
use super::events::{self, Seen};
use super::machine::{Bank, CLIENTS, OPENING_BALANCE};
use super::sched::Samples;
use super::timeline::Timeline;
use super::{BankConfig, BankRun, EVENTS_KEPT, Place};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use velos::embed::{Cluster, Config};

/// Room for the table's header and the sessions' table beside the accounts.
const SNAPSHOT_SLACK: u32 = 64 << 10;

/// How long the end waits for every replica to apply what the leader has.
const CATCH_UP: Duration = Duration::from_secs(30);

/// What the scenario saw, in ns since the run began.
#[derive(Debug, Default)]
struct Marks {
    crashed: u16,
    acting: u16,
    crash: u64,
    replace: u64,
    replace_returned: u64,
    voted: Option<u64>,
    caught_up: Option<u64>,
    window_end: u64,
    leaderships: u64,
    installs: u64,
    lag: u64,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Polls `done` every 200 µs for at most `limit`: whether it came true.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        thread::sleep(Duration::from_micros(200));
    }
    true
}

/// The scenario's steps while the clients write.
fn scenario(cluster: &Cluster<Bank>, c: &BankConfig, shared: &Shared) -> anyhow::Result<Marks> {
    thread::sleep(c.before_crash);
    let leader = cluster.wait_for_leader(Duration::from_secs(10))?;
    let crashed = match c.place {
        Place::Leader => leader,
        Place::Follower => (0..cluster.replicas())
            .rev()
            .find(|&r| r != leader)
            .expect("3"),
    };
    let mut m = Marks {
        crashed,
        crash: shared.now_ns(),
        ..Marks::default()
    };
    cluster.crash(crashed)?;
    // The failover is over at the first commit after the crash by another replica.
    let failed_over = wait_until(Duration::from_secs(30), || {
        shared.last_commit_ns.load(Ordering::SeqCst) > m.crash
            && shared.last_leader.load(Ordering::SeqCst) != u64::from(crashed)
    });
    anyhow::ensure!(failed_over, "no commit within 30 s of the crash");
    thread::sleep(c.settle);
    m.acting = cluster.wait_for_leader(Duration::from_secs(10))?;
    let before = cluster.metrics();
    let other = (0..cluster.replicas()).find(|&r| r != crashed && r != m.acting);
    let other = other.expect("three replicas");
    m.lag = cluster
        .applied_slots(m.acting)
        .saturating_sub(cluster.applied_slots(other));
    m.replace = shared.now_ns();
    let voting = cluster.replace(crashed, Bank::new(c.state_bytes))?;
    m.replace_returned = shared.now_ns();
    if voting.wait_timeout(c.vote_timeout).is_ok() {
        m.voted = Some(shared.now_ns());
        let target = cluster.applied_slots(m.acting);
        if wait_until(c.vote_timeout, || cluster.applied_slots(crashed) >= target) {
            m.caught_up = Some(shared.now_ns());
        }
    }
    thread::sleep(c.after);
    m.window_end = shared.now_ns();
    let after = cluster.metrics();
    m.leaderships = after.leaderships - before.leaderships;
    m.installs = after.installs - before.installs;
    assert!(
        m.crash < m.replace
            && m.replace <= m.replace_returned
            && m.replace_returned <= m.window_end,
        "the scenario's marks in order"
    );
    Ok(m)
}

/// Runs the clients and the scenario on a fresh cluster (and the sampler of the threads'
/// time if asked): the clients, the marks, the samples.
fn write_and_replace(
    cluster: &Arc<Cluster<Bank>>,
    c: &BankConfig,
    shared: &Shared,
) -> (Vec<Client>, anyhow::Result<Marks>, Samples) {
    let accounts = Bank::new(c.state_bytes).accounts();
    let timeout = cluster.config().wait_timeout;
    let sampled = AtomicBool::new(false);
    thread::scope(|s| {
        let sampler = c.sched.then(|| {
            let named = thread::Builder::new().name("bank-sampler".into());
            named.spawn_scoped(s, || Samples::run(shared.epoch, &sampled))
        });
        let sampler = sampler.transpose().expect("the sampler starts");
        let threads: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let client = Client::new(i as u8, accounts, c.seed);
                let named = thread::Builder::new().name(format!("bank-client-{i}"));
                if i < CLIENTS - c.async_clients {
                    let session = cluster.session();
                    return named.spawn_scoped(s, move || run_blocking(client, session, shared));
                }
                let session = cluster.owned_session();
                named.spawn_scoped(s, move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_time()
                        .build()
                        .expect("a tokio runtime");
                    rt.block_on(run_async(client, session, shared, timeout))
                })
            })
            .collect::<Result<_, _>>()
            .expect("client threads start");
        let marks = scenario(cluster, c, shared);
        shared.stop.store(true, Ordering::SeqCst);
        let clients = threads.into_iter().map(|t| t.join().expect("a client"));
        let clients: Vec<Client> = clients.collect();
        sampled.store(true, Ordering::SeqCst);
        let samples = sampler.map(|t| t.join().expect("the sampler"));
        assert_eq!(
            clients.len(),
            CLIENTS,
            "every client stopped and handed back"
        );
        (clients, marks, samples.unwrap_or_default())
    })
}

/// Run `index` of `c`.
pub fn run(c: &BankConfig, index: usize) -> anyhow::Result<BankRun> {
    let mut config = Config::new(3);
    config.log.max_snapshot_bytes = u32::try_from(c.state_bytes)? + SNAPSHOT_SLACK;
    let machines = (0..3).map(|_| Bank::new(c.state_bytes));
    events::start(c.events);
    let cluster = Arc::new(Cluster::start(config, machines)?);
    cluster.wait_for_leader(Duration::from_secs(10))?;
    let shared = Shared::new();
    let (clients, marks, samples) = write_and_replace(&cluster, c, &shared);
    let stopped = shared.now_ns();
    let m = marks?;
    let mut r = BankRun {
        run: index,
        replaced: m.crashed,
        acting_leader: m.acting,
        ..BankRun::default()
    };
    if let Err(e) = cluster.catch_up(CATCH_UP) {
        r.failures
            .push(format!("the replicas did not catch up: {e}"));
    }
    let cluster = Arc::into_inner(cluster).expect("every session dropped");
    let machines = cluster.shutdown();
    let seen = events::stop();
    check(&mut r, &clients, &machines);
    let timeline = measure(&mut r, &clients, &m, stopped);
    r.events = window_events(&seen, &timeline, &shared, &m);
    if let Some(gap) = timeline.longest_gap(m.replace, m.window_end) {
        r.gap_threads = samples.between(gap.from, gap.from + gap.len);
    }
    r.joining_threads = samples.between(m.replace, m.caught_up.unwrap_or(m.window_end));
    r.ok = r.failures.is_empty();
    assert!(
        !r.ok || r.vote_ms.is_some(),
        "a run that passes measured a vote"
    );
    Ok(r)
}

/// The correctness checks: the clients' answers, every replica's final state.
fn check(r: &mut BankRun, clients: &[Client], machines: &[Option<Bank>]) {
    assert_eq!(machines.len(), 3, "one state per replica");
    for c in clients {
        r.wrong += c.log.wrong.len() as u64;
        r.failures.extend(c.log.wrong.iter().take(3).cloned());
        r.failures.extend(c.log.failed.clone());
        r.responses_lost += c.log.responses_lost;
        r.resends += c.log.resends;
    }
    let Some(Some(first)) = machines.first() else {
        return r.failures.push("replica 0 handed back no state".into());
    };
    for (i, m) in machines.iter().enumerate() {
        match m {
            Some(m) if m == first => {}
            Some(_) => r
                .failures
                .push(format!("replica {i}'s state differs from 0's")),
            None => r.failures.push(format!("replica {i} handed back no state")),
        }
    }
    let dup = machines.iter().flatten().map(|b| b.duplicates + b.skipped);
    r.duplicates = dup.max().unwrap_or(0);
    if r.duplicates > 0 {
        r.failures.push(format!(
            "{} commands applied twice or skipped",
            r.duplicates
        ));
    }
    let total = u128::from(first.accounts()) * u128::from(OPENING_BALANCE);
    if first.total() != total {
        r.failures
            .push(format!("balances total {}, not {total}", first.total()));
    }
    for c in clients {
        let wrong = c.check_final(first);
        r.wrong += wrong.len() as u64;
        r.failures.extend(wrong.into_iter().take(3));
    }
}

/// The measurement, from every commit's time.
fn measure(r: &mut BankRun, clients: &[Client], m: &Marks, stopped: u64) -> Timeline {
    assert!(
        m.window_end <= stopped,
        "the window closes before the clients stop"
    );
    let commits = clients.iter().flat_map(|c| &c.log.commits);
    let timeline = Timeline::new(commits.clone().map(|c| c.at_ns).collect(), stopped);
    r.commits = timeline.len() as u64;
    let by_other = |c: &&super::clients::Commit| c.leader.is_some_and(|l| l != m.crashed);
    let failover_end = commits
        .filter(|c| c.at_ns > m.crash && by_other(c))
        .map(|c| c.at_ns)
        .min();
    if let (Some(end), Some(last)) = (failover_end, timeline.last_until(m.crash)) {
        r.failover_gap_ms = Some(ms(end - last));
        r.rate_between = timeline.rate(end, m.replace);
        if end >= m.replace {
            r.failures
                .push("the failover ended after the replacement began".into());
        }
    }
    let (from, to) = (m.replace, m.window_end);
    if let Some(g) = timeline.longest_gap(from, to) {
        r.replace_gap_ms = Some(ms(g.len));
        r.replace_gap_at_ms = Some((g.from as f64 - from as f64) / 1e6);
    }
    let joined = m.caught_up.unwrap_or(to);
    r.joining_gap_ms = timeline.longest_gap(from, joined).map(|g| ms(g.len));
    r.vote_ms = m.voted.map(|v| ms(v - from));
    r.replace_call_ms = ms(m.replace_returned - from);
    r.caught_up_ms = m.caught_up.map(|c| ms(c - from));
    // As long a window before the crash, up to its last commit (the crash's own gap
    // begins there).
    let last = timeline.last_until(m.crash).unwrap_or(0);
    let base_from = last.saturating_sub(to - from);
    let base = timeline.longest_gap(base_from, last.saturating_sub(1));
    r.baseline_gap_ms = base.map(|g| ms(g.len));
    r.longest_gap_ms = timeline.longest_gap(0, stopped).map(|g| ms(g.len));
    r.rate_before = timeline.rate(m.crash.saturating_sub(1_000_000_000), m.crash);
    r.rate_during = timeline.rate(from, to);
    r.commits_during = timeline.count(from, to) as u64;
    r.leader_changes_during = m.leaderships;
    r.installs_during = m.installs;
    r.follower_lag_at_replace = m.lag;
    // The premise: the replacement voted, and the window saw commits after the call.
    if m.voted.is_none() {
        r.failures.push("the replacement never voted".into());
    }
    if r.commits_during == 0 {
        r.failures
            .push("no command committed after the replace call".into());
    }
    timeline
}

/// Gaps longer than this are listed among the window's events.
const GAP_SHOWN_NS: u64 = 1_000_000;

/// The events from 1 ms before the `replace` call to the window's end, with the commit
/// gaps longer than [`GAP_SHOWN_NS`], timed from the call.
fn window_events(seen: &[Seen], timeline: &Timeline, shared: &Shared, m: &Marks) -> Vec<String> {
    let ns = |s: &Seen| s.at.saturating_duration_since(shared.epoch).as_nanos() as u64;
    let from = m.replace.saturating_sub(1_000_000);
    let after = |t: u64| (t as f64 - m.replace as f64) / 1e6;
    let events = seen
        .iter()
        .filter(|s| (from..=m.window_end).contains(&ns(s)));
    // A new term's, or a new configuration's, first attempts abort by design, one a slot:
    // counted, not listed.
    let (aborts, events): (Vec<&Seen>, Vec<&Seen>) =
        events.partition(|s| s.text.contains("attempt aborted"));
    let mut lines: Vec<(u64, String)> = events
        .into_iter()
        .map(|s| {
            (
                ns(s),
                format!("{:+9.3} ms {:<5} {}", after(ns(s)), s.level, s.text),
            )
        })
        .collect();
    if let (Some(first), Some(last)) = (aborts.first(), aborts.last()) {
        let text = format!(
            "{:+9.3} ms DEBUG {} attempts aborted (the last at {:+.3} ms)",
            after(ns(first)),
            aborts.len(),
            after(ns(last))
        );
        lines.push((ns(first), text));
    }
    for g in timeline.gaps_over(from, m.window_end, GAP_SHOWN_NS) {
        let text = format!(
            "{:+9.3} ms GAP   no commit for {:.3} ms",
            after(g.from),
            ms(g.len)
        );
        lines.push((g.from, text));
    }
    lines.sort_by_key(|(t, _)| *t);
    lines
        .into_iter()
        .take(EVENTS_KEPT)
        .map(|(_, l)| l)
        .collect()
}
