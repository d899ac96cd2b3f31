//! OmniPaxos on threads in the embedding benchmark: the same three instances as
//! [`super::omnipaxos`] (elected there, on one thread, with logical ticks), then each on a
//! thread of its own, messages sent over an unbounded crossbeam channel per instance —
//! as a service embedding it on its replicas' threads would, and as Velos's replicas run
//! in this benchmark. The client runs on the leader's thread. An idle follower spins, then
//! yields (as Velos's followers idle by default). Every instance ticks every
//! `omnipaxos_tick_ns` of wall time. A command is committed when the leader's
//! `decided_idx` passes it.

use super::omnipaxos::{Cluster, Command, Commits, Instance, Ticker, index_of};
use super::{EmbedConfig, Window, Workload};
use crossbeam_channel::{Receiver, Sender, unbounded};
use omnipaxos::messages::Message;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

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
            // A receiver gone means the run is over: its messages no longer matter.
            let _ = self.to[index_of(m.get_receiver())].send(m);
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
    mut ticks: Ticker,
    stop: &AtomicBool,
) {
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
        if idle % 64 == 0 && ticks.due(Instant::now()) {
            node.tick();
        }
    }
}

/// Measures one run.
pub(super) fn measure(config: &EmbedConfig, workload: Workload) -> anyhow::Result<Window> {
    let outstanding = config.outstanding(workload);
    let total = config.total(workload);
    let mut cluster = Cluster::new(config, config.batch(workload))?;
    let leader = cluster.elect()?;
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
                let ticks = Ticker::new(config);
                s.spawn(move || follow(node, inbox, net, ticks, stop));
            }
        }
        let run = lead(
            leader_node,
            &inboxes[leader],
            network(),
            (config, outstanding, total),
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
) -> anyhow::Result<Window> {
    let mut commits = Commits::new(config, outstanding, node.get_decided_idx() as u64);
    let mut ticks = Ticker::new(config);
    let (mut proposed, mut messages, mut rounds) = (0u64, 0u64, 0u64);
    while commits.committed() < total {
        while proposed < total && proposed - commits.committed() < outstanding {
            node.append(Command(proposed))
                .map_err(|e| anyhow::anyhow!("append: {e:?}"))?;
            proposed += 1;
        }
        messages += net.send(&mut node);
        messages += receive(&mut node, inbox);
        rounds += 1;
        if commits
            .decided(node.get_decided_idx() as u64, proposed)?
            .is_some()
        {
            commits.start_when_warm(messages);
        }
        if rounds % 64 == 0 {
            let now = Instant::now();
            if ticks.due(now) {
                node.tick();
            }
            commits.ensure_progress(now, total)?;
        }
    }
    anyhow::ensure!(
        node.get_current_leader() == Some((node.get_pid(), true)),
        "the OmniPaxos leader changed during the run"
    );
    // The leader's instance, its sends and receives and the client, on this thread.
    Ok(commits.finish(messages, "leader_messages"))
}
