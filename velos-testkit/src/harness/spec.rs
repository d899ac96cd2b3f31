//! What one simulated cluster run is: the log, the faults, the clients, the latency
//! profile, the services ([`ClusterSpec`]; run by [`super::cluster::run`]).

use super::script::ClientScript;
use crate::durable::disks::DiskFaults;
use velos_core::log::LogConfig;
use velos_core::log::membership::Members;
use velos_sim::latency::LatencyModel;

/// One simulated run.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The log.
    pub log: LogConfig,
    /// The seed: it fixes the whole run.
    pub seed: u64,
    /// Virtual time to run (ns).
    pub duration_ns: u64,
    /// Crash whichever replica leads at this time.
    pub crash_leader_at: Option<u64>,
    /// Crash these replicas at these times.
    pub crashes: Vec<(u16, u64)>,
    /// Slow these replicas down for the whole run: every step of an operation towards
    /// one costs this much more (ns).
    pub slow: Vec<(u16, u64)>,
    /// Values each replica proposes while it leads.
    pub client: ClientScript,
    /// Step costs.
    pub latency: LatencyModel,
    /// Start every slot's words (epoch 0) promised to a proposal number this far below the
    /// overflow threshold, and the last replica's at the threshold itself (as if promised
    /// to a proposer that then vanished): the run drives slots over it, into the overflow
    /// fallback, some of them after a value was chosen in epoch 0.
    pub near_overflow: Option<u64>,
    /// Place every replica's acceptor words and value buffers in NIC device memory (the
    /// paper's option: the responder skips PCIe on them; see
    /// [`LatencyModel::device_mem_access_ns`]).
    pub device_memory: bool,
    /// Pause these replicas' CPUs: `(replica, at_ns, duration_ns)` ([`Fault::Pause`](velos_sim::simulate::Fault::Pause)).
    pub pauses: Vec<(u16, u64, u64)>,
    /// Slow every queue pair towards these replicas for a while: `(replica, at_ns,
    /// extra_ns, duration_ns)`, every step costing `extra_ns` more
    /// ([`Fault::Delay`](velos_sim::simulate::Fault::Delay)).
    pub delays: Vec<(u16, u64, u64, u64)>,
    /// Slow every queue pair these replicas post on for a while: `(replica, at_ns,
    /// extra_ns, duration_ns)` ([`Fault::DelayFrom`](velos_sim::simulate::Fault::DelayFrom)):
    /// the others still read their memory at full speed.
    pub delays_from: Vec<(u16, u64, u64, u64)>,
    /// Run a service on every replica (a digest of the entries applied) that snapshots
    /// every this many entries, so that the log's ring recycles and a replica that falls
    /// off it copies a snapshot (`log.max_snapshot_bytes` must hold `snapshot_bytes`).
    pub snapshot_every: Option<u64>,
    /// The size of the service's snapshots: its 8-byte digest, padded with filler derived
    /// from it (checked when a copy is restored), so that copies of many words are tried.
    pub snapshot_bytes: usize,
    /// Ask every replica for a lease read every 2 µs and check every read served against
    /// the entries applied anywhere before it was asked (`log.lease_ns` sets the leases).
    pub lease_reads: bool,
    /// Membership changes: `(at_ns, members)`, in time order. From `at_ns` on, whichever
    /// replica leads is asked (every 2 µs until it takes it) to propose the change
    /// ([`Replica::propose_members`](velos_core::log::Replica::propose_members)); `log.members` are the first members.
    pub reconfigure: Vec<(u64, Members)>,
    /// Replacements: `(replica, at_ns, after_ns)` — the replica crashes at `at_ns` and a
    /// fresh process starts in its place `after_ns` later, on blank memory, at the next
    /// incarnation ([`Replica::joining`](velos_core::log::Replica::joining)); the others are
    /// told ([`Replica::peer_replaced`](velos_core::log::Replica::peer_replaced)) and the
    /// leader makes it a voter through the log. In any order: the run sorts every action by
    /// its time.
    pub replace: Vec<(u16, u64, u64)>,
    /// The join path reaches these replicas late: `(replica, delay_ns)` — at every
    /// replacement, that replica is told `delay_ns` after the new process starts (its
    /// engine, then its node meets the new process: until then its queue pairs towards
    /// the place fail), the others at once. As over real RDMA, where the joiner connects
    /// to a majority and meets the rest in the background.
    pub told_late: Vec<(u16, u64)>,
    /// Every replica persists what it applies on a simulated disk of its own, and the
    /// whole cluster may lose power once ([`super::durable::run`]).
    pub durable: Option<DurableSpec>,
}

