//! The writer of a replica's durable log, sans-IO: applied entries and snapshots in, file
//! operations out, in batches executed one at a time and in order; a batch's completion
//! moves the durable point.
//!
//! Group commit: the records appended while a batch is on its way go out together in the
//! next one, behind one sync per file. Segments roll at a size. A snapshot is written to
//! a temporary file, synced, renamed into place and the directory synced; only then are
//! the older snapshots and the segments wholly below it deleted (in the same batch, after
//! the rename: the executor runs a batch's operations in order).

use crate::quorum::Mutation;
use crate::recover::Recovered;
use crate::segment::{self, Kind, file_name as segment_name};
use crate::snapshot::{self, file_name as snapshot_name, tmp_name as snapshot_tmp_name};

/// One file operation; a batch's operations run in order, each after the previous one
/// returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DiskOp {
    /// Create `file` (empty, or cut to nothing if it exists) holding `bytes`.
    Write {
        /// The file's name in the replica's directory.
        file: String,
        /// Its contents.
        bytes: Vec<u8>,
    },
    /// Append `bytes` to the end of `file`.
    Append {
        /// The file's name.
        file: String,
        /// What to append.
        bytes: Vec<u8>,
    },
    /// Make `file`'s contents durable (`fdatasync`).
    Sync {
        /// The file's name.
        file: String,
    },
    /// Make the directory's entries (files created, renamed, deleted) durable.
    SyncDir,
    /// Rename `from` to `to`, replacing `to`.
    Rename {
        /// The old name.
        from: String,
        /// The new name.
        to: String,
    },
    /// Cut `file` to its first `len` bytes (a torn or corrupt tail the recovery found).
    Truncate {
        /// The file's name.
        file: String,
        /// The bytes kept.
        len: usize,
    },
    /// Delete `file` (nothing if it does not exist).
    Delete {
        /// The file's name.
        file: String,
    },
}

/// A batch handed out and not yet completed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct InFlight {
    /// Every slot below it is on disk once the batch completes.
    upto: u64,
    /// The snapshot the batch writes, and the segments it deletes (their first slots).
    snapshot: Option<(u64, Vec<u64>)>,
}

/// Why a writer stopped persisting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// The disk is full.
    #[error("the disk is full")]
    Full,
    /// Another error of the file system, as the executor reported it.
    #[error("the file system failed: {0}")]
    Io(String),
}

/// A replica's durable log, as the writer keeps track of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writer {
    /// A segment rolls once it holds this many bytes.
    segment_bytes: usize,
    /// The segments on disk or on their way, oldest first: their first slots.
    segments: Vec<u64>,
    /// Bytes the newest segment holds once everything handed out and staged is written;
    /// `None` before this writer created one.
    newest_bytes: Option<usize>,
    /// Records not handed out yet, by segment: (its first slot, whether the batch creates
    /// it, the bytes).
    staged: Vec<(u64, bool, Vec<u8>)>,
    /// The slot the next entry must have.
    next_slot: u64,
    /// Every slot below it is on disk.
    durable: u64,
    /// The newest snapshot on disk, and one waiting to be written.
    snapshot_on_disk: Option<u64>,
    snapshot_waiting: Option<(u64, Vec<u8>)>,
    /// Files to delete, and segments to cut to their valid bytes, before anything else
    /// is written (what a crash left behind).
    stale: Vec<String>,
    truncate: Vec<(String, usize)>,
    in_flight: Option<InFlight>,
    stopped: Option<Stopped>,
    /// A deliberately wrong variant ([`Writer::mutate`]); `None` otherwise.
    mutation: Mutation,
}

impl Writer {
    /// A writer of an empty directory whose log starts at `first_slot`; segments roll at
    /// `segment_bytes`.
    pub fn new(first_slot: u64, segment_bytes: usize) -> Writer {
        assert!(
            segment_bytes > segment::HEADER_BYTES,
            "a segment holds a record"
        );
        Writer {
            segment_bytes,
            segments: Vec::new(),
            newest_bytes: None,
            staged: Vec::new(),
            next_slot: first_slot,
            durable: first_slot,
            snapshot_on_disk: None,
            snapshot_waiting: None,
            stale: Vec::new(),
            truncate: Vec::new(),
            in_flight: None,
            stopped: None,
            mutation: Mutation::None,
        }
    }

