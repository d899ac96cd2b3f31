//! velos-store's writer and recovery against crashes at every point of a batch, on the
//! simulated disk ([`SimDisk`]), which keeps only what was synced: a file's bytes past its
//! last sync survive as any prefix (a torn write), the directory's changes past its last
//! sync as any prefix of them (a file created, renamed or deleted, or not). Drawn runs append entries, take snapshots,
//! run batches to completion, crash in the middle of one, recover, go on from what was
//! recovered with other entries in the lost slots (a whole cluster that decided them
//! anew), and crash again. Checked at every recovery: every entry the writer had reported
//! durable is there; every entry recovered is the one last appended in its slot; the
//! snapshot is the state of the entries below its point. Premises: durable entries existed at a
//! crash, and a crash cut a batch short.

use proptest::prelude::*;
use velos_sim::disk::{DiskModel, SimDisk};
use velos_store::recover::recover;
use velos_store::segment::Kind;
use velos_store::writer::Writer;

/// The entry of `slot` in generation `generation` (a run after `generation` crashes).
fn entry(slot: u64, generation: u8) -> Vec<u8> {
    let mut e = slot.to_le_bytes().to_vec();
    e.push(generation);
    e.resize(8 + (slot % 13) as usize, generation);
    e
}

/// The service's state at `point`: a function of the entries below it (FNV-1a over
/// them), so that two snapshots at one point of one log are the same bytes.
fn state(log: &[Vec<u8>], point: u64) -> Vec<u8> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in log[..point as usize].iter().flatten() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    [point.to_le_bytes(), h.to_le_bytes()].concat()
}

/// What one drawn run saw.
#[derive(Debug, Default)]
struct Seen {
    crashes: u32,
    cut_batches: u32,
    durable_at_crash: u64,
}

/// One run: `plan` draws the steps.
fn run(plan: &[u8], segment_bytes: usize) -> Seen {
    let mut draws = plan.iter().copied().cycle();
    let mut pick = move |n: usize| {
        if n <= 1 {
            0
        } else {
            usize::from(draws.next().unwrap_or(0)) % n
        }
    };
    let mut disk = SimDisk::new(DiskModel::nvme());
    let mut writer = Writer::new(0, segment_bytes);
    // The entry last appended in each slot.
    let mut log: Vec<Vec<u8>> = Vec::new();
    let mut generation = 0u8;
    let mut seen = Seen::default();
    let mut ops = Vec::new();
    for _ in 0..plan.len() {
        match pick(10) {
            0..=5 => {
                for _ in 0..1 + pick(4) {
                    let slot = writer.next_slot();
                    let bytes = entry(slot, generation);
                    writer.append(slot, Kind::Service, &bytes);
                    log.truncate(slot as usize);
                    log.push(bytes);
                }
            }
            6 => {
                let (floor, next) = (writer.snapshot_floor(), writer.next_slot());
                let point = next - pick((next - floor) as usize + 1) as u64;
                writer.snapshot(point, state(&log, point));
            }
            7 | 8 => {
                ops.clear();
                writer.poll(&mut ops);
                for op in &ops {
                    disk.execute(op).expect("the disk has room");
                }
                if !ops.is_empty() {
                    writer.done();
                }
            }
            _ => {
                // A crash, part-way through a batch.
                ops.clear();
                writer.poll(&mut ops);
                let executed = pick(ops.len() + 1);
                for op in &ops[..executed] {
                    disk.execute(op).expect("the disk has room");
                }
                seen.cut_batches += u32::from(executed < ops.len());
                let durable = writer.durable();
                disk.power_loss(&mut pick);
                seen.crashes += 1;
                seen.durable_at_crash += durable;
                let found = recover(&disk.files());
                // Every durable entry is there.
                assert!(
                    found.next_slot >= durable,
                    "durable up to {durable}, recovered up to {}: {:?}",
                    found.next_slot,
                    found.cuts
                );
                // Every entry recovered is the one last appended in its slot.
                for e in &found.entries {
                    assert_eq!(
                        e.bytes(),
                        log[e.slot as usize],
                        "slot {}: {:?}",
                        e.slot,
                        found.cuts
                    );
                }
                // The snapshot is the state of the log below its point.
                if let Some((point, bytes)) = &found.snapshot {
                    assert!(*point <= found.next_slot);
                    assert_eq!(*bytes, state(&log, *point), "snapshot at {point}");
                }
                // Go on from what was recovered: the slots after it are decided anew.
                generation += 1;
                log.truncate(found.next_slot as usize);
                writer = Writer::resume(&found, segment_bytes);
            }
        }
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn what_was_durable_survives_every_crash_and_nothing_else_is_invented(
        plan in prop::collection::vec(any::<u8>(), 20..120),
        segment_bytes in prop::sample::select(vec![40usize, 80, 400]),
    ) {
        run(&plan, segment_bytes);
    }
}

/// The premises over many drawn runs: crashes cut batches short, with entries durable.
#[test]
fn the_crashes_cut_batches_with_durable_entries_behind_them() {
    let (mut cut, mut durable) = (0, 0);
    for seed in 0..200u32 {
        let plan: Vec<u8> = (0..80u32)
            .map(|i| (seed.wrapping_mul(2_654_435_761).wrapping_add(i * 40_503) >> 7) as u8)
            .collect();
        let seen = run(&plan, 80);
        cut += seen.cut_batches;
        durable += seen.durable_at_crash;
    }
    assert!(cut > 0, "premise: a crash cut a batch short");
    assert!(durable > 0, "premise: entries were durable at a crash");
}
