//! The service a simulated cluster runs on each replica: a digest of the entries applied
//! (FNV-1a over slot and value), snapshotted every so many entries. The harness plays the
//! embedding application between stretches of simulated time: it applies what each
//! replica committed, restores from the snapshots a replica copied, and hands its own
//! snapshots to the replica, which lets the log's ring recycle. With lease reads on, it
//! also asks every replica for a read at every visit and keeps what was served.

use super::report::ReplicaReport;
use super::spec::ClusterSpec;
use crate::durable::disks::Disks;
use crate::harness::script::Scripted;
use std::collections::{BTreeMap, HashMap, VecDeque};
use velos_core::log::ProposeError;
use velos_core::log::membership::Members;
use velos_sim::rng::Rng;
use velos_sim::simulate::Simulator;

/// Virtual time between two visits of the harness to the services (ns).
const VISIT_NS: u64 = 2_000;

/// The digest of entries `(slot, value as hex)` applied in order from an empty state.
pub fn digest_of(entries: &[(u64, &str)]) -> u64 {
    digest_from(Origin::default(), entries)
}

/// The digest of entries `(engine slot, value as hex)` applied in order from `origin`:
/// the log's slot of the engine's slot 0, and the state there.
pub fn digest_from(origin: Origin, entries: &[(u64, &str)]) -> u64 {
    entries.iter().fold(origin.digest, |d, &(slot, hex)| {
        step(d, origin.base + slot, hex.as_bytes())
    })
}

/// Where the engine's log starts for the services: slot 0 of a cluster started afresh,
/// or the next slot of the log a cluster restarted from disk recovered, with the state
/// the recovered log makes (the engine counts its slots from there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The log's slot of the engine's slot 0.
    pub base: u64,
    /// The services' digest there.
    pub digest: u64,
}

impl Default for Origin {
    fn default() -> Origin {
        Origin {
            base: 0,
            digest: EMPTY,
        }
    }
}

/// The digest of an empty log.
pub const EMPTY: u64 = 0xcbf2_9ce4_8422_2325;

/// The digest after `bytes` applied in the log's slot `slot`.
pub fn step(mut d: u64, slot: u64, bytes: &[u8]) -> u64 {
    for b in slot.to_le_bytes().iter().chain(bytes) {
        d ^= u64::from(*b);
        d = d.wrapping_mul(0x0100_0000_01b3);
    }
    d
}

/// Bytes as the services digest them.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One replica's service.
#[derive(Clone, Debug)]
struct Service {
    digest: u64,
    /// The next entry the service expects.
    next: u64,
    /// How far into the replica's `applied` history the service has read.
    cursor: usize,
    last_snapshot: u64,
    /// The digest at `last_snapshot`.
    snapshot_digest: u64,
    installs: Vec<(u64, u64)>,
    /// Reads asked and not answered: id → when asked.
    asked: HashMap<u64, u64>,
}

/// A lease read a replica served: asked at `asked_at`, answered with `index` (the state
/// after every entry below it).
#[derive(Clone, Copy, Debug)]
struct Served {
    replica: u16,
    asked_at: u64,
    index: u64,
}

/// The services of a simulated cluster (none when the spec asks for neither snapshots nor
/// reads).
#[derive(Clone, Debug)]
pub struct Services {
    every: Option<u64>,
    /// Snapshot size (at least the 8-byte digest).
    bytes: usize,
    reads: bool,
    services: Vec<Service>,
    served: Vec<Served>,
    refused: u64,
    /// Membership changes not proposed yet: `(at_ns, members)`, in time order.
    changes: VecDeque<(u64, Members)>,
    /// Processes replaced by fresh ones, as they were at their crash, with their
    /// services: `(replica, process, its service's next entry and digest, its installs)`.
    retired: Vec<Retired>,
    /// With reads: slot → the first visit at which a service saw some replica past it
    /// (applied, or copied in a snapshot) — when a service could first act on it.
    seen_applied: BTreeMap<u64, u64>,
    /// Per replica: the next slot not yet in `seen_applied` for it.
    seen_next: Vec<u64>,
    /// Where the log starts for the services (a cluster restarted from disk: the
    /// recovered log's next slot and state).
    origin: Origin,
    /// With durability: every replica's disk, fed what its service applies, takes and
    /// copies.
    disks: Option<Persisting>,
    /// Replaced processes that resumed at their disk's snapshot.
    resumed: usize,
}

