//! Reading a replica's directory back after a crash or a power loss: the newest valid
//! snapshot, then the log after it from the segments, as one chain of consecutive slots.
//!
//! A snapshot file that is damaged (or still under its temporary name) is passed over for
//! an older one. The segments are taken in the order of their first slots: each must
//! continue the log exactly where it stands (its first slot at or below the next slot,
//! its records from there on taken); the chain ends at the first gap and at the first
//! segment the scan cuts (torn or corrupt), and nothing after that point is used. Every
//! file passed over is named in [`Recovered::stale`] (the writer deletes them before it
//! writes, [`crate::writer::Writer::resume`]) and every cut is reported with its reason.

use crate::segment::{self, Kind, file_name as segment_name};
use crate::snapshot::{self, file_name as snapshot_name};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// An entry read back: the slot that decided it, its kind, its bytes. The bytes stay in
/// the segment's buffer, shared by its entries: a recovery allocates no memory per entry
/// (a 4 KiB copy each cost a fresh page and its fault, most of a 1 GiB recovery's time).
#[derive(Clone)]
pub struct Entry {
    /// The slot.
    pub slot: u64,
    /// What it is to the log.
    pub kind: Kind,
    file: Arc<Vec<u8>>,
    range: Range<usize>,
}

impl Entry {
    /// An entry of `bytes` of its own.
    pub fn new(slot: u64, kind: Kind, bytes: Vec<u8>) -> Entry {
        let range = 0..bytes.len();
        Entry {
            slot,
            kind,
            file: Arc::new(bytes),
            range,
        }
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.file[self.range.clone()]
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.slot == other.slot && self.kind == other.kind && self.bytes() == other.bytes()
    }
}

impl Eq for Entry {}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("slot", &self.slot)
            .field("kind", &self.kind)
            .field("len", &self.range.len())
            .finish()
    }
}

/// What a directory held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The newest valid snapshot: its point and bytes.
    pub snapshot: Option<(u64, Vec<u8>)>,
    /// The entries after it (from its point, or from the first segment's first slot),
    /// consecutive.
    pub entries: Vec<Entry>,
    /// The slot after the last entry (the snapshot's point if none follows it).
    pub next_slot: u64,
    /// The segments the chain ran through (their first slots), oldest first.
    pub segments: Vec<u64>,
    /// Files passed over: damaged or superseded snapshots, unfinished ones, segments off
    /// the chain or wholly below the snapshot.
    pub stale: Vec<String>,
    /// The segment the chain ended in because the scan cut it, and its valid bytes: the
    /// writer cuts it there before it writes on.
    pub truncate: Vec<(String, usize)>,
    /// What was cut or passed over, and why, a line each.
    pub cuts: Vec<String>,
}

impl Recovered {
    /// Whether it holds the state from the log's start: a snapshot, or entries from slot 0
    /// (or none at all). A log whose snapshot was damaged after the segments below it
    /// were deleted holds entries without one: alone, it cannot rebuild the state.
    pub fn has_start(&self) -> bool {
        self.snapshot.is_some() || self.entries.first().is_none_or(|e| e.slot == 0)
    }

    /// An empty log in this one's place: a writer resumed from it deletes every file this
    /// one read or passed over before it writes (a log that holds entries past a hole
    /// no other directory fills is given up, [`crate::merge`]).
    pub fn discarded(&self) -> Recovered {
        let mut stale = self.stale.clone();
        stale.extend(self.segments.iter().map(|&first| segment_name(first)));
        stale.extend(self.snapshot.as_ref().map(|(p, _)| snapshot_name(*p)));
        stale.extend(self.truncate.iter().map(|(name, _)| name.clone()));
        stale.sort();
        stale.dedup();
        Recovered {
            stale,
            ..Recovered::default()
        }
    }
}

/// The first slot a segment's name gives, if it is one's.
fn segment_first(name: &str) -> Option<u64> {
    let n: u64 = name.strip_prefix("seg-")?.parse().ok()?;
    (segment_name(n) == name).then_some(n)
}

/// The point a snapshot's name gives, if it is one's (not a temporary one).
fn snapshot_point(name: &str) -> Option<u64> {
    let n: u64 = name.strip_prefix("snap-")?.parse().ok()?;
    (snapshot_name(n) == name).then_some(n)
}

