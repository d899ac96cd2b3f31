//! A durable simulated run ([`ClusterSpec::durable`], `velos sim --durable`): every
//! replica's service hands what it applies, the snapshots it takes and those it copies to
//! a disk of its own ([`Services::from`]), and the durable index (the majority-th highest
//! durable point) is followed over virtual time.
//!
//! With a power loss, every replica loses power at once at its time: what each disk
//! recovers is checked against the decided log ([`crate::durable::check`]: each entry the
//! one decided in its slot, each snapshot the digest of the decided entries below its
//! point, every majority of the disks reaching the durable index shown at the loss); then
//! the cluster restarts from its disks — the longest log they hold together, every disk
//! brought up to it, every service rebuilt from it, a fresh engine on blank memory whose
//! slot 0 stands for the recovered log's next slot — and runs the rest of the duration
//! with the same checks (a copied snapshot holds the recovered state and what followed).

use super::cluster::run_with;
use super::report::{ClusterReport, DurableReport, PowerLossReport};
use super::script::Scripted;
use super::service::{EMPTY, Origin, Persisting, Services, digest_from, hex, padded, step};
use super::spec::{ClusterSpec, DurableSpec};
use crate::durable::check;
use std::collections::BTreeMap;
use velos_core::log::membership::Membership;
use velos_sim::rng::Rng;
use velos_sim::simulate::Simulator;
use velos_store::merge::merge;
use velos_store::recover::Recovered;

/// What the restarted run's seed differs from the run's by.
const RESTART_SEED: u64 = 0x5EED_0F0D;

/// Runs `spec` (durable: [`ClusterSpec::durable`] is set) and checks it; with a power
/// loss, the restart from disk and its run too.
pub fn run(spec: &ClusterSpec) -> ClusterReport {
    let durable = spec.durable.expect("a durable spec");
    let (mut report, sim, mut services) = run_with(spec, Services::new(spec));
    let decided = decided(&sim, &services);
    let persisting = services.take_disks().expect("durable services persist");
    let mut d = at_end(&report, &persisting, 0);
    d.resumed = services.resumed();
    // The premise of every durability figure: something became durable.
    let durable_moved = d.durable > 0;
    report.checks.insert("durable".into(), durable_moved);
    if !durable_moved {
        report.failures.push(format!(
            "durability: nothing became durable by {} ns (no entry decided on a majority's \
             disks): the checks held on nothing",
            sim.now()
        ));
    }
    if let Some(at) = durable.power_loss_at.filter(|&t| t < spec.duration_ns) {
        report.duration_ns = at; // the first run's time: the restarted run has its own
        d.power_loss = Some(restart(
            spec,
            at,
            (&decided, d.durable),
            persisting,
            &mut report,
        ));
    }
    report.durable = Some(d);
    report
}

/// What `persisting` showed over the run that `report` reports: the durable points and
/// index at the end, and how long each acknowledged slot took to become durable. `base`:
/// the log's slot of the engine's slot 0.
fn at_end(report: &ClusterReport, persisting: &Persisting, base: u64) -> DurableReport {
    let majority = report_replicas(report) / 2 + 1;
    let durable = persisting.disks.durable_index(majority);
    let mut waits = Vec::new();
    let mut not_durable = 0;
    for r in &report.replicas {
        for &(slot, at) in &r.acknowledged {
            // The first visit at or after the acknowledgement where the index passed it.
            let passed = persisting
                .history
                .iter()
                .find(|&&(t, index)| index > base + slot && t >= at);
            match passed {
                Some(&(t, _)) => waits.push(t - at),
                None => not_durable += 1,
            }
        }
    }
    waits.sort_unstable();
    let quantile = |q: f64| {
        (!waits.is_empty()).then(|| waits[((waits.len() - 1) as f64 * q).round() as usize])
    };
    DurableReport {
        points: persisting.disks.points(),
        durable,
        acknowledged_durable: waits.len() as u64,
        acknowledged_not_durable: not_durable,
        ack_to_durable_p50_ns: quantile(0.5),
        ack_to_durable_p99_ns: quantile(0.99),
        resumed: 0,
        power_loss: None,
    }
}

