//! OmniPaxos on threads in the embedding benchmark: the same three instances as
//! [`super::omnipaxos`] (elected there, on one thread, with logical ticks), then each on a
//! thread of its own, messages sent over an unbounded crossbeam channel per instance —
//! as a service embedding it on its replicas' threads would, and as Velos's replicas run
//! in this benchmark. The client runs on the leader's thread. An idle follower spins, then
//! yields (as Velos's followers idle by default). Every instance ticks every
//! `omnipaxos_tick_ns` of wall time. A command is committed when the leader's
//! `decided_idx` passes it.

use super::omnipaxos::{Cluster, Command, Instance};
use super::{EmbedConfig, Marks, Window, Workload, latency_histogram};
use crossbeam_channel::{Receiver, Sender, unbounded};
use omnipaxos::messages::Message;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Idle rounds a follower spins before it yields its core.
const SPINS: u32 = 1_000;

/// The channels between the instances: instance `i` receives on `inbox[i]`.
struct Network {
    outbox: Vec<Message<Command>>,
    to: Vec<Sender<Message<Command>>>,
}

impl Network {
    /// Sends what `node` has to send; how many messages.
    fn send(&mut self, node: &mut Instance) -> u64 {
        node.take_outgoing_messages(&mut self.outbox);
        let n = self.outbox.len() as u64;
        for m in self.outbox.drain(..) {
            let to = usize::try_from(m.get_receiver()).expect("a small pid") - 1;
            // A receiver gone means the run is over: its messages no longer matter.
            let _ = self.to[to].send(m);
        }
        n
    }
}

/// Hands `node` what `inbox` holds; how many messages.
fn receive(node: &mut Instance, inbox: &Receiver<Message<Command>>) -> u64 {
    let mut n = 0;
    while let Ok(m) = inbox.try_recv() {
        node.handle_incoming(m);
        n += 1;
    }
    n
}

/// A follower's thread: until `stop`, receive, send, tick when due; spin, then yield,
/// while nothing arrives.
fn follow(
    mut node: Instance,
    inbox: Receiver<Message<Command>>,
    mut net: Network,
    tick: Duration,
    stop: &AtomicBool,
) {
    let mut last_tick = Instant::now();
    let mut idle = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let got = receive(&mut node, &inbox);
        net.send(&mut node);
        if got > 0 {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if idle % 64 == 0 {
            let now = Instant::now();
            if now - last_tick >= tick {
                last_tick = now;
                node.tick();
            }
        }
    }
}

/// Measures one run.
pub(super) fn measure(config: &EmbedConfig, workload: Workload) -> anyhow::Result<Window> {
    let outstanding = config.outstanding(workload);
    let total = config.total(workload);
    let mut cluster = Cluster::new(config, config.batch(workload))?;
    let leader = cluster.elect()?;
    let tick = Duration::from_nanos(config.omnipaxos_tick_ns);
    let (senders, inboxes): (Vec<_>, Vec<_>) =
        (0..cluster.nodes.len()).map(|_| unbounded()).unzip();
    let network = || Network {
        outbox: Vec::new(),
        to: senders.clone(),
    };
    let stop = AtomicBool::new(false);
    let mut nodes: Vec<Option<Instance>> = cluster.nodes.drain(..).map(Some).collect();
    let leader_node = nodes[leader].take().expect("the leader's instance");
    std::thread::scope(|s| {
        for (i, node) in nodes.iter_mut().enumerate() {
            if let Some(node) = node.take() {
                let (inbox, net, stop) = (inboxes[i].clone(), network(), &stop);
                s.spawn(move || follow(node, inbox, net, tick, stop));
            }
        }
        let run = lead(
            leader_node,
            &inboxes[leader],
            network(),
            (config, outstanding, total),
            tick,
        );
        stop.store(true, Ordering::SeqCst);
        run
    })
}

/// The leader's thread with the client: keeps `outstanding` commands appended, sends and
/// receives, until `total` are decided.
fn lead(
    mut node: Instance,
    inbox: &Receiver<Message<Command>>,
    mut net: Network,
    (config, outstanding, total): (&EmbedConfig, u64, u64),
    tick: Duration,
) -> anyhow::Result<Window> {
    let base = node.get_decided_idx() as u64;
    let mut latencies = (outstanding == 1).then(latency_histogram);
    let (mut proposed, mut committed, mut messages) = (0u64, 0u64, 0u64);
    let mut window_start: Option<(Marks, u64, u64)> = None;
    let started = Instant::now();
    let (mut last_commit, mut last_tick) = (started, started);
    let mut rounds = 0u64;
    while committed < total {
        while proposed < total && proposed - committed < outstanding {
            node.append(Command(proposed))
                .map_err(|e| anyhow::anyhow!("append: {e:?}"))?;
            proposed += 1;
        }
        messages += net.send(&mut node);
        messages += receive(&mut node, inbox);
        rounds += 1;
        let decided = node.get_decided_idx() as u64 - base;
        anyhow::ensure!(decided <= proposed, "decided {decided} of {proposed}");
        if decided > committed {
            committed = decided;
            let now = Instant::now();
            if window_start.is_some()
                && let Some(h) = latencies.as_mut()
            {
                h.record((now - last_commit).as_nanos() as u64)
                    .expect("the histogram grows");
            }
            last_commit = now;
            if window_start.is_none() && committed >= config.warmup_commits {
                let marks = Marks::now();
                last_commit = marks.wall;
                window_start = Some((marks, committed, messages));
            }
        }
        if rounds % 64 == 0 {
            let now = Instant::now();
            if now - last_tick >= tick {
                last_tick = now;
                node.tick();
            }
            anyhow::ensure!(
                now - started < Duration::from_secs(600),
                "no progress: {committed} of {total} commits after 10 minutes"
            );
        }
    }
    let end = Marks::now();
    let (start, committed_before, messages_before) = window_start.expect("the window started");
    anyhow::ensure!(
        node.get_current_leader() == Some((node.get_pid(), true)),
        "the OmniPaxos leader changed during the run"
    );
    let thread_ns = (end.thread_cpu - start.thread_cpu).as_nanos() as u64;
    Ok(Window {
        commits: committed - committed_before,
        start,
        end,
        // The leader's instance, its sends and receives and the client, on this thread.
        engine_cpu_ns: thread_ns,
        latencies,
        counts: vec![("leader_messages", messages - messages_before)],
    })
}
