//! Several commands in one decided value: the frame codec and the packing of waiting
//! commands into batches.
//!
//! A batch entry is one tag byte ([`BATCH_TAG`]) followed by frames, each a command's
//! length (LEB128, at most 5 bytes) and its bytes. The tag tells a batch from a leader's
//! no-op (an empty entry) and from anything else; an entry is decoded whole, before any of
//! its commands is applied, so a malformed entry is skipped as a unit on every replica
//! alike.

use std::collections::VecDeque;

/// The first byte of every batch entry of plain commands (format version 1).
pub const BATCH_TAG: u8 = 0xB1;

/// The first byte of a batch of session commands: each frame is a session envelope
/// (the session's id and the command's sequence number, LEB128) and the command.
pub const SESSION_BATCH_TAG: u8 = 0xB3;

/// The largest LEB128 encoding of a `u32`.
const LEN_BYTES_MAX: usize = 5;

/// Why an entry is not a batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchDecodeError {
    /// The entry is empty: a no-op a leader wrote to fill a gap, not a batch.
    #[error("an empty entry is a no-op, not a batch")]
    Empty,
    /// The first byte is neither [`BATCH_TAG`] nor [`SESSION_BATCH_TAG`].
    #[error("entry tag {0:#04x} is not a batch's ({BATCH_TAG:#04x} or {SESSION_BATCH_TAG:#04x})")]
    UnknownTag(u8),
    /// The tag is followed by no command.
    #[error("a batch without commands")]
    NoCommands,
    /// Frame `frame`'s length prefix runs past the entry's end or past 32 bits.
    #[error("frame {frame}: the length prefix is truncated or longer than 32 bits")]
    BadLength {
        /// The frame's position in the batch.
        frame: u32,
    },
    /// Frame `frame` announces more bytes than the entry has left.
    #[error("frame {frame}: {need} bytes announced, {have} left")]
    Truncated {
        /// The frame's position in the batch.
        frame: u32,
        /// Bytes announced.
        need: usize,
        /// Bytes left in the entry.
        have: usize,
    },
}

/// LEB128 (a frame's length here, a session envelope's fields in `session.rs`): the
/// engine's encoding, so that a log holds one.
pub(crate) use velos_core::leb128::{push as push_leb128, take as take_leb128};

/// Bytes of the LEB128 encoding of `len`.
pub fn len_bytes(len: usize) -> usize {
    let mut n = 1;
    let mut rest = len >> 7;
    while rest != 0 {
        n += 1;
        rest >>= 7;
    }
    n
}

/// The largest command that fits alone in an entry of `max_entry_bytes`; `None` if not
/// even an empty one does.
pub fn max_command_bytes(max_entry_bytes: usize) -> Option<usize> {
    // The tag, then the length: the largest len with 1 + len_bytes(len) + len <= max.
    let room = max_entry_bytes.checked_sub(1)?;
    // The shortest length prefix that works leaves the most room.
    let fit = (1..=LEN_BYTES_MAX)
        .filter_map(|k| room.checked_sub(k))
        .find(|&len| len_bytes(len) + len <= room)?;
    assert!(
        1 + len_bytes(fit) + fit <= max_entry_bytes,
        "the command fits"
    );
    Some(fit)
}

/// An entry being packed: commands are appended while they fit in `max_bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchBuilder {
    bytes: Vec<u8>,
    commands: u32,
    max_bytes: usize,
}

impl BatchBuilder {
    /// An empty batch of at most `max_bytes` encoded bytes.
    pub fn new(max_bytes: usize) -> BatchBuilder {
        BatchBuilder::tagged(max_bytes, BATCH_TAG)
    }

    /// An empty batch of session frames ([`SESSION_BATCH_TAG`]).
    pub fn sessions(max_bytes: usize) -> BatchBuilder {
        BatchBuilder::tagged(max_bytes, SESSION_BATCH_TAG)
    }

    fn tagged(max_bytes: usize, tag: u8) -> BatchBuilder {
        assert!(max_bytes >= 2, "a batch holds at least an empty command");
        BatchBuilder {
            bytes: vec![tag],
            commands: 0,
            max_bytes,
        }
    }

    /// Whether `command` fits after what is packed already.
    pub fn fits(&self, command: &[u8]) -> bool {
        self.bytes.len() + len_bytes(command.len()) + command.len() <= self.max_bytes
            && u32::try_from(command.len()).is_ok()
    }

    /// Appends `command`; `false` (and nothing appended) if it does not fit.
    pub fn push(&mut self, command: &[u8]) -> bool {
        if !self.fits(command) {
            return false;
        }
        let before = self.bytes.len();
        push_leb128(&mut self.bytes, command.len() as u64);
        self.bytes.extend_from_slice(command);
        self.commands += 1;
        assert_eq!(
            self.bytes.len(),
            before + len_bytes(command.len()) + command.len()
        );
        true
    }

    /// Commands packed.
    pub fn commands(&self) -> u32 {
        self.commands
    }

