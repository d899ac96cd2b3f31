//! State transfer: a replica whose next instance was retired ([`crate::log::ring`]) copies
//! a peer's snapshot ([`crate::log::snapshot`]) and resumes from its point (the other
//! direction, writing this replica's own snapshots for the others to copy, is
//! [`super::publish`]'s).
//!
//! The copy runs in one of `read_banks` incoming banks of scratch: the header, then the
//! bank's end stamp, its point and length, its content (only the words the length covers,
//! one multi-word read of [`chunk`] words at a time), its begin stamp, each stage's gets
//! tested before the next is posted. Posting a whole bank's gets at once queued the
//! heartbeat reads on the same queue pairs behind thousands of gets: the copier suspected its sources and gave every
//! copy up (seen with 64 KiB banks on the emulator). A copy from a peer that becomes suspected is given up
//! after a failure timeout; its bank stays out of use until its gets complete (they could
//! still land), as with value reads. A torn copy (the peer wrote that bank again meanwhile)
//! is simply started again.

use super::{Replica, Role, Then};
use crate::log::config::ids;
use crate::log::event::Event;
use crate::log::membership::Membership;
use crate::log::snapshot::{BankImage, read_bank};
use crate::log::value::words_for;
use crate::word::Lap;
use velos_rdma::{Op, Reply};

/// Content words a copy gets per turn, at least.
pub(super) const CHUNK: u32 = 64;

/// Content words a copy gets per turn for a bank of `used` words, in one multi-word read
/// (`Op::GetWords`): a quarter of the bank, at least [`CHUNK`], at most [`MAX_CHUNK`] (a
/// 64 KiB snapshot in 4 round trips; 64-word rounds, a get per word, took 128 and tore
/// before they ended).
pub(super) fn chunk(used: u32) -> u32 {
    (used / 4).clamp(CHUNK, MAX_CHUNK)
}

/// Content words a copy gets per turn, at most (16 KiB): the read a stage posts holds the
/// source's queue pair ahead of the heartbeat reads behind it for its bytes' time on the
/// wire.
pub(super) const MAX_CHUNK: u32 = 2048;

/// Where a copy stands: the gets of each stage are out until a test says complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Copying {
    Header,
    /// The end stamp's get.
    End,
    /// The gets of the point and the length.
    Length,
    /// The length is being loaded.
    LengthLoad,
    /// The content's gets: bank words below `next` are posted, up to `end`.
    Content {
        next: u32,
        end: u32,
    },
    Begin,
    Loading,
}

/// A copy of a peer's snapshot under way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Transfer {
    source: u16,
    /// The incoming bank of scratch.
    bank: u32,
    /// The source's bank its header named.
    remote_bank: u32,
    stage: Copying,
    /// When its last stage completed (or it started): a copy is given up only when its
    /// source is suspected and no stage completed for a failure timeout (a source busy
    /// writing large snapshots can look slow while its NIC serves the copy).
    progressed: u64,
    /// The bank words before the end stamp that hold something (stamp, point, length,
    /// content), once the length is known.
    used: u32,
    words: Vec<Option<u64>>,
}