/// Every replica's disk in a durable run, and the durable index over time.
#[derive(Clone, Debug)]
pub struct Persisting {
    /// The disks.
    pub disks: Disks,
    /// `(ns, durable index)` at every visit where it moved.
    pub history: Vec<(u64, u64)>,
    /// The draws of the replaced processes' disks (what a crash leaves unsynced).
    rng: Rng,
}

/// A process replaced by a fresh one, as it was at its crash, with its service's state.
#[derive(Clone, Debug)]
pub struct Retired {
    /// The replica it was.
    pub id: u16,
    /// The process.
    pub process: Scripted,
    /// Its service's next entry and digest (`(0, 0)` without a service).
    pub digest: (u64, u64),
    /// The snapshots it copied: `(point, digest)`.
    pub installs: Vec<(u64, u64)>,
}

impl Service {
    /// A service that applied nothing yet since `origin`.
    fn empty(origin: Origin) -> Service {
        Service {
            digest: origin.digest,
            next: 0,
            cursor: 0,
            last_snapshot: 0,
            snapshot_digest: origin.digest,
            installs: Vec::new(),
            asked: HashMap::new(),
        }
    }
}

impl Services {
    /// The services of `spec`'s replicas.
    pub fn new(spec: &ClusterSpec) -> Services {
        Services::from(spec, Origin::default(), None)
    }

    /// The services of `spec`'s replicas from `origin` on, persisting on `disks` (a
    /// durable run's, [`ClusterSpec::durable`], when `None`: fresh ones).
    pub fn from(spec: &ClusterSpec, origin: Origin, disks: Option<Disks>) -> Services {
        let service = Service::empty(origin);
        let replicas = usize::from(spec.log.replicas);
        let disks = spec.durable.map(|d| Persisting {
            disks: disks.unwrap_or_else(|| Disks::new(replicas, &d.faults)),
            history: Vec::new(),
            rng: Rng::new(spec.seed ^ 0xD15C_0FF5),
        });
        Services {
            every: spec.snapshot_every,
            bytes: spec.snapshot_bytes.max(8),
            reads: spec.lease_reads,
            services: vec![service; usize::from(spec.log.replicas)],
            served: Vec::new(),
            refused: 0,
            changes: spec.reconfigure.iter().copied().collect(),
            retired: Vec::new(),
            seen_applied: BTreeMap::new(),
            seen_next: vec![0; replicas],
            origin,
            disks,
            resumed: 0,
        }
    }

    /// Replaced processes that resumed at their disk's snapshot.
    pub fn resumed(&self) -> usize {
        self.resumed
    }

    /// The disks of a durable run, and the durable index over time.
    pub fn persisting(&self) -> Option<&Persisting> {
        self.disks.as_ref()
    }

    /// Where the log starts for the services.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Takes the disks of a durable run (the whole cluster lost power).
    pub fn take_disks(&mut self) -> Option<Persisting> {
        self.disks.take()
    }

    /// Replica `r`'s process `process` is replaced by a fresh one: it is kept as it was,
    /// with its service's state, and the new process's service starts empty.
    pub fn retire(&mut self, r: u16, process: Scripted) {
        let i = usize::from(r);
        let old = std::mem::replace(&mut self.services[i], Service::empty(self.origin));
        self.retired.push(Retired {
            id: r,
            digest: match self.every {
                Some(_) => (old.next, old.digest),
                None => (0, 0),
            },
            installs: old.installs,
            process,
        });
    }