fn report_replicas(report: &ClusterReport) -> usize {
    let ids: std::collections::BTreeSet<u16> = report.replicas.iter().map(|r| r.id).collect();
    ids.len()
}

/// Every entry any process of the run applied, by the engine's slot.
fn decided(sim: &Simulator<Scripted>, services: &Services) -> BTreeMap<u64, Vec<u8>> {
    let retired = services.retired().iter().map(|r| &r.process);
    let live = sim.machine().threads.iter().map(|t| &t.process);
    let mut out = BTreeMap::new();
    for p in retired.chain(live) {
        for (slot, value) in &p.applied {
            out.entry(*slot).or_insert_with(|| value.clone());
        }
    }
    out
}

/// The whole cluster loses power at `at` (the first run ended there): the checks of what
/// the disks recovered against `decided` and the durable index, then the restart from
/// disk and its run to the end of the duration. Its failures and checks go to `report`.
fn restart(
    spec: &ClusterSpec,
    at: u64,
    (decided, durable): (&BTreeMap<u64, Vec<u8>>, u64),
    mut persisting: Persisting,
    report: &mut ClusterReport,
) -> PowerLossReport {
    assert!(at < spec.duration_ns, "the power loss falls inside the run");
    let mut rng = Rng::new(spec.seed ^ 0x0BAD_D15C);
    let flip = spec.durable.expect("durable").flip_at_loss;
    let stopped = persisting.disks.stopped();
    let found = persisting.disks.power_loss(&mut rng, flip);
    let bytes = spec.snapshot_bytes.max(8);
    let state_at = |point: u64| {
        let entries: Option<Vec<(u64, String)>> = (0..point)
            .map(|s| decided.get(&s).map(|v| (s, hex(v))))
            .collect();
        let digest = entries?
            .iter()
            .fold(EMPTY, |d, (s, h)| step(d, *s, h.as_bytes()));
        Some(padded(digest, bytes))
    };
    // A damaged copy is a lost one: after a flipped bit, the disks are held together to
    // the durable index (what they reach merged), not each majority of them.
    let merged = merge(&found);
    let together = flip.map(|_| merged.as_ref().map_or(0, |m| m.next_slot));
    let mut looked = check::Looked::default();
    let mut failures =
        check::recovered(&found, decided, (durable, together), state_at, &mut looked);
    let mut out = PowerLossReport {
        at_ns: at,
        decided: decided.keys().next_back().map_or(0, |s| s + 1),
        recovered_by_disk: found.iter().map(|f| f.next_slot).collect(),
        recovered: 0,
        cuts: looked.cuts,
        stopped,
        flipped: flip,
        snapshots_checked: looked.snapshots_checked,
        first_decision_ns: None,
        decided_after: 0,
        restarted: None,
    };
    // The premise of the power-loss checks: entries were durable when the power went.
    let held = durable > 0;
    if !held {
        failures.push(format!(
            "durability: nothing was durable at the power loss at {at} ns: the checks of \
             the recovery held on nothing (a later --power-loss-at)"
        ));
    }
    let source = match merged {
        Ok(source) => source,
        Err(e) => {
            failures.push(format!("durability: the disks disagree: {e}"));
            finish(report, failures, vec![("recovered".into(), false)]);
            return out;
        }
    };
    out.recovered = source.next_slot;
    let recovered = held && failures.is_empty();
    persisting.disks.resume(&found, &source);
    let origin = Origin {
        base: source.next_slot,
        digest: recovered_digest(&source, spec.log.replicas),
    };
    let rest = ClusterSpec {
        latency: spec.latency.clone(),
        snapshot_every: spec.snapshot_every,
        snapshot_bytes: spec.snapshot_bytes,
        device_memory: spec.device_memory,
        durable: Some(DurableSpec {
            power_loss_at: None,
            flip_at_loss: None,
            faults: spec.durable.expect("durable").faults,
        }),
        ..ClusterSpec::new(
            spec.log.clone(),
            spec.seed ^ RESTART_SEED, // the restarted run draws its own stream
            spec.duration_ns - at,
            spec.client.clone(),
        )
    };
    let services = Services::from(&rest, origin, Some(persisting.disks));
    let (mut after, _, mut services) = run_with(&rest, services);
    let persisting = services.take_disks().expect("durable services persist");
    out.first_decision_ns = after
        .replicas
        .iter()
        .flat_map(|r| r.acknowledged.iter().map(|&(_, t)| t))
        .min();
    let slots: std::collections::BTreeSet<u64> = after
        .replicas
        .iter()
        .flat_map(|r| r.applied.iter().map(|&(s, _)| s))
        .collect();
    out.decided_after = slots.len() as u64;
    if slots.is_empty() {
        failures.push("liveness: the cluster restarted from disk decided nothing".into());
    }
    after.durable = Some(at_end(&after, &persisting, origin.base));
    let checks = after
        .checks
        .iter()
        .map(|(name, &ok)| (format!("restarted_{name}"), ok));
    let mut checks: Vec<(String, bool)> = checks.collect();
    if spec.snapshot_every.is_some() {
        let ok = services_continue(&after, origin, &mut failures);
        checks.push(("restarted_services".into(), ok));
    }
    checks.push(("recovered".into(), recovered));
    failures.extend(
        after
            .failures
            .iter()
            .map(|f| format!("after the restart from disk: {f}")),
    );
    finish(report, failures, checks);
    out.restarted = Some(Box::new(after));
    assert!(
        out.recovered <= out.decided,
        "lemma (recovered prefix): checked above"
    );
    out
}

