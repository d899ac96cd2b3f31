//! `velos vopr --power-loss`: every replica persists what its service applies on a disk
//! of its own (velos-sim's `SimDisk` running velos-store's writer in virtual time), with
//! disk faults drawn from the seed — slow syncs, a full disk, a flipped bit —, and at a
//! drawn instant of the safety phase every replica loses power at once.
//!
//! Checked then: every log a disk recovers is a prefix of the decided log (each entry
//! the one decided in its slot, its snapshot the state the decided entries below its
//! point make); and the disks recover at least to the durable index the replicas showed
//! at the power loss — with *every* majority of them when no bit was flipped (a recovery
//! needs only a majority), with all of them otherwise (a damaged copy is a lost copy) —,
//! so every entry acknowledged as durable survives. Then the cluster restarts from disk
//! ([`restart`]): a fresh engine on blank memory (no promise, vote or acceptor word of
//! before exists: rule (no amnesia) cannot be broken) whose slot 0 stands for the
//! recovered log's next slot, every disk brought up to the longest log, every service
//! rebuilt from it, and a scripted client deciding on; a second power loss at its end is
//! checked the same way against the whole decided log, both runs' entries.

use super::kv::KvMachine;
use super::scenario::Scenario;
use super::services::Services;
use crate::harness::cluster::{ClusterSpec, machine, sim_config};
use crate::harness::script::{ClientScript, Scripted};
use std::collections::{BTreeMap, VecDeque};
use velos_rdma::NodeId;
use velos_sim::disk::{DiskModel, SimDisk};
use velos_sim::rng::Rng;
use velos_sim::simulate::Simulator;
use velos_store::merge::merge;
use velos_store::quorum::{Mutation as DiskMutation, durable_index_with};
use velos_store::recover::{Recovered, recover};
use velos_store::segment::Kind;
use velos_store::writer::{DiskOp, Writer};

/// Segments roll at this size: small, so that runs cross segment boundaries and
/// snapshots delete segments behind them.
const SEGMENT_BYTES: usize = 2 << 10;

/// Virtual time the cluster runs after its restart from disk (ns).
const RESTARTED_NS: u64 = 400_000;

/// What a seed draws for `--power-loss` (its own stream of the seed: the rest of the
/// scenario is the same as without the flag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowerPlan {
    /// When every replica loses power.
    pub at_ns: u64,
    /// One replica's syncs take this many times as long: `(replica, factor)`.
    pub slow_syncs: Option<(u16, u64)>,
    /// One replica's disk holds this many bytes at most (it fills, and that replica
    /// stops persisting): `(replica, capacity)`.
    pub full: Option<(u16, u64)>,
    /// One replica's disk has a bit flipped at the power loss (a bad sector).
    pub flip: Option<u16>,
    /// A deliberately wrong variant of the durable point (tests only).
    pub mutation: DiskMutation,
}

impl PowerPlan {
    /// The plan seed `seed` draws for `replicas` and a safety phase of `safety_ns`. The
    /// full disk and the flipped bit hit the same replica: one replica's copy damaged, as
    /// a crash would take one.
    pub fn draw(seed: u64, replicas: u16, safety_ns: u64) -> PowerPlan {
        let mut rng = Rng::new(seed ^ 0x5DEE_CE66_D1CE_D00D);
        let n = u64::from(replicas);
        let at_ns = safety_ns / 4 + rng.below(safety_ns * 3 / 4);
        let slow_syncs = (rng.below(3) == 0).then(|| (rng.below(n) as u16, 2 + rng.below(30)));
        let faulty = rng.below(n) as u16;
        let full = (rng.below(4) == 0).then(|| (faulty, 1_024 + rng.below(16 << 10)));
        let flip = (rng.below(3) == 0).then_some(faulty);
        PowerPlan {
            at_ns,
            slow_syncs,
            full,
            flip,
            mutation: DiskMutation::None,
        }
    }
}

/// What a `--power-loss` run found, for the report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PowerReport {
    /// The durable index at the first power loss, and at the second.
    pub durable: [u64; 2],
    /// The log's next slot each recovery resumed from (the longest disk's).
    pub recovered: [u64; 2],
    /// Entries the restarted cluster decided.
    pub decided_after: u64,
    /// Records cut or files passed over by the recoveries (torn tails, flipped bits).
    pub cuts: usize,
    /// Disks that stopped persisting (full).
    pub stopped: usize,
    /// Recovered snapshots checked against the decided log.
    pub snapshots_checked: usize,
}