    /// Replica `r`'s fresh process resumed at `point` from its own disk's snapshot
    /// ([`super::cluster::restart_from`]): its service restored from that snapshot,
    /// `bytes` (the snapshot as [`Services::snapshot_of`] made it). The snapshot checks
    /// count it as a jump of its log, its digest held to the decided entries below it.
    pub fn resume(&mut self, r: u16, point: u64, bytes: &[u8]) {
        self.resumed += 1;
        let service = &mut self.services[usize::from(r)];
        assert_eq!(service.next, 0, "a fresh process's service resumes");
        let digest = u64::from_le_bytes(bytes[..8].try_into().expect("a digest"));
        (service.digest, service.next, service.last_snapshot) = (digest, point, point);
        service.snapshot_digest = digest;
        service.installs.push((point, digest));
    }

    /// Replica `r`'s service's last snapshot, as it handed it to the log: `(point,
    /// bytes)`, `None` before its first (or without snapshots).
    pub fn snapshot_of(&self, r: u16) -> Option<(u64, Vec<u8>)> {
        let service = &self.services[usize::from(r)];
        (self.every.is_some() && service.last_snapshot > 0).then(|| {
            (
                service.last_snapshot,
                padded(service.snapshot_digest, self.bytes),
            )
        })
    }

    /// Replica `r` crashed and a new process starts in its place: with durability, its
    /// disk loses what it had not synced (the machine may have gone down with it) and its
    /// writer goes on from what the disk holds; the newest snapshot there that the
    /// running engine took, where the new process resumes — `(engine point, the snapshot
    /// as the disk keeps it)` ([`super::cluster::restart_from`]).
    pub fn restart_disk(&mut self, r: u16) -> Option<(u64, Vec<u8>)> {
        let p = self.disks.as_mut()?;
        p.disks.restart(usize::from(r), &mut p.rng)
    }

    /// The processes replaced so far, in the order they were.
    pub fn retired(&self) -> &[Retired] {
        &self.retired
    }

    /// Runs `sim` until `until_ns`, visiting the services every 2 µs of virtual time (or not at
    /// all without snapshots, so that such runs step exactly as before services existed).
    pub fn run(&mut self, sim: &mut Simulator<Scripted>, until_ns: u64) {
        if self.every.is_none() && !self.reads && self.changes.is_empty() && self.disks.is_none() {
            sim.run(until_ns, u64::MAX);
            return;
        }
        assert!(self.every != Some(0), "snapshots every so many entries");
        while sim.now() < until_ns {
            let next = (sim.now() + VISIT_NS).min(until_ns);
            sim.run(next, u64::MAX);
            self.visit(sim);
        }
    }

    /// Runs `sim` to `end` in steps of `step_ns`, watching how far the log got (`reached`:
    /// e.g. the next slot to apply of the most advanced live replica,
    /// [`super::cluster::most_applied`]): the longest stretch without it moving, counted
    /// from `since` (a stretch starting earlier counts from there; the one still open at
    /// `end` counts too), and where it got. `from`: where it was at the start. The
    /// commit-gap measure of the tests that slow or crash a replica
    /// (`tests/slow_sender.rs`, `lagging_leader.rs`, `lagging_acceptor.rs`).
    pub fn longest_gap(
        &mut self,
        sim: &mut Simulator<Scripted>,
        (from, since): (u64, u64),
        (end, step_ns): (u64, u64),
        reached: impl Fn(&Simulator<Scripted>) -> u64,
    ) -> (u64, u64) {
        assert!(step_ns > 0, "a step of virtual time");
        let (mut last, mut at, mut gap) = (from, since, 0);
        while sim.now() < end {
            let next = sim.now() + step_ns;
            self.run(sim, next);
            let now = reached(sim);
            if now > last || sim.now() >= end {
                gap = gap.max(sim.now().saturating_sub(at));
                (last, at) = (now, sim.now().max(at));
            }
        }
        assert!(sim.now() >= end && last >= from, "the run reached its end");
        (gap, last)
    }