    /// The entry bytes (at most `max_bytes`).
    pub fn finish(self) -> Vec<u8> {
        assert!(self.commands > 0, "a batch holds a command");
        assert!(self.bytes.len() <= self.max_bytes, "a batch fits its bound");
        self.bytes
    }
}

/// The frames of a batch entry, in order: commands, or session frames when `sessions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// The frames are session envelopes around commands ([`SESSION_BATCH_TAG`]).
    pub sessions: bool,
    /// The frames.
    pub commands: Vec<&'a [u8]>,
}

/// The frames of a batch entry, in order.
pub fn decode(entry: &[u8]) -> Result<Decoded<'_>, BatchDecodeError> {
    let (&tag, mut rest) = entry.split_first().ok_or(BatchDecodeError::Empty)?;
    if tag != BATCH_TAG && tag != SESSION_BATCH_TAG {
        return Err(BatchDecodeError::UnknownTag(tag));
    }
    let mut commands = Vec::new();
    while !rest.is_empty() {
        let frame = commands.len() as u32;
        let (len, body) =
            take_leb128(rest, LEN_BYTES_MAX).ok_or(BatchDecodeError::BadLength { frame })?;
        let need = usize::try_from(len)
            .ok()
            .filter(|_| len <= u64::from(u32::MAX))
            .ok_or(BatchDecodeError::BadLength { frame })?;
        if body.len() < need {
            return Err(BatchDecodeError::Truncated {
                frame,
                need,
                have: body.len(),
            });
        }
        commands.push(&body[..need]);
        rest = &body[need..];
    }
    if commands.is_empty() {
        return Err(BatchDecodeError::NoCommands);
    }
    Ok(Decoded {
        sessions: tag == SESSION_BATCH_TAG,
        commands,
    })
}

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
    fn commands_round_trip_through_a_batch() {
        let commands: Vec<Vec<u8>> = vec![b"a".to_vec(), Vec::new(), vec![7; 300], vec![1; 127]];
        let mut b = BatchBuilder::new(1000);
        for c in &commands {
            assert!(b.push(c));
        }
        assert_eq!(b.commands(), 4);
        let entry = b.finish();
        assert_eq!(entry[0], BATCH_TAG);
        let decoded = decode(&entry).expect("a batch");
        assert!(!decoded.sessions);
        assert_eq!(
            decoded.commands,
            commands.iter().map(Vec::as_slice).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_batch_never_exceeds_its_bound() {
        let mut b = BatchBuilder::new(10);
        assert!(b.push(b"abcd")); // 1 + 1 + 4 = 6
        assert!(!b.push(b"abcd"), "6 + 5 > 10");
        assert!(b.push(b"ab")); // 6 + 3 = 9
        assert!(!b.push(b"a"), "9 + 2 > 10");
        assert!(b.push(b""), "9 + 1 = 10");
        assert_eq!(b.finish().len(), 10);
    }

    #[test]
    fn the_largest_single_command_fits_exactly() {
        for max in 2..600 {
            let fit = max_command_bytes(max).expect("room for one byte of length");
            let mut b = BatchBuilder::new(max);
            assert!(b.push(&vec![0; fit]), "{max}: {fit} fits");
            let mut b = BatchBuilder::new(max);
            assert!(!b.push(&vec![0; fit + 1]), "{max}: {} does not", fit + 1);
        }
        assert_eq!(max_command_bytes(1), None);
        assert_eq!(max_command_bytes(64), Some(62));
        assert_eq!(max_command_bytes(256), Some(253));
    }

    #[test]
    fn malformed_entries_are_typed_errors() {
        assert_eq!(decode(b""), Err(BatchDecodeError::Empty));
        assert_eq!(decode(b"P\x01k"), Err(BatchDecodeError::UnknownTag(b'P')));
        assert_eq!(decode(&[BATCH_TAG]), Err(BatchDecodeError::NoCommands));
        assert_eq!(
            decode(&[BATCH_TAG, 3, b'a']),
            Err(BatchDecodeError::Truncated {
                frame: 0,
                need: 3,
                have: 1
            })
        );
        assert_eq!(
            decode(&[BATCH_TAG, 1, b'a', 0x80]),
            Err(BatchDecodeError::BadLength { frame: 1 })
        );
        assert_eq!(
            decode(&[BATCH_TAG, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(BatchDecodeError::BadLength { frame: 0 })
        );
        assert_eq!(
            decode(&[BATCH_TAG, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            Err(BatchDecodeError::BadLength { frame: 0 }),
            "above 32 bits"
        );
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics() {
        // A cheap exhaustive sweep of short entries: every 3-byte entry after the tag.
        for a in 0..=255u8 {
            for b in [0u8, 1, 2, 0x7f, 0x80, 0xff] {
                for c in [0u8, 1, 0x80, 0xff] {
                    let _ = decode(&[BATCH_TAG, a, b, c]);
                }
            }
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