impl PowerReport {
    /// The restarted cluster made entries durable past the log it recovered: the second
    /// power loss's check had something to hold on.
    pub fn durable_after_restart(&self) -> bool {
        self.durable[1] > self.recovered[0]
    }
}

/// Every replica's disk and writer.
pub(crate) struct Disks {
    disks: Vec<SimDisk>,
    writers: Vec<Writer>,
    /// The operations of the batch on its way, and when the next one runs.
    pending: Vec<VecDeque<DiskOp>>,
    ready_at: Vec<u64>,
    out: Vec<bool>,
    /// The log's slot of the engine's slot 0.
    base: u64,
    mutation: DiskMutation,
}

impl Disks {
    /// Empty disks for `replicas`, with `plan`'s faults.
    pub(crate) fn new(replicas: usize, plan: &PowerPlan) -> Disks {
        let mut disks: Vec<SimDisk> = (0..replicas)
            .map(|r| {
                let mut model = DiskModel::nvme();
                if let Some((_, capacity)) = plan.full.filter(|&(f, _)| usize::from(f) == r) {
                    model.capacity_bytes = capacity;
                }
                SimDisk::new(model)
            })
            .collect();
        if let Some((r, factor)) = plan.slow_syncs {
            disks[usize::from(r)].set_slow_syncs(factor);
        }
        let writers = (0..replicas).map(|_| writer(&Recovered::default(), plan.mutation));
        Disks {
            disks,
            writers: writers.collect(),
            pending: vec![VecDeque::new(); replicas],
            ready_at: vec![0; replicas],
            out: vec![false; replicas],
            base: 0,
            mutation: plan.mutation,
        }
    }

    /// Replica `r` applied `bytes` in the engine's slot `slot` (already on its disk: passed
    /// over).
    pub(crate) fn append(&mut self, r: usize, slot: u64, bytes: &[u8]) {
        let w = &mut self.writers[r];
        if self.base + slot >= w.next_slot() {
            w.append(self.base + slot, Kind::Service, bytes);
        }
    }

    /// Replica `r`'s service took a snapshot at the engine's slot `point`.
    pub(crate) fn snapshot(&mut self, r: usize, point: u64, bytes: &[u8]) {
        let (w, point) = (&mut self.writers[r], self.base + point);
        if point >= w.snapshot_floor() && point <= w.next_slot() {
            w.snapshot(point, bytes.to_vec());
        }
    }

    /// Replica `r` copied a peer's snapshot at the engine's slot `point`.
    pub(crate) fn installed(&mut self, r: usize, point: u64, bytes: &[u8]) {
        let (w, point) = (&mut self.writers[r], self.base + point);
        if point > w.next_slot() {
            w.install(point, bytes.to_vec());
        } else if point >= w.snapshot_floor() {
            w.snapshot(point, bytes.to_vec());
        }
    }

    /// Runs every disk up to `now`: the operations of each batch one after the other at
    /// the disk's costs (an operation takes effect when it starts; the batch completes,
    /// and the durable point moves, when its last one ends). A replica that is down
    /// (`up[r]` false) runs nothing: its process is gone, and its batch stays unwritten.
    pub(crate) fn visit(&mut self, now: u64, up: &[bool]) {
        assert_eq!(up.len(), self.disks.len(), "one flag per replica");
        for (r, _) in up.iter().enumerate().filter(|&(_, &up)| up) {
            self.run_disk(r, now);
        }
    }

    /// Runs replica `r`'s disk up to `now` ([`Disks::visit`]).
    fn run_disk(&mut self, r: usize, now: u64) {
        loop {
            if !self.out[r] {
                let mut ops = Vec::new();
                self.writers[r].poll(&mut ops);
                if ops.is_empty() {
                    return;
                }
                self.pending[r] = ops.into();
                self.ready_at[r] = self.ready_at[r].max(now);
                self.out[r] = true;
            }
            while self.ready_at[r] <= now
                && let Some(op) = self.pending[r].pop_front()
            {
                match self.disks[r].execute(&op) {
                    Ok(ns) => self.ready_at[r] += ns,
                    Err(why) => {
                        self.pending[r].clear();
                        self.out[r] = false;
                        self.writers[r].failed(why);
                        return;
                    }
                }
            }
            if !self.pending[r].is_empty() || self.ready_at[r] > now {
                return;
            }
            // The batch's last operation ended: it is on disk.
            self.writers[r].done();
            self.out[r] = false;
        }
    }