/// Every live service of the restarted run `after` holds the recovered state (`origin`)
/// followed by the entries decided since, up to its next entry: the services were
/// rebuilt from the recovered log, not started empty. Its premise: some service applied
/// an entry since the restart.
fn services_continue(after: &ClusterReport, origin: Origin, failures: &mut Vec<String>) -> bool {
    let mut decided: BTreeMap<u64, &str> = BTreeMap::new();
    for r in &after.replicas {
        for (slot, value) in &r.applied {
            decided.entry(*slot).or_insert(value);
        }
    }
    let mut ok = true;
    let mut compared = 0;
    for r in after.replicas.iter().filter(|r| !r.crashed) {
        let (next, digest) = r.digest;
        let entries: Option<Vec<(u64, &str)>> = (0..next)
            .map(|s| decided.get(&s).map(|&v| (s, v)))
            .collect();
        let Some(entries) = entries else { continue };
        compared += usize::from(next > 0);
        if digest_from(origin, &entries) != digest {
            ok = false;
            failures.push(format!(
                "after the restart from disk: replica {}'s service at slot {} is not the \
                 recovered state followed by the entries decided since",
                r.id,
                origin.base + next
            ));
        }
    }
    if compared == 0 {
        failures.push(
            "after the restart from disk: no service applied an entry (the rebuilt \
             services were not checked)"
                .into(),
        );
    }
    ok && compared > 0
}

/// Adds `failures` and `checks` to `report`.
fn finish(report: &mut ClusterReport, failures: Vec<String>, checks: Vec<(String, bool)>) {
    report.checks.extend(checks);
    report.failures.extend(failures);
}

/// The services' digest after the recovered log `source`: its snapshot's, continued by its
/// entries.
fn recovered_digest(source: &Recovered, replicas: u16) -> u64 {
    let start = match &source.snapshot {
        // A snapshot that is no wrapped one, or whose service is shorter than a digest,
        // restores to no log's state (the checks of the restarted run then fail on it).
        Some((_, bytes)) => Membership::unwrap_snapshot(bytes, replicas)
            .map_or(&[][..], |(_, service)| service)
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes),
        None => EMPTY,
    };
    source
        .entries
        .iter()
        .fold(start, |d, e| step(d, e.slot, hex(e.bytes()).as_bytes()))
}
