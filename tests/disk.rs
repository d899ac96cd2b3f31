//! The durable log's writer on real files (`velos::disk`, in a temporary directory): what
//! it writes recovers; a torn tail is cut and reported, cut on disk at the resume, and the
//! log written after it recovers whole; a stale segment is deleted.

use std::fs::OpenOptions;
use velos::disk;
use velos_store::recover::recover;
use velos_store::segment::Kind;
use velos_store::writer::Writer;

fn entry(slot: u64) -> Vec<u8> {
    format!("entry {slot}").into_bytes()
}

/// Appends `from..to` and runs batches until the writer has nothing left to write.
fn write(dir: &std::path::Path, w: &mut Writer, from: u64, to: u64) {
    for slot in from..to {
        w.append(slot, Kind::Service, &entry(slot));
    }
    let mut ops = Vec::new();
    loop {
        ops.clear();
        w.poll(&mut ops);
        if ops.is_empty() {
            break;
        }
        disk::execute(dir, &ops).expect("the batch runs");
        w.done();
    }
}

#[test]
fn what_the_writer_wrote_recovers_and_a_torn_tail_is_cut_then_written_past() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut w = Writer::new(0, 200);
    write(dir.path(), &mut w, 0, 30);
    w.snapshot(10, b"state at 10".to_vec());
    write(dir.path(), &mut w, 30, 40);
    assert_eq!(w.durable(), 40);
    let found = recover(&disk::read(dir.path()).expect("the directory reads"));
    assert_eq!(found.snapshot, Some((10, b"state at 10".to_vec())));
    assert_eq!(found.next_slot, 40);
    assert!(found.cuts.is_empty(), "{:?}", found.cuts);
    for e in &found.entries {
        assert_eq!(e.bytes(), entry(e.slot));
    }
    assert_eq!(
        found.entries.first().map(|e| e.slot),
        Some(10),
        "from the snapshot on"
    );

    // A torn tail: the newest segment loses its last 5 bytes.
    let newest = disk::read(dir.path())
        .unwrap()
        .into_iter()
        .rfind(|(n, _)| n.starts_with("seg-"))
        .unwrap();
    let file = OpenOptions::new()
        .write(true)
        .open(dir.path().join(&newest.0))
        .unwrap();
    file.set_len(newest.1.len() as u64 - 5).unwrap();
    let found = recover(&disk::read(dir.path()).unwrap());
    assert_eq!(found.next_slot, 39, "the torn record is cut");
    assert_eq!(found.truncate.len(), 1, "and reported: {:?}", found.cuts);

    // Resume: the torn segment is cut on disk, and the log goes on from 39.
    let mut w = Writer::resume(&found, 200);
    write(dir.path(), &mut w, 39, 60);
    let found = recover(&disk::read(dir.path()).unwrap());
    assert_eq!(found.next_slot, 60, "{:?}", found.cuts);
    assert!(found.cuts.is_empty(), "{:?}", found.cuts);
    assert!(found.entries.iter().all(|e| e.bytes() == entry(e.slot)));
}
