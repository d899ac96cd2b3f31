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
//! checked the same way against the whole decided log, both runs' entries. Odd seeds
//! restart as a deployment of `Node`s does instead ([`restart_own`]): each replica from
//! its own disk, the log's numbering going on at the longest own log, the replicas whose
//! disks hold less copying first (rule (recovered behind)).

use super::kv::KvMachine;
use super::scenario::Scenario;
use super::services::Services;
use crate::durable::check;
use crate::durable::disks::Disks;
use crate::harness::cluster::{ClusterSpec, machine, sim_config};
use crate::harness::script::{ClientScript, Scripted};
use std::collections::BTreeMap;
use velos_core::log::membership::Membership;
use velos_rdma::NodeId;
use velos_sim::rng::Rng;
use velos_sim::simulate::Simulator;
use velos_store::merge::merge;
use velos_store::recover::Recovered;

/// Virtual time the cluster runs after its restart from disk (ns).
const RESTARTED_NS: u64 = 400_000;

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
    /// Replaced processes that resumed at their disk's snapshot (the others started at
    /// the log's start).
    pub resumed: usize,
    /// Of those, the ones whose state was checked against the decided log.
    pub resumes_checked: usize,
    /// Restarts from each replica's own disk (`Replica::restart_recovered`, odd seeds).
    pub own_restarts: usize,
    /// Services of those restarts checked at the end against the decided log.
    pub own_states_checked: usize,
}

impl PowerReport {
    /// The restarted cluster made entries durable past the log it recovered: the second
    /// power loss's check had something to hold on.
    pub fn durable_after_restart(&self) -> bool {
        self.durable[1] > self.recovered[0]
    }
}

/// Every entry any process of the run applied, by the engine's slot.
pub(super) fn decided(sim: &Simulator<Scripted>, retired: &[Scripted]) -> BTreeMap<u64, Vec<u8>> {
    let live = sim.machine().threads.iter().map(|t| &t.process);
    let mut out = BTreeMap::new();
    for p in retired.iter().chain(live) {
        for (slot, value) in &p.applied {
            out.entry(*slot).or_insert_with(|| value.clone());
        }
    }
    out
}

/// The key-value state of a snapshot as the disks keep it (as the log's banks do: the
/// membership from its point on, then the service's bytes); `None` if it is not one.
fn state_of(bytes: &[u8], replicas: u16) -> Option<&[u8]> {
    Membership::unwrap_snapshot(bytes, replicas).map(|(_, state)| state)
}

/// The key-value state the decided entries below `point` make (`None`: some of them are
/// unknown — every process that applied them copied past them).
fn state_at(decided: &BTreeMap<u64, Vec<u8>>, point: u64) -> Option<Vec<u8>> {
    let mut kv = KvMachine::default();
    for s in 0..point {
        kv.apply(decided.get(&s)?);
    }
    Some(kv.snapshot())
}

/// A replaced process resumed at `point` from `state`, its disk's snapshot: it must be
/// the state the decided entries below `point` make (`None`: it cannot be checked).
pub(super) fn resumed_state_holds(
    decided: &BTreeMap<u64, Vec<u8>>,
    point: u64,
    state: &[u8],
) -> Option<bool> {
    state_at(decided, point).map(|kv| kv == state)
}

/// The checks of one power loss ([`check::recovered`]), the snapshots rebuilt as the
/// key-value state the decided entries below their point make.
fn check(
    found: &[Recovered],
    decided: &BTreeMap<u64, Vec<u8>>,
    durable: (u64, Option<u64>),
    report: &mut PowerReport,
) -> Vec<String> {
    let mut looked = check::Looked::default();
    let at = |point| state_at(decided, point);
    let violations = check::recovered(found, decided, durable, at, &mut looked);
    report.cuts += looked.cuts;
    report.snapshots_checked += looked.snapshots_checked;
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
    let merged = merge(&found);
    let together = plan
        .flip
        .map(|_| merged.as_ref().map_or(0, |m| m.next_slot));
    let mut violations = check(&found, &decided_a, (durable, together), &mut report);
    report.durable[0] = durable;
    // Odd seeds restart as a deployment of `Node`s does: each replica from its own disk.
    if scenario.seed % 2 == 1
        && let Some(end) = own_end(&found)
    {
        let run = (decided_a, disks);
        let violations = restart_own(
            scenario,
            (&found, end),
            run,
            (&mut rng, violations),
            &mut report,
        );
        return (violations, report);
    }
    // The restart: the longest log, every disk brought up to it, every service rebuilt.
    let source = match merged {
        Ok(source) => source,
        Err(e) => {
            violations.push(format!("durability: the disks disagree: {e}"));
            return (violations, report);
        }
    };
    let base = source.next_slot;
    report.recovered[0] = base;
    let kv = rebuilt(&source, scenario.log.replicas);
    disks.resume(&found, &source);
    let mut after = restarted(scenario);
    let mut services = Services::new(replicas, scenario.snapshot_every);
    services.kv = vec![kv; replicas];
    let decided_b = run_restarted(
        &mut after,
        (&mut services, &mut disks),
        &mut violations,
        &mut report,
    );
    // The whole decided log: the first run's below the base, the restarted one's after.
    let mut whole: BTreeMap<u64, Vec<u8>> =
        decided_a.into_iter().filter(|&(s, _)| s < base).collect();
    whole.extend(decided_b.into_iter().map(|(s, v)| (base + s, v)));
    second_loss(&mut disks, &whole, (&mut rng, &mut violations), &mut report);
    (violations, report)
}

