//! The packing of waiting commands into batches: the embedding's queue of commands in
//! front of the engine. The entry format (the frame codec) is the engine's,
//! [`velos_core::batch`], re-exported here.

use std::collections::VecDeque;

pub use velos_core::batch::{
    BATCH_TAG, BatchBuilder, BatchDecodeError, Decoded, SESSION_BATCH_TAG, decode, len_bytes,
    max_command_bytes,
};

/// LEB128 (a frame's length, a session envelope's fields in `session.rs`): the engine's
/// encoding, so that a log holds one.
pub(crate) use velos_core::leb128::{push as push_leb128, take as take_leb128};

/// When a leader's waiting commands go out as a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// Commands per batch at most.
    pub max_commands: u32,
    /// Encoded bytes per batch at most (at most the log's `max_value_bytes`).
    pub max_bytes: usize,
    /// How long the oldest waiting command may wait for others to join its batch (ns of
    /// the backend's clock); 0: a batch goes out as soon as the pipeline has room.
    pub max_delay_ns: u64,
}

/// A packed batch: its entry bytes, and each command's arrival time and tag, in batch
/// order.
pub type Packed<T> = (Vec<u8>, Vec<(u64, T)>);

/// Commands waiting to be packed, oldest first: `(command, whether it is a session
/// frame, when it arrived, T)`. A batch holds one kind: plain commands or session frames.
#[derive(Debug)]
pub struct Queue<T> {
    waiting: VecDeque<(Vec<u8>, bool, u64, T)>,
    bytes: usize,
}

impl<T> Default for Queue<T> {
    fn default() -> Queue<T> {
        Queue {
            waiting: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<T> Queue<T> {
    /// Adds a command (a session frame if `session`) that arrived at `now_ns`.
    pub fn push(&mut self, command: Vec<u8>, session: bool, now_ns: u64, tag: T) {
        self.bytes += len_bytes(command.len()) + command.len();
        self.waiting.push_back((command, session, now_ns, tag));
    }

    /// Commands waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Everything waiting, oldest first (the queue is left empty).
    pub fn drain(&mut self) -> impl Iterator<Item = (Vec<u8>, u64, T)> + '_ {
        self.bytes = 0;
        self.waiting.drain(..).map(|(c, _, at, tag)| (c, at, tag))
    }

    /// Whether a batch should go out at `now_ns`: a full batch waits, or the oldest
    /// command waited `max_delay_ns`.
    pub fn due(&self, packing: &Packing, now_ns: u64) -> bool {
        let Some(&(_, _, oldest, _)) = self.waiting.front() else {
            return false;
        };
        packing.max_delay_ns == 0
            || now_ns.saturating_sub(oldest) >= packing.max_delay_ns
            || self.waiting.len() >= packing.max_commands as usize
            || 1 + self.bytes >= packing.max_bytes
    }

    /// Packs the oldest commands into one batch: its bytes, and each command's arrival
    /// time and tag, in batch order. `None` if nothing waits.
    pub fn pack(&mut self, packing: &Packing) -> Option<Packed<T>> {
        assert!(packing.max_commands > 0, "a batch holds a command");
        let sessions = self.waiting.front()?.1;
        let mut builder = if sessions {
            BatchBuilder::sessions(packing.max_bytes)
        } else {
            BatchBuilder::new(packing.max_bytes)
        };
        let mut taken = Vec::new();
        while let Some((command, session, _, _)) = self.waiting.front() {
            let full = builder.commands() >= packing.max_commands;
            if full || *session != sessions || !builder.push(command) {
                break;
            }
            let (command, _, at, tag) = self.waiting.pop_front().expect("a front");
            self.bytes -= len_bytes(command.len()) + command.len();
            taken.push((at, tag));
        }
        if taken.is_empty() {
            return None; // the front does not fit alone: refused before it was queued
        }
        assert_eq!(
            taken.len() as u32,
            builder.commands(),
            "one tag per command"
        );
        Some((builder.finish(), taken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packing(max_commands: u32, max_bytes: usize) -> Packing {
        Packing {
            max_commands,
            max_bytes,
            max_delay_ns: 0,
        }
    }

    #[test]
    fn the_queue_packs_in_order_within_both_bounds() {
        let mut q = Queue::default();
        for i in 0..10u8 {
            q.push(vec![i; 3], false, u64::from(i), i);
        }
        // 1 + 4 per command: 3 commands in 13 bytes, at most 2 by count.
        let (entry, tags) = q.pack(&packing(2, 13)).expect("a batch");
        assert_eq!(tags.iter().map(|&(_, t)| t).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(decode(&entry).unwrap().commands, [&[0u8; 3][..], &[1; 3]]);
        let (_, tags) = q.pack(&packing(100, 13)).expect("a batch");
        assert_eq!(tags.iter().map(|&(_, t)| t).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(q.len(), 5);
    }

    #[test]
    fn plain_commands_and_session_frames_go_in_batches_of_their_own() {
        let mut q = Queue::default();
        q.push(b"a".to_vec(), false, 0, 0);
        q.push(b"s".to_vec(), true, 1, 1);
        q.push(b"t".to_vec(), true, 2, 2);
        q.push(b"b".to_vec(), false, 3, 3);
        let kinds: Vec<(bool, usize)> = std::iter::from_fn(|| q.pack(&packing(10, 100)))
            .map(|(entry, tags)| (decode(&entry).unwrap().sessions, tags.len()))
            .collect();
        assert_eq!(kinds, [(false, 1), (true, 2), (false, 1)]);
    }

    #[test]
    fn a_batch_is_due_when_full_or_when_its_oldest_command_waited_enough() {
        let slow = Packing {
            max_commands: 3,
            max_bytes: 100,
            max_delay_ns: 1_000,
        };
        let mut q = Queue::default();
        assert!(!q.due(&slow, 0), "nothing waits");
        q.push(b"x".to_vec(), false, 10, ());
        assert!(!q.due(&slow, 500));
        assert!(q.due(&slow, 1_010), "waited the delay");
        q.push(b"y".to_vec(), false, 20, ());
        q.push(b"z".to_vec(), false, 30, ());
        assert!(q.due(&slow, 40), "full by count");
        assert!(q.due(&packing(3, 100), 10), "no delay: at once");
    }
}
