//! Several commands in one entry: the frame codec of batch entries, shared by the engine
//! ([`crate::log::Replica::submit`] packs what waits into one entry) and the embedding.
//!
//! A batch entry is one tag byte ([`BATCH_TAG`]) followed by frames, each a command's
//! length (LEB128, at most 5 bytes) and its bytes. The tag tells a batch from a leader's
//! no-op (an empty entry) and from anything else; an entry is decoded whole, before any of
//! its commands is applied, so a malformed entry is skipped as a unit on every replica
//! alike.

/// The first byte of every batch entry of plain commands (format version 1).
pub const BATCH_TAG: u8 = 0xB1;

/// The first byte of a batch of session commands: each frame is a session envelope
/// (the session's id and the command's sequence number, LEB128) and the command.
pub const SESSION_BATCH_TAG: u8 = 0xB3;

/// The largest LEB128 encoding of a `u32`.
pub const LEN_BYTES_MAX: usize = 5;

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

use crate::leb128::{push as push_leb128, take as take_leb128};

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

/// Bytes a command of `len` bytes takes in a batch: its length prefix and itself.
pub fn framed_len(len: usize) -> usize {
    len_bytes(len) + len
}

/// Appends `command`'s frame (its length, then its bytes) to a batch's `bytes`.
pub fn push_frame(bytes: &mut Vec<u8>, command: &[u8]) {
    let before = bytes.len();
    push_leb128(bytes, command.len() as u64);
    bytes.extend_from_slice(command);
    debug_assert_eq!(bytes.len(), before + framed_len(command.len()));
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
        self.bytes.len() + framed_len(command.len()) <= self.max_bytes
            && u32::try_from(command.len()).is_ok()
    }

    /// Appends `command`; `false` (and nothing appended) if it does not fit.
    pub fn push(&mut self, command: &[u8]) -> bool {
        if !self.fits(command) {
            return false;
        }
        let before = self.bytes.len();
        push_frame(&mut self.bytes, command);
        self.commands += 1;
        assert_eq!(self.bytes.len(), before + framed_len(command.len()));
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
