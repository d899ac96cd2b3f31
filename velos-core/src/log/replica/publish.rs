//! The owner's side of snapshots ([`crate::log::snapshot`]): the service hands the replica
//! a snapshot, and the replica writes it into the bank its header does not name, a chunk
//! of [`WRITE_CHUNK`] words per turn (one `Op::StoreWords` each: a copy, not a store per
//! word), then the header, then publishes the point.
//!
//! Writing a bank in one go stalled the turn for as long as the copy took: a 64 MiB
//! snapshot is 8 M words, seconds of stores on the in-process backend, during which the
//! replica neither decided nor wrote its heartbeat, and its peers suspected it (eleven
//! leader changes in a hundred commands). In chunks the turn goes on: heartbeats, decisions
//! and copies by others continue while the bank fills. The lemma (consistent snapshot) does
//! not care how many turns the stores take: they land in program order, the end stamp after
//! the content, the header after the end stamp, the point published after the header. A
//! snapshot handed while one is still being written is refused
//! ([`SnapshotError::Writing`]): the service tries again later
//! ([`Replica::snapshot_writing`] says when).

use super::{Replica, Then};
use crate::log::event::Event;
use crate::log::membership::snapshot_words;
use crate::log::snapshot::{BankImage, stamp};
use velos_rdma::{Op, Words};

/// Bank words a turn stores at most while a snapshot is written (32 KiB). Snapshots up to
/// that size are written whole in the call that hands them, as before chunking.
pub const WRITE_CHUNK: usize = 1 << 12;

/// Why a snapshot was not taken.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot is larger than the log's snapshot banks.
    #[error("a snapshot of {len} bytes is larger than the log's {max}")]
    TooLarge {
        /// Its size.
        len: usize,
        /// [`crate::log::LogConfig::max_snapshot_bytes`].
        max: usize,
    },
    /// The point is past the entries applied.
    #[error("a snapshot at {point} holds entries not applied yet (next is {next_apply})")]
    NotApplied {
        /// The point given.
        point: u64,
        /// The next entry to apply.
        next_apply: u64,
    },
    /// The point is so far behind the entries applied that more membership changes
    /// happened since than a snapshot bank records.
    #[error("a snapshot at {point} is older than the membership changes a snapshot keeps")]
    TooOld {
        /// The point given.
        point: u64,
    },
    /// The previous snapshot is still being written into its bank, a chunk per turn.
    #[error("the snapshot at {point} is still being written; hand the next one later")]
    Writing {
        /// The point of the snapshot being written.
        point: u64,
    },
}

/// A snapshot being written into its bank.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Writing {
    image: BankImage,
    bank: u32,
    /// Words stored so far, of `image.used()` and then the end stamp.
    next: usize,
}

impl Replica {
    /// The service's state machine took a snapshot `bytes` that holds every entry below
    /// `point` (at most [`Replica::next_apply`]). The replica keeps it in its snapshot
    /// region for replicas that fall off the ring, and once a majority's snapshots hold an
    /// instance, its ring position may be reused ([`crate::log::ring`]). A point not above
    /// the last one changes nothing. A snapshot larger than [`WRITE_CHUNK`] words is
    /// written over the next turns; until then the point is not published and
    /// [`Replica::snapshot_writing`] names it. The bytes are kept, not copied.
    pub fn snapshot_taken(&mut self, point: u64, bytes: Vec<u8>) -> Result<(), SnapshotError> {
        let max = self.config.max_snapshot_bytes as usize;
        if bytes.len() > max {
            return Err(SnapshotError::TooLarge {
                len: bytes.len(),
                max,
            });
        }
        if point > self.next_apply {
            return Err(SnapshotError::NotApplied {
                point,
                next_apply: self.next_apply,
            });
        }
        if let Some(point) = self.snapshot_writing() {
            return Err(SnapshotError::Writing { point });
        }
        if point <= self.beat.points[usize::from(self.me)] {
            return Ok(());
        }
        // The bank keeps the membership from the point on: a replica that copies it skips
        // the configuration entries below the point.
        let membership = self.membership.to_words(point);
        if membership.len() > snapshot_words(self.config.replicas) {
            return Err(SnapshotError::TooOld { point });
        }
        self.start_snapshot_write(BankImage::new(point, membership, bytes));
        self.membership.forget_before(point);
        Ok(())
    }

    /// The point of the snapshot being written into its bank, if one is.
    pub fn snapshot_writing(&self) -> Option<u64> {
        self.snap.writing.as_ref().map(|w| w.image.point())
    }

    /// Starts writing a snapshot into the bank the header does not name, and writes its
    /// first chunk at once.
    pub(super) fn start_snapshot_write(&mut self, image: BankImage) {
        assert!(
            image.point() > self.beat.points[usize::from(self.me)] && self.snap.writing.is_none(),
            "snapshot points grow, one write at a time"
        );
        assert!(
            image.used() < self.shape.snapshot_bank_words() as usize,
            "the bank holds the image and its end stamp"
        );
        let bank = self.snap.snapshot_bank.map_or(0, |b| 1 - b);
        self.snap.writing = Some(Box::new(Writing {
            image,
            bank,
            next: 0,
        }));
        self.write_snapshot_chunk();
    }

    /// Stores the next chunk of the snapshot being written, if one is; after its last
    /// word, the header, and publishes the point (the next heartbeat carries it).
    pub(super) fn write_snapshot_chunk(&mut self) {
        if self.snap.writing.is_some() {
            self.write_next_chunk();
        }
    }

    /// [`Replica::write_snapshot_chunk`] with a snapshot being written (off the decision
    /// path: kept out of line, so that the turn that checks for it stays small).
    #[cold]
    #[inline(never)]
    fn write_next_chunk(&mut self) {
        let Some(mut w) = self.snap.writing.take() else {
            return;
        };
        let (used, last) = (w.image.used(), self.shape.snapshot_bank_words() - 1);
        let upto = (w.next + WRITE_CHUNK).min(used + 1);
        // The content of this chunk in one copy (the stores land in address order); the
        // padding past the content is never read as content (the length bounds it).
        let content = w.next..upto.min(used);
        if !content.is_empty() {
            let loc = self
                .shape
                .snapshot_word(self.me, w.bank, content.start as u32);
            let words = Words::from(content.map(|i| w.image.word(i)).collect::<Vec<_>>());
            self.op(Op::StoreWords { loc, words }, Then::Ignore);
        }
        if upto == used + 1 {
            // The end stamp goes to the bank's last word, after everything else.
            let loc = self.shape.snapshot_word(self.me, w.bank, last);
            let value = stamp(w.image.point());
            self.op(Op::Store { loc, value }, Then::Ignore);
        }
        w.next = upto;
        if w.next <= used {
            self.snap.writing = Some(w);
            return;
        }
        let header = self.shape.snapshot_header(self.me);
        let value = u64::from(w.bank) + 1;
        self.op(Op::Store { loc: header, value }, Then::Ignore);
        self.snap.snapshot_bank = Some(w.bank);
        let (me, point) = (usize::from(self.me), w.image.point());
        assert!(point > self.beat.points[me], "snapshot points grow");
        self.beat.points[me] = point;
        let bytes = w.image.len_bytes();
        self.event(|| Event::SnapshotPublished { point, bytes });
        assert!(
            self.snap.writing.is_none() && self.beat.points[me] == point,
            "the point is published after the bank and its header"
        );
    }
}
