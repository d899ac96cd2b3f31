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
use omnipaxos::util::NodeId;
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
    ticks: Ticker,
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
            ticks: Ticker::new(config),
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
                self.nodes[index_of(m.get_receiver())].handle_incoming(m);
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
        if self.ticks.due(now) {
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
        (accepted && agreed).then(|| index_of(pid))
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

/// The index in [`Cluster::nodes`] of the instance with pid `pid`.
pub(super) fn index_of(pid: NodeId) -> usize {
    usize::try_from(pid).expect("a small pid") - 1
}

/// Ticks on the wall clock: due once a tick period (`omnipaxos_tick_ns`) has passed.
pub(super) struct Ticker {
    period: Duration,
    last: Instant,
}

impl Ticker {
    pub(super) fn new(config: &EmbedConfig) -> Ticker {
        Ticker {
            period: Duration::from_nanos(config.omnipaxos_tick_ns),
            last: Instant::now(),
        }
    }

    /// Whether a tick is due at `now` (then the next one is a period later).
    pub(super) fn due(&mut self, now: Instant) -> bool {
        let due = now - self.last >= self.period;
        if due {
            self.last = now;
        }
        due
    }
}

/// The leader's count of a run's commits: its decided index against where the run
/// started, the commit latencies of a one-client run, and the measured window, which
/// starts once the warm-up's commits are in.
pub(super) struct Commits {
    base: u64,
    committed: u64,
    warmup: u64,
    latencies: Option<hdrhistogram::Histogram<u64>>,
    last_commit: Instant,
    started: Instant,
    /// The window's clocks, commits and messages at its start.
    window: Option<(Marks, u64, u64)>,
}

impl Commits {
    /// No commit yet; the leader's decided index is `base`.
    pub(super) fn new(config: &EmbedConfig, outstanding: u64, base: u64) -> Commits {
        let now = Instant::now();
        Commits {
            base,
            committed: 0,
            warmup: config.warmup_commits,
            latencies: (outstanding == 1).then(latency_histogram),
            last_commit: now,
            started: now,
            window: None,
        }
    }

    /// Commands committed so far.
    pub(super) fn committed(&self) -> u64 {
        self.committed
    }

    /// The leader's decided index now, `proposed` commands appended: when some newly
    /// committed, records them (and their latency within the window) and returns when.
    pub(super) fn decided(
        &mut self,
        decided_idx: u64,
        proposed: u64,
    ) -> anyhow::Result<Option<Instant>> {
        let decided = decided_idx - self.base;
        anyhow::ensure!(decided <= proposed, "decided {decided} of {proposed}");
        if decided <= self.committed {
            return Ok(None);
        }
        self.committed = decided;
        let now = Instant::now();
        if self.window.is_some()
            && let Some(h) = self.latencies.as_mut()
        {
            h.record((now - self.last_commit).as_nanos() as u64)
                .expect("the histogram grows");
        }
        self.last_commit = now;
        Ok(Some(now))
    }

    /// Starts the window once the warm-up's commits are in; `messages` so far.
    pub(super) fn start_when_warm(&mut self, messages: u64) {
        if self.window.is_none() && self.committed >= self.warmup {
            let marks = Marks::now();
            self.last_commit = marks.wall;
            self.window = Some((marks, self.committed, messages));
        }
    }

    /// Fails a run that committed nothing new for ten minutes, at `now`, of `total`.
    pub(super) fn ensure_progress(&self, now: Instant, total: u64) -> anyhow::Result<()> {
        anyhow::ensure!(
            now - self.started < Duration::from_secs(600),
            "no progress: {} of {total} commits after 10 minutes",
            self.committed
        );
        Ok(())
    }

    /// The window, ended now, its messages counted as `name` from `messages` so far; the
    /// engine's CPU is this thread's.
    pub(super) fn finish(self, messages: u64, name: &'static str) -> Window {
        let end = Marks::now();
        let (start, committed_before, messages_before) = self.window.expect("the window started");
        Window {
            commits: self.committed - committed_before,
            start,
            end,
            engine_cpu_ns: (end.thread_cpu - start.thread_cpu).as_nanos() as u64,
            nic_cpu_ns: None,
            latencies: self.latencies,
            counts: vec![(name, messages - messages_before)],
        }
    }
}

/// Measures one run.
pub(super) fn measure(config: &EmbedConfig, workload: Workload) -> anyhow::Result<Window> {
    let outstanding = config.outstanding(workload);
    let total = config.total(workload);
    let mut cluster = Cluster::new(config, config.batch(workload))?;
    let leader = cluster.elect()?;
    let base = cluster.nodes[leader].get_decided_idx() as u64;
    let mut commits = Commits::new(config, outstanding, base);
    let mut proposed = 0u64;
    let mut rounds = 0u64;
    while commits.committed() < total {
        while proposed < total && proposed - commits.committed() < outstanding {
            cluster.nodes[leader]
                .append(Command(proposed))
                .map_err(|e| anyhow::anyhow!("append: {e:?}"))?;
            proposed += 1;
        }
        cluster.deliver();
        rounds += 1;
        let decided_idx = cluster.nodes[leader].get_decided_idx() as u64;
        if let Some(now) = commits.decided(decided_idx, proposed)? {
            cluster.tick_if_due(now);
            commits.start_when_warm(cluster.messages);
        } else if rounds % 64 == 0 {
            let now = Instant::now();
            cluster.tick_if_due(now);
            commits.ensure_progress(now, total)?;
        }
    }
    anyhow::ensure!(
        cluster.leader() == Some(leader),
        "the OmniPaxos leader changed during the run"
    );
    // Every instance's handling runs for a decision, all on this thread.
    Ok(commits.finish(cluster.messages, "messages"))
}