impl Replica {
    /// Snapshots copied from peers since the last call, `(point, bytes)`: restore the
    /// state machine from each before applying what [`Replica::take_committed`] gives
    /// (entries below an installed point are left out there).
    pub fn take_installed(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.snap.installed)
    }

    /// Whether instance `k` is retired as this replica's words show: a word of a later lap
    /// at its position, locally or in a catch-up read.
    pub(super) fn retired_here(&self, k: u64) -> bool {
        let (layout, ring) = (self.config.layout, self.ring);
        let later = |w: u64| ring.classify(layout, k, w) == Lap::Later;
        let local = self
            .learn
            .words
            .iter()
            .any(|w| w.get(&k).is_some_and(|&w| later(w)));
        let read = self.learn.catch_up.as_ref().is_some_and(|c| {
            c.slot == k && c.replies.iter().flatten().flatten().any(|&w| later(w))
        });
        local || read
    }

    /// The follower's turn while it must copy a snapshot.
    pub(super) fn run_transfer(&mut self) {
        assert!(
            matches!(self.role, Role::Follower),
            "only a follower copies"
        );
        self.snap.behind = true;
        self.learn.catch_up = None;
        self.learn.bulk.abandon();
        self.learn.repair = None;
        if self.snap.transfer.is_some() {
            return; // under way: the turn's tests move it
        }
        let k = self.next_apply;
        let source = (0..self.config.replicas)
            .filter(|&a| a != self.me && !self.omega.suspects(a))
            .filter(|&a| self.beat.points[usize::from(a)] > k)
            .filter(|&a| !self.snap.transfer_poisoned.contains(&Some(a)))
            .max_by_key(|&a| self.beat.points[usize::from(a)]);
        let bank = (0..self.config.read_banks())
            .find(|&b| self.snap.transfer_poisoned[b as usize].is_none());
        let (Some(source), Some(bank)) = (source, bank) else {
            return; // nobody to copy from yet: heartbeats will tell
        };
        let get = Op::Get {
            local: self.scratch.transfer_header(),
            remote: self.shape.snapshot_header(source),
            work_id: ids::transfer(bank),
        };
        self.op(get, Then::Ignore);
        self.snap.transfer = Some(Box::new(Transfer {
            source,
            bank,
            remote_bank: 0,
            stage: Copying::Header,
            progressed: self.now,
            used: 0,
            words: Vec::new(),
        }));
        self.moved = true;
    }

    /// The turn's part of a copy: test its stage, give it up if its source is suspected
    /// for longer than a failure timeout, and free banks whose abandoned gets completed.
    pub(super) fn test_transfer(&mut self) {
        for b in 0..self.config.read_banks() {
            if self.snap.transfer_poisoned[b as usize].is_some() {
                let work_id = ids::transfer(b);
                self.op(Op::Test { work_id }, Then::TransferBankTest(b));
            }
        }
        let Some(t) = &self.snap.transfer else {
            return;
        };
        if matches!(t.stage, Copying::Loading | Copying::LengthLoad) {
            return;
        }
        let stuck = self.omega.suspects(t.source)
            && self.now - t.progressed > self.config.failure_timeout_ns;
        if stuck {
            assert!(
                !self.snap.transfer_poisoned.contains(&Some(t.source)),
                "rule (one bank per silent source)"
            );
            self.snap.transfer_poisoned[t.bank as usize] = Some(t.source);
            let source = t.source;
            self.snap.transfer = None;
            self.event(|| Event::CopyAbandoned { source });
            return;
        }
        let work_id = ids::transfer(t.bank);
        self.op(Op::Test { work_id }, Then::TransferTest);
    }

    /// The gets of the copy's stage completed (`Value(1)`), failed, or not yet.
    pub(super) fn transfer_tested(&mut self, reply: Reply) {
        let Some(t) = &mut self.snap.transfer else {
            return;
        };
        match reply {
            Reply::Value(1) => {}
            Reply::Failed(_) => {
                self.snap.transfer = None; // complete, if failed: the bank is free
                return;
            }
            _ => return,
        }
        let (bank, source, remote_bank) = (t.bank, t.source, t.remote_bank);
        let per_bank = self.shape.snapshot_bank_words();
        let work_id = ids::transfer(bank);
        let get = |i: u32| Op::Get {
            local: self.scratch.transfer(bank, i),
            remote: self.shape.snapshot_word(source, remote_bank, i),
            work_id,
        };
        let (stage, used) = (t.stage, t.used);
        let (next, ops): (Copying, Vec<(Op, Then)>) = match stage {
            Copying::Header => {
                let loc = self.scratch.transfer_header();
                (stage, vec![(Op::Load { loc }, Then::TransferHeader)])
            }
            Copying::End => (
                Copying::Length,
                vec![(get(1), Then::Ignore), (get(2), Then::Ignore)],
            ),
            Copying::Length => {
                let loc = self.scratch.transfer(bank, 2);
                (
                    Copying::LengthLoad,
                    vec![(Op::Load { loc }, Then::TransferLength)],
                )
            }
            Copying::Content { next, end } if next < end => {
                // One read of the chunk's words (one work request).
                let to = end.min(next + chunk(end));
                let gets = Op::GetWords {
                    local: self.scratch.transfer(bank, next),
                    remote: self.shape.snapshot_word(source, remote_bank, next),
                    count: to - next,
                    work_id,
                };
                (
                    Copying::Content { next: to, end },
                    vec![(gets, Then::Ignore)],
                )
            }
            Copying::Content { .. } => (Copying::Begin, vec![(get(0), Then::Ignore)]),
            Copying::Begin => {
                // Every word that holds something in one copy, then the end stamp (the
                // bank's last word).
                let words = Op::LoadWords {
                    loc: self.scratch.transfer(bank, 0),
                    count: used,
                };
                let end = Op::Load {
                    loc: self.scratch.transfer(bank, per_bank - 1),
                };
                let loads = vec![
                    (words, Then::TransferWords),
                    (end, Then::TransferWord(used)),
                ];
                (Copying::Loading, loads)
            }
            Copying::LengthLoad | Copying::Loading => unreachable!("loads are not tested"),
        };
        if next == Copying::Loading {
            t.words = vec![None; used as usize + 1];
        }
        t.stage = next;
        t.progressed = self.now;
        for (op, then) in ops {
            self.op_first(op, then);
        }
        self.moved = true;
    }

    /// The copied length was loaded: get the content words it covers (a length past the
    /// bank is a torn copy: start again).
    pub(super) fn transfer_length(&mut self, len: u64) {
        let Some(t) = &mut self.snap.transfer else {
            return;
        };
        assert_eq!(t.stage, Copying::LengthLoad, "a length while loading one");
        let room = u64::from(self.shape.snapshot_bank_words() - 4);
        let words = usize::try_from(len).map_or(u64::MAX, |l| words_for(l) as u64);
        if words > room {
            self.snap.transfer = None;
            return;
        }
        t.used = 3 + words as u32;
        t.stage = Copying::Content {
            next: 3,
            end: t.used,
        };
        self.moved = true;
        assert!(
            t.used < self.shape.snapshot_bank_words(),
            "the content fits the bank"
        );
    }

    /// The source's header was loaded: copy the bank it names (none yet: start again).
    pub(super) fn transfer_header(&mut self, header: u64) {
        let Some(t) = &mut self.snap.transfer else {
            return;
        };
        assert_eq!(t.stage, Copying::Header, "a header while reading one");
        if header == 0 || header > 2 {
            self.snap.transfer = None; // no snapshot there (yet): choose again
            return;
        }
        t.remote_bank = (header - 1) as u32;
        t.stage = Copying::End;
        let last = self.shape.snapshot_bank_words() - 1;
        let get = Op::Get {
            local: self.scratch.transfer(t.bank, last),
            remote: self.shape.snapshot_word(t.source, t.remote_bank, last),
            work_id: ids::transfer(t.bank),
        };
        self.op_first(get, Then::Ignore);
    }

    /// The copied bank's words that hold something were loaded, from word 0 on.
    /// (Off the decision path: kept out of line.)
    #[cold]
    #[inline(never)]
    pub(super) fn transfer_words(&mut self, reply: Reply) {
        let Reply::Words(words) = reply else {
            panic!("a load of words replies words: {reply:?}");
        };
        let words = words.as_slice();
        let t = self.snap.transfer.as_mut().expect("a copy loading");
        assert!(
            t.words.len() > words.len(),
            "a copy loading its words and then its end stamp"
        );
        for (slot, &w) in t.words.iter_mut().zip(words) {
            *slot = Some(w);
        }
        self.transfer_loaded();
    }

    /// Word `i` of the copied bank was loaded.
    pub(super) fn transfer_word(&mut self, i: u32, value: u64) {
        let t = self.snap.transfer.as_mut().expect("a copy loading");
        t.words[i as usize] = Some(value);
        self.transfer_loaded();
    }

    /// Once every word of the copied bank is loaded: install it, or start again.
    fn transfer_loaded(&mut self) {
        let t = self.snap.transfer.as_ref().expect("a copy loading");
        if t.words.iter().any(Option::is_none) {
            return;
        }
        let t = *self.snap.transfer.take().expect("a copy loading");
        let words: Vec<u64> = t.words.into_iter().map(|w| w.expect("loaded")).collect();
        match read_bank(&words) {
            Some((point, bytes)) if point > self.next_apply => self.install(t.source, point, bytes),
            _ => {} // torn, or no further than I am: choose again next turn
        }
    }

    /// Resumes from a copied snapshot: every instance below `point` is in it.
    fn install(&mut self, source: u16, point: u64, bytes: Vec<u8>) {
        // The stamps made the copy consistent: a bank that is no snapshot the log wrapped
        // is a broken invariant.
        let (membership, service) = Membership::unwrap_snapshot(&bytes, self.config.replicas)
            .expect("a copied bank holds a wrapped snapshot");
        let service = service.to_vec();
        let image = self.adopt_snapshot(point, membership, service.clone());
        self.installs.push(point);
        let len = service.len();
        self.event(|| Event::SnapshotInstalled {
            point,
            source,
            bytes: len,
        });
        self.snap.installed.push((point, service));
        self.publish_resumed(point, image);
        assert_eq!(self.next_apply, point, "resumed at the snapshot's point");
    }

    /// Goes on from a snapshot at `point` (copied from a peer, or a joiner's own from its
    /// disk, [`Replica::resume_at`]), first step: the membership from there on adopted,
    /// the next slot `point`. The snapshot's bank image, for [`Replica::publish_resumed`].
    pub(super) fn adopt_snapshot(
        &mut self,
        point: u64,
        membership: Membership,
        service: Vec<u8>,
    ) -> BankImage {
        assert!(
            point > self.next_apply,
            "a snapshot moves a replica forward"
        );
        assert!(
            self.learn.reads.is_empty(),
            "no value read under way at a transfer"
        );
        let image = BankImage::new(point, membership.to_words(point), service);
        self.membership.adopt(membership);
        self.next_apply = point;
        self.members_moved();
        assert_eq!(self.next_apply, point, "resumed at the snapshot's point");
        image
    }

    /// Second step: the snapshot published in my bank so that I can serve it in turn, the
    /// learning of the slots below forgotten.
    pub(super) fn publish_resumed(&mut self, point: u64, image: BankImage) {
        if point > self.beat.points[usize::from(self.me)] {
            // So that I can serve it in turn. A write of my own older snapshot under way
            // is dropped: the new one restamps the same bank first (lemma (consistent
            // snapshot) holds for the words it left).
            self.snap.writing = None;
            self.start_snapshot_write(image);
        }
        self.snap.behind = false;
        self.snap.recovering = false;
        self.learn.catch_up = None;
        self.learn.repair = None;
        self.learn.stuck_since = None;
        self.learn.streak = false;
        self.learn.written.retain(|&s, _| s >= point);
        for words in &mut self.learn.words {
            words.retain(|&s, _| s >= point);
        }
        self.learn.last_progress = self.now;
        self.moved = true;
    }
}