    fn visit(&mut self, sim: &mut Simulator<Scripted>) {
        let now = sim.now();
        let m = sim.machine_mut();
        // The next membership change, once due, goes to whichever live replica leads; it
        // is asked again at the next visit until one takes it.
        if let Some(&(at, members)) = self.changes.front()
            && at <= now
        {
            let up: Vec<bool> = m.threads.iter().map(|t| m.is_up(t.node)).collect();
            for (t, up) in m.threads.iter_mut().zip(up) {
                if up && t.process.is_leader() {
                    match t.process.propose_members(members) {
                        Ok(_) => {
                            self.changes.pop_front();
                            break;
                        }
                        Err(ProposeError::BadMembership(why)) => panic!("cluster spec: {why}"),
                        Err(_) => {}
                    }
                }
            }
        }
        for (i, service) in self.services.iter_mut().enumerate() {
            let node = m.threads[i].node;
            if !m.is_up(node) {
                continue;
            }
            let replica = &mut m.threads[i].process;
            if self.reads {
                // What this replica applied since the last visit, seen now: before the
                // read asked below, as a service acting on it would have asked after.
                let next = replica.next_apply();
                // (A fresh process in the place starts below: an empty range, then over.)
                for slot in self.seen_next[i]..next {
                    self.seen_applied.entry(slot).or_insert(now);
                }
                self.seen_next[i] = next;
                for (id, answer) in replica.take_reads() {
                    let asked_at = service.asked.remove(&id).expect("a read asked");
                    match answer {
                        Ok(index) => self.served.push(Served {
                            replica: i as u16,
                            asked_at,
                            index,
                        }),
                        Err(_) => self.refused += 1,
                    }
                }
                service.asked.insert(replica.read(), now);
            }
            if self.every.is_none() && self.disks.is_none() {
                continue;
            }
            let mut disks = self.disks.as_mut().map(|p| &mut p.disks);
            for (point, bytes) in replica.take_installed() {
                // The disk keeps a snapshot as the log's banks do (the membership from its
                // point on first), so that a later process in the place resumes from it.
                if let Some(d) = disks.as_deref_mut()
                    && let Some(wrapped) = replica.wrap_snapshot(point, &bytes)
                {
                    d.installed(i, point, &wrapped);
                }
                // A copy whose filler is not the digest's (or of another size) is corrupt:
                // a digest no log has, which the snapshot check reports.
                let digest = u64::from_le_bytes(bytes[..8].try_into().expect("a digest"));
                let digest = if bytes == padded(digest, self.bytes) {
                    digest
                } else {
                    CORRUPT
                };
                service.installs.push((point, digest));
                (service.digest, service.next) = (digest, point);
                service.last_snapshot = point;
                service.snapshot_digest = digest;
            }
            for (slot, value) in &replica.applied[service.cursor..] {
                if *slot < service.next {
                    continue; // below a snapshot copied meanwhile
                }
                assert_eq!(*slot, service.next, "no holes: entries come in order");
                let log_slot = self.origin.base + *slot;
                service.digest = step(service.digest, log_slot, hex(value).as_bytes());
                service.next += 1;
                if let Some(d) = disks.as_deref_mut() {
                    d.append(i, *slot, value);
                }
            }
            service.cursor = replica.applied.len();
            let Some(every) = self.every else {
                continue;
            };
            // A large snapshot is written over several turns: the next waits for it.
            let writing = replica.snapshot_writing().is_some();
            if service.next >= service.last_snapshot + every && !writing {
                let bytes = padded(service.digest, self.bytes);
                if let Some(d) = disks
                    && let Some(wrapped) = replica.wrap_snapshot(service.next, &bytes)
                {
                    d.snapshot(i, service.next, &wrapped);
                }
                replica
                    .snapshot_taken(service.next, bytes)
                    .unwrap_or_else(|e| panic!("cluster spec: {e}"));
                service.last_snapshot = service.next;
                service.snapshot_digest = service.digest;
            }
        }
        if let Some(p) = &mut self.disks {
            // Every live replica's disk runs to now; a crashed one's batch stays unwritten.
            let up: Vec<bool> = m.threads.iter().map(|t| m.is_up(t.node)).collect();
            p.disks.visit(now, &up);
            let index = p.disks.durable_index(up.len() / 2 + 1);
            if p.history
                .last()
                .map_or(index > self.origin.base, |&(_, i)| i != index)
            {
                p.history.push((now, index));
            }
        }
    }