    /// Runs the deliberately wrong variant `mutation` (tests only: without the
    /// `mutations` feature there is none but [`Mutation::None`]).
    pub fn mutate(&mut self, mutation: Mutation) {
        self.mutation = mutation;
    }

    /// A writer going on from `own` (what a replica's directory held after a power loss
    /// of the whole cluster), brought up to `source` (the longest log the directories
    /// hold together, [`crate::merge::merge`]). A log that runs past `source` ran past a
    /// hole no other directory fills: its entries there were one replica's alone, never
    /// durable, and the log is given up ([`Recovered::discarded`]) and written anew.
    pub fn rejoin(own: &Recovered, source: &Recovered, segment_bytes: usize) -> Writer {
        let kept = if own.next_slot > source.next_slot {
            own.discarded()
        } else {
            own.clone()
        };
        let mut w = Writer::resume(&kept, segment_bytes);
        w.catch_up(source);
        // Postcondition: the disk will hold the source's log, and nothing past it.
        assert_eq!(w.next_slot(), source.next_slot, "caught up, no further");
        w
    }

    /// The entry a replica applied in `slot`: appended, unless the disk holds it already
    /// (a replica that went on from its directory applies again what it wrote before; by
    /// agreement it is the same entry).
    pub fn applied(&mut self, slot: u64, kind: Kind, bytes: &[u8]) {
        if slot >= self.next_slot {
            self.append(slot, kind, bytes);
        }
    }

    /// A snapshot a replica took at `point`: written unless the disk's log does not reach
    /// it yet or a newer snapshot is there already.
    pub fn snapshot_taken(&mut self, point: u64, bytes: Vec<u8>) {
        if point >= self.snapshot_floor() && point <= self.next_slot {
            self.snapshot(point, bytes);
        }
    }

    /// A snapshot a replica copied from a peer at `point`: installed past the disk's log,
    /// written as a snapshot within it, passed over below the newest one.
    pub fn snapshot_copied(&mut self, point: u64, bytes: Vec<u8>) {
        if point > self.next_slot {
            self.install(point, bytes);
        } else if point >= self.snapshot_floor() {
            self.snapshot(point, bytes);
        }
    }

    /// Hands this writer what `source` (the longest log a recovery found) holds past its
    /// own log: the source's snapshot first if the entries it lacks are gone from the
    /// source, then the source's entries from its next slot on. Entries it holds already
    /// are the same (both are prefixes of the decided log) and are passed over.
    ///
    /// # Panics
    /// If `source` lacks entries this writer needs and has no snapshot to give instead.
    pub fn catch_up(&mut self, source: &Recovered) {
        let from = source.entries.first().map_or(source.next_slot, |e| e.slot);
        // A log whose snapshot was damaged starts past 0 without one: the source's
        // snapshot gives it its start again, when its log reaches it.
        let holed =
            self.snapshot_on_disk.is_none() && self.segments.first().is_some_and(|&f| f > 0);
        if let Some((point, bytes)) = source.snapshot.as_ref().filter(|_| holed) {
            let first = self.segments.first().copied().unwrap_or(0);
            if (first..=self.next_slot).contains(point) && self.next_slot >= from {
                self.snapshot(*point, bytes.clone());
            }
        }
        if self.next_slot < from {
            let (point, bytes) = source
                .snapshot
                .clone()
                .expect("a log whose entries start past 0 starts at a snapshot");
            self.install(point, bytes);
        }
        let next = self.next_slot;
        for e in source.entries.iter().filter(|e| e.slot >= next) {
            self.append(e.slot, e.kind, e.bytes());
        }
        assert!(
            self.next_slot >= source.next_slot,
            "caught up with the source"
        );
    }