/// Durability in a simulated run: every replica's service hands what it applies, the
/// snapshots it takes and those it copies to a disk of its own (velos-store's writer on
/// velos-sim's `SimDisk`, [`crate::durable::disks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurableSpec {
    /// Every replica loses power at this time (ns); the cluster restarts from its disks
    /// and runs the rest of the duration.
    pub power_loss_at: Option<u64>,
    /// The disks' faults.
    pub faults: DiskFaults,
    /// This replica's disk has a bit flipped at the power loss (a bad sector): the
    /// checksums must catch it, and the recovery take that replica's log from the others.
    pub flip_at_loss: Option<u16>,
}

impl ClusterSpec {
    /// The time of the run's last crash or replacement start (`crashes`,
    /// `crash_leader_at`, `replace`), if any.
    pub fn last_crash(&self) -> Option<u64> {
        self.crashes
            .iter()
            .map(|&(_, t)| t)
            .chain(self.crash_leader_at)
            .chain(self.replace.iter().map(|&(_, at, after)| at + after))
            .max()
    }

    /// A pause of `replica` for `duration_ns` drawn from `seed` (starting 20 to 320 µs
    /// in), and on every third seed a crash of whoever leads, drawn too (50 to 450 µs in).
    /// A pause drawn at or after that crash starts before it instead: the crash may take
    /// the very replica the pause names, and a fault on a replica down does nothing (the
    /// run fails on it, check `faults_acted`).
    pub fn draw_pause_and_leader_crash(&mut self, seed: u64, replica: u16, duration_ns: u64) {
        let mut at = 20_000 + (seed * 7_919) % 300_000;
        if seed % 3 == 0 {
            let crash = 50_000 + (seed * 3_571) % 400_000;
            self.crash_leader_at = Some(crash);
            if at >= crash {
                at = 20_000 + (seed * 7_919) % (crash - 20_000);
            }
        }
        self.pauses = vec![(replica, at, duration_ns)];
    }

    /// A busy log on a recycling ring: `replicas` on 256 slots with a window of
    /// `pipeline`, every leader proposing 16-byte values without pause, services that
    /// snapshot every 64 entries (64-byte snapshots), run by the caller's driver.
    pub fn busy_ring(replicas: u16, pipeline: u32, seed: u64) -> ClusterSpec {
        let mut log = LogConfig::new(replicas, 256, 16);
        log.pipeline = pipeline;
        log.max_snapshot_bytes = 64;
        let client = ClientScript {
            count: 1_000_000,
            size: 16,
        };
        ClusterSpec {
            snapshot_every: Some(64),
            ..ClusterSpec::new(log, seed, 0, client)
        }
    }

    /// A fault-free run of `log` for `duration_ns` with `client`'s values, on the
    /// `cluster` latency profile, without services; set the other fields with struct
    /// update syntax.
    pub fn new(log: LogConfig, seed: u64, duration_ns: u64, client: ClientScript) -> ClusterSpec {
        ClusterSpec {
            log,
            seed,
            duration_ns,
            crash_leader_at: None,
            crashes: Vec::new(),
            slow: Vec::new(),
            client,
            latency: LatencyModel::cluster(),
            near_overflow: None,
            device_memory: false,
            pauses: Vec::new(),
            delays: Vec::new(),
            delays_from: Vec::new(),
            snapshot_every: None,
            snapshot_bytes: 8,
            lease_reads: false,
            reconfigure: Vec::new(),
            replace: Vec::new(),
            told_late: Vec::new(),
            durable: None,
        }
    }
}