/// The second power loss, at the restarted run's end: checked against `whole`, both
/// runs' decided log.
fn second_loss(
    disks: &mut Disks,
    whole: &BTreeMap<u64, Vec<u8>>,
    (rng, violations): (&mut Rng, &mut Vec<String>),
    report: &mut PowerReport,
) {
    let durable = disks.durable_index(disks.points().len() / 2 + 1);
    report.durable[1] = durable;
    report.stopped = report.stopped.max(disks.stopped());
    let found = disks.power_loss(rng, None);
    report.recovered[1] = found.iter().map(|f| f.next_slot).max().unwrap_or(0);
    // No bit flips at this loss: every majority of the disks must reach the index.
    violations.extend(check(&found, whole, (durable, None), report));
}

/// The key-value service `log` (a disk's recovery, or several merged) rebuilds.
fn rebuilt(log: &Recovered, replicas: u16) -> KvMachine {
    let mut kv = match &log.snapshot {
        Some((_, bytes)) => state_of(bytes, replicas)
            .and_then(KvMachine::restore)
            .unwrap_or_default(),
        None => KvMachine::default(),
    };
    log.entries.iter().for_each(|e| kv.apply(e.bytes()));
    kv
}

/// The restarted cluster: fresh engines on blank memory, a scripted client.
fn restarted(scenario: &Scenario) -> Simulator<Scripted> {
    let client = ClientScript {
        count: 1 << 40,
        size: 16.min(scenario.log.max_value_bytes as usize),
    };
    let spec = ClusterSpec::new(scenario.log.clone(), scenario.seed, RESTARTED_NS, client);
    Simulator::new(machine(&spec), sim_config(&spec))
}

/// Runs the restarted cluster for [`RESTARTED_NS`], its services and disks following;
/// what it decided, by the engine's slot (something, or a liveness violation).
fn run_restarted(
    after: &mut Simulator<Scripted>,
    (services, disks): (&mut Services, &mut Disks),
    violations: &mut Vec<String>,
    report: &mut PowerReport,
) -> BTreeMap<u64, Vec<u8>> {
    let replicas = services.kv.len();
    let mut now = 0;
    while now < RESTARTED_NS {
        now += 1_000;
        after.run(now, u64::MAX);
        services.visit(after, Some(disks));
        let up: Vec<bool> = (0..replicas)
            .map(|r| after.machine().is_up(NodeId(r as u16)))
            .collect();
        disks.visit(now, &up);
    }
    violations.append(&mut services.violations);
    let decided = decided(after, &[]);
    report.decided_after = decided.len() as u64;
    if decided.is_empty() {
        violations.push("liveness: the cluster restarted from disk decided nothing".into());
    }
    decided
}

/// Where a restart from each replica's own disk goes on: the longest own log that holds
/// its start; `None` if none holds anything (the merged restart then).
fn own_end(found: &[Recovered]) -> Option<u64> {
    let ends = found.iter().filter(|f| f.has_start()).map(|f| f.next_slot);
    ends.max().filter(|&end| end > 0)
}

/// The restart of a deployment of `Node`s (`Start::Recover`): the log's numbering goes
/// on at `end`, the longest own log; a replica whose disk holds it whole resumes there
/// with its service rebuilt from its own disk, the others start behind and copy
/// (`Replica::restart_recovered`, rule (recovered behind)); every disk goes on from its
/// own recovery. Checked besides the second power loss: `end` reaches the durable index,
/// and at the end every service holds the state the decided log makes below its next
/// slot (a replica that applied on a state it lacked fails it).
fn restart_own(
    scenario: &Scenario,
    (found, end): (&[Recovered], u64),
    (decided_a, mut disks): (BTreeMap<u64, Vec<u8>>, Disks),
    (rng, mut violations): (&mut Rng, Vec<String>),
    report: &mut PowerReport,
) -> Vec<String> {
    let replicas = usize::from(scenario.log.replicas);
    report.recovered[0] = end;
    report.own_restarts += 1;
    if end < report.durable[0] {
        violations.push(format!(
            "durability: the processes' own disks go on at {end}, below the durable index {}",
            report.durable[0]
        ));
    }
    let mut after = restarted(scenario);
    let mut services = Services::new(replicas, scenario.snapshot_every);
    for (r, f) in found.iter().enumerate() {
        let whole = f.has_start() && f.next_slot == end;
        let state = whole.then(|| rebuilt(f, scenario.log.replicas).snapshot());
        if let Some(state) = &state {
            services.resume(r, end, state);
        }
        let replica = &mut after.machine_mut().threads[r].process;
        if let Err(e) = replica.restart_recovered(end, state.as_deref()) {
            violations.push(format!("recovery: replica {r} refused its restart: {e}"));
        }
    }
    disks.resume_own(found);
    let decided_b = run_restarted(
        &mut after,
        (&mut services, &mut disks),
        &mut violations,
        report,
    );
    // The numbering goes on: nothing below `end` is decided in the new memory.
    if let Some(&slot) = decided_b.keys().next().filter(|&&s| s < end) {
        violations.push(format!(
            "recovery: slot {slot}, below the log's end {end}, decided again"
        ));
    }
    let mut whole: BTreeMap<u64, Vec<u8>> =
        decided_a.into_iter().filter(|&(s, _)| s < end).collect();
    whole.extend(decided_b);
    for (r, kv) in services.kv.iter().enumerate() {
        let next = services.next[r];
        if next <= end {
            continue; // applied nothing new (a short replica still copying)
        }
        match state_at(&whole, next) {
            Some(state) if state == kv.snapshot() => report.own_states_checked += 1,
            Some(_) => violations.push(format!(
                "recovered behind: replica {r}'s service at slot {next} is not the state the \
                 decided log makes"
            )),
            None => {}
        }
    }
    second_loss(&mut disks, &whole, (rng, &mut violations), report);
    violations
}