    /// Replica `r`'s process crashed and a new one starts in its place: the disk loses
    /// what was not synced (the machine may have gone down with it), and the new
    /// process's writer goes on from what the disk holds.
    pub(crate) fn restart(&mut self, r: usize, rng: &mut Rng) {
        self.disks[r].power_loss(&mut |n| rng.below(n as u64) as usize);
        let found = recover(&self.disks[r].files());
        self.writers[r] = writer(&found, self.mutation);
        self.pending[r].clear();
        self.out[r] = false;
    }

    /// The durable index of `members`' disks (each one's durable point as its writer
    /// shows it).
    pub(crate) fn durable_index(&self, majority: usize) -> u64 {
        let points: Vec<u64> = self.writers.iter().map(Writer::durable).collect();
        durable_index_with(&points, majority, self.mutation)
    }

    /// Disks that stopped persisting.
    fn stopped(&self) -> usize {
        self.writers
            .iter()
            .filter(|w| w.stopped().is_some())
            .count()
    }

    /// Every replica loses power (and `flip`'s disk a bit); what each disk recovers.
    fn power_loss(&mut self, rng: &mut Rng, flip: Option<u16>) -> Vec<Recovered> {
        for d in &mut self.disks {
            d.power_loss(&mut |n| rng.below(n as u64) as usize);
        }
        if let Some(r) = flip {
            self.disks[usize::from(r)].flip_bit(&mut |n| rng.below(n as u64) as usize);
        }
        self.disks.iter().map(|d| recover(&d.files())).collect()
    }
}

/// A writer going on from `found`, running `mutation`.
fn writer(found: &Recovered, mutation: DiskMutation) -> Writer {
    let mut w = Writer::resume(found, SEGMENT_BYTES);
    w.mutate(mutation);
    w
}

/// Every entry any process of the run applied, by the engine's slot.
fn decided(sim: &Simulator<Scripted>, retired: &[Scripted]) -> BTreeMap<u64, Vec<u8>> {
    let live = sim.machine().threads.iter().map(|t| &t.process);
    let mut out = BTreeMap::new();
    for p in retired.iter().chain(live) {
        for (slot, value) in &p.applied {
            out.entry(*slot).or_insert_with(|| value.clone());
        }
    }
    out
}

/// The checks of one power loss: `found` (each disk's recovery) against `decided` (the
/// log's slot → the entry) and `durable` (the index at the loss).
fn check(
    found: &[Recovered],
    decided: &BTreeMap<u64, Vec<u8>>,
    durable: u64,
    flipped: bool,
    report: &mut PowerReport,
) -> Vec<String> {
    let mut violations = Vec::new();
    for (r, f) in found.iter().enumerate() {
        report.cuts += f.cuts.len();
        for e in &f.entries {
            if decided.get(&e.slot) != Some(&e.bytes) {
                violations.push(format!(
                    "durability: replica {r}'s disk recovered slot {} with an entry that was \
                     not decided there",
                    e.slot
                ));
                break;
            }
        }
        if let Some((point, bytes)) = &f.snapshot {
            // The state the decided entries below the point make, if every one is known.
            if (0..*point).all(|s| decided.contains_key(&s)) {
                let mut kv = KvMachine::default();
                (0..*point).for_each(|s| kv.apply(&decided[&s]));
                report.snapshots_checked += 1;
                if kv.snapshot() != *bytes {
                    violations.push(format!(
                        "durability: replica {r}'s snapshot at {point} is not the state the \
                         decided log makes there"
                    ));
                }
            }
        }
    }
    let mut reach: Vec<u64> = found.iter().map(|f| f.next_slot).collect();
    reach.sort_unstable_by(|a, b| b.cmp(a));
    let majority = found.len() / 2 + 1;
    // Every majority's longest log, at worst: the (n − majority + 1)-th longest; with a
    // damaged copy, what all of them hold together.
    let worst = if flipped {
        merge(found).map_or(0, |m| m.next_slot)
    } else {
        reach[found.len() - majority]
    };
    if worst < durable {
        violations.push(format!(
            "durability: the disks recover to slot {worst} ({}), below the durable index \
             {durable} the replicas showed at the power loss: durably acknowledged entries \
             lost",
            if flipped {
                "all of them"
            } else {
                "the worst majority"
            }
        ));
    }
    violations
}