    /// A writer that goes on from what [`crate::recover::recover`] found: the next entry
    /// is the recovered log's next slot, in a new segment. Its first batch cuts the
    /// segment the recovery cut to its valid bytes (else the cut would end the chain
    /// there again at the next recovery, before the segments written since) and deletes
    /// the files the recovery passed over (a segment off the chain could otherwise be
    /// taken for the log's continuation later), each synced before anything new is
    /// written.
    pub fn resume(recovered: &Recovered, segment_bytes: usize) -> Writer {
        let mut w = Writer::new(recovered.next_slot, segment_bytes);
        w.segments = recovered.segments.clone();
        // A segment of the chain that ends empty at the next slot is written anew.
        if w.segments.last() == Some(&recovered.next_slot) {
            w.segments.pop();
        }
        w.snapshot_on_disk = recovered.snapshot.as_ref().map(|(p, _)| *p);
        w.stale = recovered.stale.clone();
        w.truncate = recovered.truncate.clone();
        // A new segment at the next slot replaces any file of that name.
        w.stale.retain(|f| *f != segment_name(recovered.next_slot));
        w
    }

    /// Every slot below it is on disk.
    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// The slot the next entry must have.
    pub fn next_slot(&self) -> u64 {
        self.next_slot
    }

    /// Why the writer stopped, if it did: it writes nothing more and its durable point
    /// stays where it is.
    pub fn stopped(&self) -> Option<&Stopped> {
        self.stopped.as_ref()
    }

    /// Appends the entry applied in `slot` (the next one).
    ///
    /// # Panics
    /// If `slot` is not [`Writer::next_slot`]: a replica applies without holes, in order.
    pub fn append(&mut self, slot: u64, kind: Kind, bytes: &[u8]) {
        assert_eq!(
            slot, self.next_slot,
            "entries are appended in slot order, once"
        );
        if self.newest_bytes.is_none_or(|b| b >= self.segment_bytes) {
            self.segments.push(slot);
            let header = segment::header(slot).to_vec();
            self.newest_bytes = Some(header.len());
            self.staged.push((slot, true, header));
        } else if self.staged.is_empty() {
            let newest = *self.segments.last().expect("a segment exists");
            self.staged.push((newest, false, Vec::new()));
        }
        let (_, _, out) = self.staged.last_mut().expect("staged");
        let n = segment::append_record(out, slot, kind, bytes);
        *self.newest_bytes.as_mut().expect("a segment") += n;
        self.next_slot += 1;
    }

