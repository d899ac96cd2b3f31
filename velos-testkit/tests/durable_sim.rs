//! Durable simulated runs (`velos sim --durable --power-loss-at T`): every replica
//! persists on a simulated disk (a replaced one resumes from it), the whole cluster loses
//! power at a drawn instant, and restarts from its disks. Over drawn runs (seed, instant, snapshots, a replacement
//! before the loss) every check holds — the recovered logs are prefixes of the decided
//! log, every majority of the disks reaches the durable index, the restarted services
//! continue the recovered state —, with the campaign's disk faults (slow syncs, a full
//! disk, a bit flipped at the power loss), and a durable point moved before the syncs is
//! caught.

use velos_core::log::LogConfig;
use velos_sim::rng::Rng;
use velos_store::quorum::Mutation;
use velos_testkit::durable::disks::DiskFaults;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec};
use velos_testkit::harness::durable;
use velos_testkit::harness::script::ClientScript;
use velos_testkit::harness::spec::DurableSpec;

/// The run case `case` draws, with `mutation`'s durable point; and the command that
/// replays it.
fn drawn(case: u64, mutation: Mutation) -> (ClusterSpec, String) {
    let mut rng = Rng::new(case ^ 0xD0_AB1E);
    let replicas = if rng.below(3) == 0 { 5 } else { 3 };
    let slots = [64, 256, 4096][rng.below(3) as usize];
    let mut log = LogConfig::new(replicas, slots, 16);
    log.pipeline = 1 + rng.below(8) as u32;
    let duration_ns = 1_200_000;
    let at = 300_000 + rng.below(600_000);
    let snapshots = (slots < 4096 || rng.below(2) == 0).then(|| 8 + rng.below(40));
    if snapshots.is_some() {
        log.max_snapshot_bytes = 64;
    }
    let replace = (rng.below(3) == 0).then(|| (1 + rng.below(u64::from(replicas) - 1), 250_000));
    // Disk faults, as the campaign draws them: slow syncs on one replica, and on another
    // a disk that fills or a bit flipped at the power loss.
    let n = u64::from(replicas);
    let slow_syncs = (rng.below(3) == 0).then(|| (rng.below(n) as u16, 2 + rng.below(30)));
    let faulty = rng.below(n) as u16;
    let full = (rng.below(4) == 0).then(|| (faulty, 1_024 + rng.below(16 << 10)));
    let flip = (rng.below(3) == 0).then_some(faulty);
    let client = ClientScript {
        count: 1 << 20,
        size: 16,
    };
    let spec = ClusterSpec {
        snapshot_every: snapshots,
        snapshot_bytes: 64,
        replace: replace
            .map(|(r, t)| vec![(r as u16, t, 20_000)])
            .unwrap_or_default(),
        durable: Some(DurableSpec {
            power_loss_at: Some(at),
            flip_at_loss: flip,
            faults: DiskFaults {
                slow_syncs,
                full,
                mutation,
            },
        }),
        ..ClusterSpec::new(log, case, duration_ns, client)
    };
    let mut replay = format!(
        "velos sim --durable --power-loss-at {at} --duration {duration_ns} --seed {case} \
         --replicas {replicas} --slots {slots} --pipeline {} --values {}",
        spec.log.pipeline, spec.client.count
    );
    if let Some(k) = snapshots {
        replay += &format!(" --snapshot-every {k} --snapshot-bytes 64");
    }
    if let Some((r, t)) = replace {
        replay += &format!(" --replace {r}@{t}+20000");
    }
    if let Some((r, f)) = slow_syncs {
        replay += &format!(" --slow-syncs {r}@{f}");
    }
    if let Some((r, b)) = full {
        replay += &format!(" --disk-full {r}@{b}");
    }
    if let Some(r) = flip {
        replay += &format!(" --flip-bit {r}");
    }
    (spec, replay)
}

fn figures(report: &ClusterReport) -> (u64, u64, u64, usize, usize) {
    let d = report
        .durable
        .as_ref()
        .expect("a durable run reports its disks");
    let p = d.power_loss.as_ref().expect("the power went");
    (
        d.durable,
        p.recovered,
        p.decided_after,
        p.cuts,
        p.snapshots_checked,
    )
}

#[test]
fn every_durable_entry_survives_a_power_loss_at_any_instant() {
    let (mut cuts, mut snapshots, mut replaced, mut lost_undurable) = (0, 0, 0, 0);
    let (mut stopped, mut flipped, mut resumed) = (0, 0, 0);
    // 24 drawn runs; `DURABLE_SIM_CASES=N` draws more (a longer local campaign).
    let cases: u64 = std::env::var("DURABLE_SIM_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    for case in 0..cases {
        let (spec, replay) = drawn(case, Mutation::None);
        let report = durable::run(&spec);
        assert!(
            report.ok(),
            "case {case}: {:?}\nreplay: {replay}",
            report.failures.iter().take(5).collect::<Vec<_>>()
        );
        let (durable, recovered, after, c, s) = figures(&report);
        // The premises: entries were durable at the loss, the restarted cluster decided.
        assert!(
            durable > 0,
            "case {case}: nothing durable\nreplay: {replay}"
        );
        assert!(recovered >= durable, "case {case}: checked by the run");
        assert!(after > 0, "case {case}: the restart decided nothing");
        let p = report
            .durable
            .as_ref()
            .unwrap()
            .power_loss
            .as_ref()
            .unwrap();
        lost_undurable += p.decided - p.recovered;
        stopped += p.stopped;
        flipped += usize::from(p.flipped.is_some());
        resumed += report.durable.as_ref().unwrap().resumed;
        (cuts, snapshots) = (cuts + c, snapshots + s);
        replaced += usize::from(!spec.replace.is_empty());
    }
    // What the drawn runs went through, so that the checks held on something.
    assert!(snapshots > 0, "no recovered snapshot was checked");
    assert!(replaced > 0, "no run replaced a replica before the loss");
    assert!(stopped > 0, "no disk filled");
    assert!(flipped > 0, "no bit was flipped at a power loss");
    assert!(resumed > 0, "no replaced process resumed from its disk");
    assert!(cuts > 0, "no power loss tore a write (no record was cut)");
    assert!(
        lost_undurable > 0,
        "no power loss lost a decided entry that was not durable yet"
    );
}

#[test]
fn a_durable_point_moved_before_the_syncs_is_caught() {
    // The mutant shows a batch durable when it is handed to the disk: a power loss
    // during its writes loses entries the replicas showed as durable.
    let caught = (0..24).find(|&case| {
        let (spec, _) = drawn(case, Mutation::DurableAtHandout);
        let report = durable::run(&spec);
        report
            .failures
            .iter()
            .any(|f| f.starts_with("durability:") && f.contains("below the durable index"))
    });
    assert!(
        caught.is_some(),
        "no drawn run caught the durable point moved at hand-out"
    );
}