/// The first power loss, at `at_ns` of the campaign run `sim`: the checks, then the
/// restart from disk and its own run and power loss. Violations, and the report.
pub(crate) fn restart(
    scenario: &Scenario,
    sim: &Simulator<Scripted>,
    retired: &[Scripted],
    mut disks: Disks,
) -> (Vec<String>, PowerReport) {
    let plan = scenario.power.as_ref().expect("--power-loss");
    let replicas = usize::from(scenario.log.replicas);
    let majority = replicas / 2 + 1;
    let mut rng = Rng::new(scenario.seed ^ 0x0BAD_D15C);
    let mut report = PowerReport::default();
    let durable = disks.durable_index(majority);
    let decided_a = decided(sim, retired);
    report.stopped = disks.stopped();
    let found = disks.power_loss(&mut rng, plan.flip);
    let mut violations = check(
        &found,
        &decided_a,
        durable,
        plan.flip.is_some(),
        &mut report,
    );
    // The restart: the longest log, every disk brought up to it, every service rebuilt.
    let source = match merge(&found) {
        Ok(source) => source,
        Err(e) => {
            violations.push(format!("durability: the disks disagree: {e}"));
            return (violations, report);
        }
    };
    let base = source.next_slot;
    report.durable[0] = durable;
    report.recovered[0] = base;
    let mut kv = match &source.snapshot {
        Some((_, bytes)) => KvMachine::restore(bytes).unwrap_or_default(),
        None => KvMachine::default(),
    };
    source.entries.iter().for_each(|e| kv.apply(&e.bytes));
    for (r, f) in found.iter().enumerate() {
        // A log past a hole nobody fills is one replica's alone (never durable): given up.
        let f = if f.next_slot > base {
            &f.discarded()
        } else {
            f
        };
        disks.writers[r] = writer(f, disks.mutation);
        disks.writers[r].catch_up(&source);
        disks.pending[r].clear();
        disks.out[r] = false;
        disks.ready_at[r] = 0; // the restarted cluster's clock starts again
    }
    disks.base = base;
    let client = ClientScript {
        count: 1 << 40,
        size: 16.min(scenario.log.max_value_bytes as usize),
    };
    let spec = ClusterSpec::new(scenario.log.clone(), scenario.seed, RESTARTED_NS, client);
    let mut after = Simulator::new(machine(&spec), sim_config(&spec));
    let mut services = Services::new(replicas, scenario.snapshot_every);
    services.kv = vec![kv; replicas];
    let mut now = 0;
    while now < RESTARTED_NS {
        now += 1_000;
        after.run(now, u64::MAX);
        services.visit(&mut after, Some(&mut disks));
        let up: Vec<bool> = (0..replicas)
            .map(|r| after.machine().is_up(NodeId(r as u16)))
            .collect();
        disks.visit(now, &up);
    }
    violations.append(&mut services.violations);
    // The whole decided log: the first run's below the base, the restarted one's after.
    let decided_b = decided(&after, &[]);
    report.decided_after = decided_b.len() as u64;
    if decided_b.is_empty() {
        violations.push("liveness: the cluster restarted from disk decided nothing".into());
    }
    let mut whole: BTreeMap<u64, Vec<u8>> =
        decided_a.into_iter().filter(|&(s, _)| s < base).collect();
    whole.extend(decided_b.into_iter().map(|(s, v)| (base + s, v)));
    let durable = disks.durable_index(majority);
    report.durable[1] = durable;
    report.stopped = report.stopped.max(disks.stopped());
    let found = disks.power_loss(&mut rng, None);
    report.recovered[1] = found.iter().map(|f| f.next_slot).max().unwrap_or(0);
    violations.extend(check(
        &found,
        &whole,
        durable,
        plan.flip.is_some(),
        &mut report,
    ));
    (violations, report)
}