    /// Lease reads served and refused.
    pub fn read_counts(&self) -> (u64, u64) {
        (self.served.len() as u64, self.refused)
    }

    /// Lemma (no stale lease read), checked: a read served must see every write whose
    /// client could have been told it was done before the read was asked — its leader
    /// decided it, or any replica's service saw it applied at a visit up to the read's
    /// (followers learn decisions by themselves, sometimes before the leader does; a
    /// service may act on what a follower applied). A follower's own stamp of an apply
    /// is its turn's clock reading, earlier than the apply: a follower paused right after
    /// reading its clock applies what it learns in that turn after the pause, under the
    /// earlier stamp, and the stamp would charge a leader's reads asked during the pause
    /// with a write not yet applied (seen in `tests/lease.rs` at seed 16 once followers
    /// learned several slots a turn: slots stamped 146,700 ns, applied at 341,120 to
    /// 342,030 ns, after a 194 µs pause). What a service saw, and when, is what it could
    /// act on.
    /// `failures` gets a line per stale read. Its premise: some read was served — a run in
    /// which every read was refused (leases off, or never held) checked nothing, and fails.
    pub fn check_reads(&self, replicas: &[ReplicaReport], failures: &mut Vec<String>) -> bool {
        if self.served.is_empty() {
            failures.push(format!(
                "lease reads: none served ({} refused): the check was not exercised (leases \
                 off, or never held)",
                self.refused
            ));
            return false;
        }
        // Per slot, from when on a read asked must include it: just after its leader
        // decided it (told to its client at once), or from the visit at which a service
        // first saw it applied (it could act on it then, and its read asked at that visit
        // came after).
        let mut binding: BTreeMap<u64, u64> = BTreeMap::new();
        let decided = replicas.iter().flat_map(|r| r.acknowledged.iter());
        let after_decided = decided.map(|&(slot, at)| (slot, at + 1));
        let seen = self.seen_applied.iter().map(|(&slot, &at)| (slot, at));
        for (slot, from) in after_decided.chain(seen) {
            let t = binding.entry(slot).or_insert(from);
            *t = (*t).min(from);
        }
        let mut fresh = true;
        for read in &self.served {
            let missed = binding
                .iter()
                .find(|&(&slot, &from)| from <= read.asked_at && slot >= read.index);
            if let Some((slot, at)) = missed {
                fresh = false;
                failures.push(format!(
                    "replica {} served a read asked at {} ns at index {}, but slot {slot} was \
                     acknowledged by {at} ns (decided, or applied where a service saw it)",
                    read.replica, read.asked_at, read.index
                ));
            }
        }
        fresh
    }

    /// The snapshots replica `r` copied: `(point, digest)`.
    pub fn installs(&self, r: usize) -> Vec<(u64, u64)> {
        self.services[r].installs.clone()
    }

    /// Replica `r`'s service: the next entry it expects and its digest (`(0, 0)` for a
    /// run without services).
    pub fn digest(&self, r: usize) -> (u64, u64) {
        match self.every {
            Some(_) => (self.services[r].next, self.services[r].digest),
            None => (0, 0),
        }
    }
}

/// The digest recorded for a copied snapshot that does not restore.
const CORRUPT: u64 = u64::MAX;

/// A snapshot of `len` bytes: the digest, then filler derived from it (a step of the
/// digest per word).
pub fn padded(digest: u64, len: usize) -> Vec<u8> {
    let mut out = digest.to_le_bytes().to_vec();
    let mut filler = digest;
    while out.len() < len {
        filler = filler.rotate_left(7) ^ 0x9e37_79b9_7f4a_7c15;
        out.extend_from_slice(&filler.to_le_bytes());
    }
    out.truncate(len.max(8));
    out
}
