//! The staging ring of a lane: registered send buffers that an `Op::PutWords` too long
//! to go inline is copied into when it is posted, so that the NIC reads the words the
//! process posted, whatever the process does with its `Words` afterwards.
//!
//! The ring is [`SLOTS`] slots of [`SLOT_BYTES`] bytes; a payload takes the first run of
//! consecutive free slots long enough for it, and holds them until the completion of its
//! request has been seen (a queue pair completes in order, so "its queue pair has
//! completed its position" says so). A payload longer than the whole ring is refused.

use super::error::VerbsError;
use super::memory::WordAddress;
use crate::ids::NodeId;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of one slot.
pub(super) const SLOT_BYTES: usize = 4096;
/// Slots of a ring: 64 KiB in all, the longest payload staged.
pub(super) const SLOTS: usize = 16;
/// Words of one slot.
const SLOT_WORDS: usize = SLOT_BYTES / 8;

/// The request whose payload a slot holds: its queue pair and position there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Holder {
    /// The target node of the queue pair.
    pub(super) target: NodeId,
    /// The request's position on the queue pair.
    pub(super) qp_seq: u64,
}

/// The registered staging buffer and which request holds each slot.
#[derive(Debug)]
pub(super) struct Staging {
    /// The registration. Declared before `words`, so that it is dropped (deregistered)
    /// before the words are freed.
    mr: Arc<MemoryRegion>,
    /// The slots' words, never moved or resized while registered. The NIC reads them by
    /// DMA; atomics, because it may read one slot while the CPU fills another.
    words: Box<[AtomicU64]>,
    /// Which request holds each slot.
    slots: Slots,
}

/// Per slot of a ring: the request that holds it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Slots(Vec<Option<Holder>>);

impl Slots {
    fn free() -> Slots {
        Slots(vec![None; SLOTS])
    }

    fn release(&mut self, done: impl Fn(Holder) -> bool) {
        for slot in &mut self.0 {
            if slot.is_some_and(&done) {
                *slot = None;
            }
        }
    }

    fn find(&self, slots: usize) -> Option<usize> {
        assert!((1..=SLOTS).contains(&slots));
        (0..=SLOTS - slots).find(|&first| self.0[first..first + slots].iter().all(Option::is_none))
    }

    fn hold(&mut self, first: usize, slots: usize, holder: Holder) {
        let run = &mut self.0[first..first + slots];
        assert!(run.iter().all(Option::is_none), "holding a held slot");
        run.fill(Some(holder));
    }
}

impl Staging {
    /// A ring of free slots, registered in `pd` (the NIC only reads it).
    pub(super) fn register(pd: &Arc<ProtectionDomain>) -> Result<Staging, VerbsError> {
        let len = SLOTS * SLOT_WORDS;
        let words: Box<[AtomicU64]> = (0..len).map(|_| AtomicU64::new(0)).collect();
        // SAFETY: the range is exactly the heap allocation of `words`, which the
        // `Staging` keeps, unmoved and unresized, until after the registration is dropped
        // (field order); the NIC only reads it, and the CPU writes it through atomics.
        let mr = unsafe {
            pd.reg_mr(
                words.as_ptr() as usize,
                len * size_of::<AtomicU64>(),
                AccessFlags::LocalWrite,
            )
        }
        .map_err(|e| VerbsError::verbs("ibv_reg_mr", e))?;
        let staging = Staging {
            mr,
            words,
            slots: Slots::free(),
        };
        assert_eq!(staging.words.len(), SLOTS * SLOT_WORDS);
        Ok(staging)
    }

    /// How many slots a payload of `words` words takes, or `None` if it does not fit the
    /// ring.
    pub(super) fn slots_for(words: usize) -> Option<usize> {
        let slots = words.div_ceil(SLOT_WORDS).max(1);
        (slots <= SLOTS).then_some(slots)
    }

    /// Frees every slot whose request `done` says has completed.
    pub(super) fn release(&mut self, done: impl Fn(Holder) -> bool) {
        self.slots.release(done);
    }

    /// Frees every slot (the lane's previous endpoint saw all its requests complete).
    pub(super) fn reset(&mut self) {
        self.slots = Slots::free();
    }

    /// The first slot of a run of `slots` free ones, if there is one.
    pub(super) fn find(&self, slots: usize) -> Option<usize> {
        self.slots.find(slots)
    }

    /// The requests holding slots, one entry per slot held.
    pub(super) fn holders(&self) -> Vec<Holder> {
        self.slots.0.iter().flatten().copied().collect()
    }

    /// Copies `payload` into the free slots from `first` on, held by `holder` until its
    /// completion is seen; where the NIC reads it (address and local key).
    pub(super) fn stage(&mut self, first: usize, payload: &[u64], holder: Holder) -> WordAddress {
        let slots = Staging::slots_for(payload.len()).expect("checked by the caller");
        self.slots.hold(first, slots, holder);
        let start = first * SLOT_WORDS;
        for (word, &value) in self.words[start..].iter().zip(payload) {
            word.store(value, Ordering::Relaxed);
        }
        // Handing the request to the NIC (a doorbell) orders these stores before its
        // reads; the fence says so to the compiler as well.
        std::sync::atomic::fence(Ordering::Release);
        let address = WordAddress {
            addr: self.words[start..].as_ptr() as u64,
            key: self.mr.lkey(),
        };
        assert_eq!(address.addr, self.mr.get_ptr() as u64 + 8 * start as u64);
        address
    }
}

#[cfg(test)]
mod tests {
    use super::{Holder, SLOT_WORDS, SLOTS, Slots, Staging};
    use crate::ids::NodeId;

    fn holder(target: u16, qp_seq: u64) -> Holder {
        Holder {
            target: NodeId(target),
            qp_seq,
        }
    }

    #[test]
    fn a_payload_takes_the_first_free_run_and_frees_it_once_complete() {
        let mut slots = Slots::free();
        slots.hold(0, 2, holder(1, 1));
        slots.hold(2, 1, holder(2, 1));
        assert_eq!(slots.find(1), Some(3));
        slots.hold(3, SLOTS - 3, holder(1, 2));
        assert_eq!(slots.find(1), None, "full");
        // Queue pair 1 completed position 1: its two slots are free again.
        slots.release(|h| h.target == NodeId(1) && h.qp_seq <= 1);
        assert_eq!(slots.find(2), Some(0));
        assert_eq!(slots.find(3), None, "slot 2 is still held");
        slots.release(|_| true);
        assert_eq!(slots, Slots::free());
        assert_eq!(slots.find(SLOTS), Some(0));
    }

    #[test]
    fn payloads_take_whole_slots_up_to_the_ring() {
        assert_eq!(Staging::slots_for(0), Some(1));
        assert_eq!(Staging::slots_for(9), Some(1));
        assert_eq!(Staging::slots_for(SLOT_WORDS), Some(1));
        assert_eq!(Staging::slots_for(SLOT_WORDS + 1), Some(2));
        assert_eq!(Staging::slots_for(SLOTS * SLOT_WORDS), Some(SLOTS));
        assert_eq!(Staging::slots_for(SLOTS * SLOT_WORDS + 1), None);
    }
}
