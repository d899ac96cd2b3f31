//! OmniPaxos in the embedding benchmark: three `OmniPaxos` instances with the crate's
//! in-memory storage (`MemoryStorage`), on one thread with the client. Messages are moved
//! by value from each instance's outgoing buffer into its receiver's `handle_incoming` —
//! no serialisation, no channel, no thread handoff: the fastest in-process transport we
//! know for it, so that what is measured is OmniPaxos's own work. Unbatched (one client,
//! many): `batch_size` 1, one `append` per command (the leader still merges the entries
//! appended between two deliveries into one `AcceptDecide` per follower, as it always
//! does); batched: `batch_size` the configuration's `batch` (OmniPaxos hands a batch to
//! its log only when it is full, so every count of a batched run is whole batches). Every instance is ticked every `omnipaxos_tick_ns` of wall time, with an
//! election timeout of `omnipaxos_election_ticks` ticks; the leader is elected before
//! the warm-up. A command is committed when the leader's `decided_idx` passes it.

use super::{EmbedConfig, Marks, Window, Workload, latency_histogram};
use omnipaxos::messages::Message;
use omnipaxos::storage::{Entry, NoSnapshot};
use omnipaxos::{ClusterConfig, OmniPaxos, ServerConfig};
use omnipaxos_storage::memory_storage::MemoryStorage;
use std::time::{Duration, Instant};

/// A command: an 8-byte counter, copied without allocation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Command(#[allow(dead_code)] pub(super) u64);

impl Entry for Command {
    type Snapshot = NoSnapshot;
}

pub(super) type Instance = OmniPaxos<Command, MemoryStorage<Command>>;

/// Three instances and the in-process network between them.
pub(super) struct Cluster {
    /// Instance of pid `p` at index `p - 1`.
    pub(super) nodes: Vec<Instance>,
    outbox: Vec<Message<Command>>,
    /// Messages moved so far.
    messages: u64,
    tick: Duration,
    last_tick: Instant,
}

impl Cluster {
    pub(super) fn new(config: &EmbedConfig, batch: u64) -> anyhow::Result<Cluster> {
        let cluster = ClusterConfig {
            configuration_id: 1,
            nodes: vec![1, 2, 3],
            flexible_quorum: None,
        };
        let nodes = (1..=3)
            .map(|pid| {
                let server = ServerConfig {
                    pid,
                    election_tick_timeout: config.omnipaxos_election_ticks,
                    batch_size: usize::try_from(batch)?,
                    ..ServerConfig::default()
                };
                cluster
                    .clone()
                    .build_for_server(server, MemoryStorage::default())
                    .map_err(|e| anyhow::anyhow!("OmniPaxos configuration: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Cluster {
            nodes,
            outbox: Vec::new(),
            messages: 0,
            tick: Duration::from_nanos(config.omnipaxos_tick_ns),
            last_tick: Instant::now(),
        })
    }

    /// One pass over the instances: each one's outgoing messages handed to their
    /// receivers (what a receiver sends in reply goes out in this pass if its turn is
    /// still to come). Whether anything moved.
    fn deliver(&mut self) -> bool {
        let mut moved = false;
        for i in 0..self.nodes.len() {
            self.nodes[i].take_outgoing_messages(&mut self.outbox);
            for m in self.outbox.drain(..) {
                let to = usize::try_from(m.get_receiver()).expect("a small pid") - 1;
                self.nodes[to].handle_incoming(m);
                self.messages += 1;
                moved = true;
            }
        }
        moved
    }

    fn tick_all(&mut self) {
        for n in &mut self.nodes {
            n.tick();
        }
    }

    /// Ticks every instance if a tick period has passed.
    fn tick_if_due(&mut self, now: Instant) {
        if now - self.last_tick >= self.tick {
            self.last_tick = now;
            self.tick_all();
        }
    }

    /// The leader every instance agrees on, in its accept phase, if any.
    fn leader(&self) -> Option<usize> {
        let (pid, accepted) = self.nodes[0].get_current_leader()?;
        let agreed = self
            .nodes
            .iter()
            .all(|n| n.get_current_leader() == Some((pid, true)));
        (accepted && agreed).then(|| usize::try_from(pid).expect("a small pid") - 1)
    }

    /// Ticks (without waiting for wall time: ticks are logical) and delivers until a
    /// leader is elected.
    pub(super) fn elect(&mut self) -> anyhow::Result<usize> {
        for _ in 0..10_000 {
            self.tick_all();
            while self.deliver() {}
            if let Some(l) = self.leader() {
                return Ok(l);
            }
        }
        anyhow::bail!("OmniPaxos elected no leader in 10 000 ticks")
    }
}

/// Measures one run.
pub(super) fn measure(config: &EmbedConfig, workload: Workload) -> anyhow::Result<Window> {
    let outstanding = config.outstanding(workload);
    let total = config.total(workload);
    let mut cluster = Cluster::new(config, config.batch(workload))?;
    let leader = cluster.elect()?;
    let base = cluster.nodes[leader].get_decided_idx() as u64;
    let mut latencies = (outstanding == 1).then(latency_histogram);
    let mut proposed = 0u64;
    let mut committed = 0u64;
    let mut window_start: Option<(Marks, u64, u64)> = None;
    let mut last_commit = Instant::now();
    let started = Instant::now();
    let mut rounds = 0u64;
    while committed < total {
        while proposed < total && proposed - committed < outstanding {
            cluster.nodes[leader]
                .append(Command(proposed))
                .map_err(|e| anyhow::anyhow!("append: {e:?}"))?;
            proposed += 1;
        }
        cluster.deliver();
        rounds += 1;
        let decided = cluster.nodes[leader].get_decided_idx() as u64 - base;
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
            cluster.tick_if_due(now);
            if window_start.is_none() && committed >= config.warmup_commits {
                let marks = Marks::now();
                last_commit = marks.wall;
                window_start = Some((marks, committed, cluster.messages));
            }
        } else if rounds % 64 == 0 {
            let now = Instant::now();
            cluster.tick_if_due(now);
            anyhow::ensure!(
                now - started < Duration::from_secs(600),
                "no progress: {committed} of {total} commits after 10 minutes"
            );
        }
    }
    let end = Marks::now();
    let (start, committed_before, messages_before) = window_start.expect("the window started");
    anyhow::ensure!(
        cluster.leader() == Some(leader),
        "the OmniPaxos leader changed during the run"
    );
    let thread_ns = (end.thread_cpu - start.thread_cpu).as_nanos() as u64;
    Ok(Window {
        commits: committed - committed_before,
        start,
        end,
        // Every instance's handling runs for a decision, all on this thread.
        engine_cpu_ns: thread_ns,
        latencies,
        counts: vec![("messages", cluster.messages - messages_before)],
    })
}