    /// The newest snapshot's point: on disk, on its way or waiting (0 if none). A new
    /// snapshot is at this point or later: the segments below it may be gone.
    pub fn snapshot_floor(&self) -> u64 {
        let in_flight = self.in_flight.as_ref().and_then(|b| b.snapshot.as_ref());
        [
            self.snapshot_on_disk,
            in_flight.map(|(p, _)| *p),
            self.snapshot_waiting.as_ref().map(|(p, _)| *p),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
    }

    /// A snapshot of the service at `point` (every slot below it applied), to be written
    /// with the next batch; one still waiting is replaced.
    ///
    /// # Panics
    /// If `point` is past the entries appended, or before [`Writer::snapshot_floor`] (a
    /// replica's snapshots only move forward; the entries below the newest may be
    /// deleted already).
    pub fn snapshot(&mut self, point: u64, bytes: Vec<u8>) {
        assert!(
            point <= self.next_slot,
            "a snapshot of applied entries only"
        );
        assert!(
            point >= self.snapshot_floor(),
            "a snapshot at {point} behind the one at {}",
            self.snapshot_floor()
        );
        self.snapshot_waiting = Some((point, bytes));
    }

    /// A snapshot at `point` past the entries appended: the replica copied it from a
    /// peer (it fell behind the log's ring) and goes on applying from `point`. The next
    /// entry is `point`'s, in a new segment; the segments below are deleted once the
    /// snapshot is on disk, as for any snapshot.
    ///
    /// # Panics
    /// If `point` is not past [`Writer::next_slot`] (use [`Writer::snapshot`]).
    pub fn install(&mut self, point: u64, bytes: Vec<u8>) {
        assert!(
            point > self.next_slot,
            "an installed snapshot moves the log on"
        );
        self.snapshot_waiting = Some((point, bytes));
        self.next_slot = point;
        self.newest_bytes = None; // the next append opens a segment at `point`
        assert!(
            self.snapshot_floor() == point,
            "the newest snapshot is the installed one"
        );
    }

    /// The next batch, if none is on its way and there is something to write; the
    /// caller executes the operations in order and then calls [`Writer::done`] (or
    /// [`Writer::failed`]).
    pub fn poll(&mut self, out: &mut Vec<DiskOp>) {
        if self.in_flight.is_some() || self.stopped.is_some() {
            return;
        }
        let before = out.len();
        for (file, len) in self.truncate.drain(..) {
            out.push(DiskOp::Truncate {
                file: file.clone(),
                len,
            });
            out.push(DiskOp::Sync { file });
        }
        if !self.stale.is_empty() {
            for file in self.stale.drain(..) {
                out.push(DiskOp::Delete { file });
            }
            out.push(DiskOp::SyncDir);
        }
        let mut created = false;
        let mut synced = Vec::new();
        for (first, create, bytes) in self.staged.drain(..) {
            let file = segment_name(first);
            if create {
                created = true;
                out.push(DiskOp::Write {
                    file: file.clone(),
                    bytes,
                });
            } else {
                out.push(DiskOp::Append {
                    file: file.clone(),
                    bytes,
                });
            }
            synced.push(file);
        }
        out.extend(synced.into_iter().map(|file| DiskOp::Sync { file }));
        if created {
            out.push(DiskOp::SyncDir);
        }
        let snapshot = self.snapshot_waiting.take().map(|(point, bytes)| {
            let tmp = snapshot_tmp_name(point);
            out.push(DiskOp::Write {
                file: tmp.clone(),
                bytes: snapshot::encode(point, &bytes),
            });
            out.push(DiskOp::Sync { file: tmp.clone() });
            out.push(DiskOp::Rename {
                from: tmp,
                to: snapshot_name(point),
            });
            out.push(DiskOp::SyncDir);
            // Behind the rename: the older snapshot, and the segments wholly below the
            // point (the next segment starts at or below it), never the newest.
            if let Some(old) = self.snapshot_on_disk.filter(|&old| old != point) {
                out.push(DiskOp::Delete {
                    file: snapshot_name(old),
                });
            }
            let below: Vec<u64> = self
                .segments
                .windows(2)
                .filter(|w| w[1] <= point)
                .map(|w| w[0])
                .collect();
            for &first in &below {
                out.push(DiskOp::Delete {
                    file: segment_name(first),
                });
            }
            out.push(DiskOp::SyncDir);
            (point, below)
        });
        if out.len() > before {
            self.in_flight = Some(InFlight {
                upto: self.next_slot,
                snapshot,
            });
            #[cfg(feature = "mutations")]
            if self.mutation == Mutation::DurableAtHandout {
                self.durable = self.next_slot; // before a single sync ran
            }
        }
    }

    /// The batch handed out last completed: everything it wrote is on disk.
    pub fn done(&mut self) {
        let batch = self.in_flight.take().expect("a batch was on its way");
        if let Some((point, deleted)) = batch.snapshot {
            self.snapshot_on_disk = Some(point);
            self.segments.retain(|first| !deleted.contains(first));
        }
        let from_snapshot = self.snapshot_on_disk.unwrap_or(0);
        let durable = batch.upto.max(from_snapshot);
        // Postcondition: the durable point only moves on, never past what was appended.
        assert!(durable >= self.durable && durable <= self.next_slot);
        self.durable = durable;
    }

    /// The batch handed out last failed: the writer stops (it writes nothing more; the
    /// replica goes on deciding without persisting and says so).
    pub fn failed(&mut self, why: Stopped) {
        assert!(self.in_flight.take().is_some(), "a batch was on its way");
        self.stopped = Some(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_while_a_batch_is_out_go_together_behind_one_sync() {
        let mut w = Writer::new(0, 1 << 20);
        for slot in 0..3 {
            w.append(slot, Kind::Service, b"abc");
        }
        let mut ops = Vec::new();
        w.poll(&mut ops);
        let seg = segment_name(0);
        assert!(matches!(&ops[0], DiskOp::Write { file, .. } if *file == seg));
        assert_eq!(
            ops[1..],
            [DiskOp::Sync { file: seg.clone() }, DiskOp::SyncDir]
        );
        for slot in 3..8 {
            w.append(slot, Kind::Service, b"abc");
        }
        let mut more = Vec::new();
        w.poll(&mut more);
        assert!(more.is_empty(), "one batch at a time");
        assert_eq!(w.durable(), 0, "nothing durable before the batch completes");
        w.done();
        assert_eq!(w.durable(), 3);
        w.poll(&mut more);
        assert!(
            matches!(&more[..], [DiskOp::Append { file, .. }, DiskOp::Sync { .. }] if *file == seg)
        );
        w.done();
        assert_eq!(w.durable(), 8);
    }

    #[test]
    fn a_log_past_the_source_is_given_up_and_a_shorter_one_caught_up() {
        let source = crate::recover::Recovered {
            entries: (0..5)
                .map(|s| crate::recover::Entry::new(s, Kind::Service, vec![s as u8]))
                .collect(),
            next_slot: 5,
            ..Default::default()
        };
        // Past a hole: its own segment from slot 8 is deleted, the source written anew.
        let past = crate::recover::Recovered {
            next_slot: 9,
            segments: vec![8],
            ..Default::default()
        };
        let mut w = Writer::rejoin(&past, &source, 1 << 20);
        assert_eq!(w.next_slot(), 5);
        let mut ops = Vec::new();
        w.poll(&mut ops);
        assert_eq!(
            ops[0],
            DiskOp::Delete {
                file: segment_name(8)
            },
            "{ops:?}"
        );
        // Shorter: only the entries it lacks are appended.
        let short = crate::recover::Recovered {
            next_slot: 3,
            segments: vec![0],
            ..Default::default()
        };
        let w = Writer::rejoin(&short, &source, 1 << 20);
        assert_eq!((w.next_slot(), w.durable()), (5, 3), "3 and 4 to write");
    }

    #[test]
    fn what_a_disk_holds_already_is_passed_over() {
        let mut w = Writer::new(4, 1 << 20);
        w.applied(2, Kind::Service, b"old"); // below the log: on disk already
        w.applied(4, Kind::Service, b"new");
        assert_eq!(w.next_slot(), 5);
        w.snapshot_taken(9, b"ahead".to_vec()); // past the log: not yet
        assert_eq!(w.snapshot_floor(), 0);
        w.snapshot_copied(3, b"within".to_vec());
        assert_eq!(w.snapshot_floor(), 3);
        w.snapshot_copied(1, b"older".to_vec()); // below the newest: passed over
        assert_eq!(w.snapshot_floor(), 3);
        w.snapshot_copied(9, b"past".to_vec());
        assert_eq!((w.snapshot_floor(), w.next_slot()), (9, 9), "installed");
    }

    #[test]
    fn an_installed_snapshot_moves_the_log_on_and_its_next_entry_opens_a_segment() {
        let mut w = Writer::new(0, 1 << 20);
        w.append(0, Kind::Service, b"a");
        let mut ops = Vec::new();
        w.poll(&mut ops);
        w.done();
        w.install(10, b"state".to_vec());
        w.append(10, Kind::Service, b"b");
        ops.clear();
        w.poll(&mut ops);
        assert!(
            matches!(&ops[0], DiskOp::Write { file, .. } if *file == segment_name(10)),
            "a new segment at the point: {ops:?}"
        );
        assert!(ops.contains(&DiskOp::Delete {
            file: segment_name(0)
        }));
        assert_eq!(w.durable(), 1, "nothing moves before the batch completes");
        w.done();
        assert_eq!((w.durable(), w.next_slot()), (11, 11));
    }

    #[test]
    fn a_failed_batch_stops_the_writer_where_it_stood() {
        let mut w = Writer::new(5, 1 << 20);
        w.append(5, Kind::Service, b"x");
        let mut ops = Vec::new();
        w.poll(&mut ops);
        w.failed(Stopped::Full);
        assert_eq!(w.stopped(), Some(&Stopped::Full));
        w.append(6, Kind::Service, b"y");
        ops.clear();
        w.poll(&mut ops);
        assert!(ops.is_empty(), "a stopped writer writes nothing");
        assert_eq!(w.durable(), 5);
    }
}