/// Reads `files` (each file's name in the directory and its bytes).
pub fn recover(files: &[(String, Vec<u8>)]) -> Recovered {
    recover_owned(files.to_vec())
}

/// [`recover`], taking the files: the entries keep their segments' buffers, no entry is
/// copied.
pub fn recover_owned(files: Vec<(String, Vec<u8>)>) -> Recovered {
    let files: Vec<(String, Arc<Vec<u8>>)> =
        files.into_iter().map(|(n, b)| (n, Arc::new(b))).collect();
    let mut r = Recovered::default();
    // The newest valid snapshot.
    let mut snapshots: Vec<(u64, &String, &[u8])> = Vec::new();
    for (name, bytes) in &files {
        if name.starts_with("snap-") && name.ends_with(".tmp") {
            r.stale.push(name.clone());
            r.cuts
                .push(format!("{name}: a snapshot not finished, passed over"));
            continue;
        }
        let Some(point) = snapshot_point(name) else {
            continue;
        };
        match snapshot::decode(bytes) {
            Ok((p, state)) if p == point => snapshots.push((point, name, state)),
            Ok((p, _)) => {
                r.stale.push(name.clone());
                r.cuts.push(format!("{name}: holds point {p}, passed over"));
            }
            Err(e) => {
                r.stale.push(name.clone());
                r.cuts.push(format!("{name}: {e}, passed over"));
            }
        }
    }
    snapshots.sort_by_key(|&(p, _, _)| p);
    if let Some((point, _, state)) = snapshots.pop() {
        r.snapshot = Some((point, state.to_vec()));
    }
    r.stale
        .extend(snapshots.iter().map(|(_, name, _)| (*name).clone()));
    // The segments, in the order of their first slots.
    let mut segments: Vec<(u64, &String, &Arc<Vec<u8>>)> = files
        .iter()
        .filter_map(|(name, bytes)| segment_first(name).map(|first| (first, name, bytes)))
        .collect();
    segments.sort_by_key(|&(first, _, _)| first);
    let start = match (&r.snapshot, segments.first()) {
        (Some((point, _)), _) => *point,
        (None, Some(&(first, _, _))) => first,
        (None, None) => 0,
    };
    let mut next = start;
    let mut ended = false;
    for (first, name, bytes) in segments {
        let scan = segment::scan(bytes);
        if ended {
            r.stale.push(name.clone());
            r.cuts.push(format!(
                "{name}: after the end of the log at {next}, passed over"
            ));
            continue;
        }
        if let Some((0, cut)) = &scan.cut {
            r.stale.push(name.clone());
            r.cuts.push(format!("{name}: {cut}, passed over"));
            continue;
        }
        if scan.first_slot != first {
            r.stale.push(name.clone());
            r.cuts.push(format!(
                "{name}: names slot {first}, holds {}",
                scan.first_slot
            ));
            continue;
        }
        if first < next && scan.next_slot() <= next {
            // Wholly below what the log already has (under the snapshot).
            r.stale.push(name.clone());
            continue;
        }
        if first > next {
            ended = true;
            r.stale.push(name.clone());
            r.cuts.push(format!(
                "{name}: starts at {first}, the log ends at {next}: a gap"
            ));
            continue;
        }
        for rec in scan.records.iter().filter(|rec| rec.slot >= next) {
            r.entries.push(Entry {
                slot: rec.slot,
                kind: rec.kind,
                file: Arc::clone(bytes),
                range: rec.bytes.clone(),
            });
        }
        next = next.max(scan.next_slot());
        r.segments.push(first);
        if let Some((at, cut)) = &scan.cut {
            ended = true;
            r.truncate.push((name.clone(), scan.valid_bytes));
            r.cuts.push(format!("{name}: cut at byte {at}: {cut}"));
        }
    }
    r.next_slot = next;
    // Postconditions: consecutive entries from the start up to the next slot.
    assert!(
        r.entries
            .iter()
            .enumerate()
            .all(|(i, e)| e.slot == start + i as u64)
    );
    assert_eq!(
        r.next_slot,
        start + r.entries.len() as u64,
        "the chain's end"
    );
    r
}
