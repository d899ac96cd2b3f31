//! Log values in a value buffer: a begin stamp, the bytes in little-endian words, an end
//! stamp. A stamp is `tag:8 | epoch:8 | proposal:24 | length:24`: the ring lap of the
//! instance written (see [`super::ring`]), then the *key* (epoch, proposal), which grows
//! with every write of one proposer to one instance's buffer.
//!
//! The proposer writes the begin stamp, the content, then the end stamp: one multi-word put
//! (`Op::PutWords`, whose words land in address order) when the buffer's rest up to the end
//! stamp is short, so a stable leader posts one work request per acceptor for a value; else
//! the end stamp in a second put behind it (puts on one queue pair land in order). A reader
//! gets the end stamp, then (after it completed) the content, then the begin stamp. Lemma
//! (consistent read): when the begin stamp reads equal to the end stamp, or 0, the content
//! read is the end stamp's write j. Proof: j's end stamp landed after j's content; every
//! later write j + 1 — of the same instance or of a later lap's — lands its begin stamp
//! (non-zero: its tag or key differs from j's) before any of its content, so if any content
//! word read came from j + 1 or later, the begin stamp read after it shows j + 1 or later:
//! neither 0 nor j's (tags tell laps apart, keys grow within one).
//!
//! A write of the content the buffer already holds — a proposer that proposes the same
//! value again in a later attempt, or adopts its own — is a *restamp*: the end stamp,
//! then the begin stamp, both flagged [`RESTAMP_FLAG`], and no content. A writer that
//! crashed in the middle of a full rewrite left a begin stamp newer than its end stamp
//! and a value nobody could read again, though its word named it accepted (and maybe
//! chosen); a restamp torn half-way leaves the end stamp newer than the begin stamp, which
//! a reader takes. Lemma (restamp): when the end stamp read is a restamp r and the begin
//! stamp read is of the same lap and length with a smaller key, the content read is r's
//! (the writer's last full write's). Proof: r is posted only when the writer's last full
//! write to this buffer was posted whole on the same queue pair (not dropped), so it
//! landed before r's end stamp; a later full write lands its begin stamp (a larger key
//! than r's) before any of its content, and a later restamp's begin stamp is r's or
//! larger; so if any content word read came from a later write, the begin stamp read after
//! it has a key of at least r's — not smaller.

/// Bits of the length in a stamp.
pub const LEN_BITS: u32 = 24;

/// The length field's top bit marks a configuration entry ([`super::membership`]): value
/// lengths stay below it.
pub const CONFIG_FLAG: usize = 1 << (LEN_BITS - 1);

/// The length field's next bit marks a restamp (see the lemma above): value lengths stay
/// below it too.
pub const RESTAMP_FLAG: usize = 1 << (LEN_BITS - 2);

/// Bits of the proposal number in a stamp (the log's word layout must not use more).
pub const PROPOSAL_BITS: u32 = 24;

/// The stamp word of a buffer written for the instance of lap `tag`, in `epoch`, for
/// `proposal`, with `len` bytes.
pub fn stamp(tag: u16, epoch: u32, proposal: u64, len: usize) -> u64 {
    assert!(
        tag < 256 && epoch < 256 && proposal < 1 << PROPOSAL_BITS && len < 1 << LEN_BITS,
        "stamp fields: tag and epoch of 8 bits, proposal and length of 24"
    );
    u64::from(tag) << 56 | u64::from(epoch) << 48 | proposal << LEN_BITS | len as u64
}

/// The key of `(epoch, proposal)`: how stamps of one instance are ordered.
pub fn key(epoch: u32, proposal: u64) -> u64 {
    stamp(0, epoch, proposal, 0) >> LEN_BITS
}

/// The tag, key and length of a stamp word.
pub fn unstamp(word: u64) -> (u16, u64, usize) {
    let key = (word >> LEN_BITS) & ((1 << 32) - 1);
    (
        (word >> 56) as u16,
        key,
        (word & ((1 << LEN_BITS) - 1)) as usize,
    )
}

/// Whether a read whose begin stamp read `begin` and end stamp read `end` got the end
/// stamp's content whole: lemma (consistent read) — equal stamps, or a begin stamp never
/// written — or lemma (restamp) — a restamp's end stamp over an older begin stamp of the
/// same lap and length.
pub fn consistent(begin: u64, end: u64) -> bool {
    let (tag, key, field) = unstamp(end);
    let (b_tag, b_key, b_field) = unstamp(begin);
    let restamped = field & RESTAMP_FLAG != 0
        && b_tag == tag
        && b_key < key
        && b_field & !RESTAMP_FLAG == field & !RESTAMP_FLAG;
    begin == end || begin == 0 || restamped
}

/// Words needed for `len` bytes.
pub fn words_for(len: usize) -> usize {
    len.div_ceil(8)
}

/// The words of `bytes`, as [`to_words`] makes them, without allocating.
pub fn word_iter(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    // Whole words straight from their bytes; only the last, short one is padded.
    let whole = bytes.chunks_exact(8);
    let rest = whole.remainder();
    let last = (!rest.is_empty()).then(|| {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        u64::from_le_bytes(w)
    });
    whole
        .map(|c| u64::from_le_bytes(c.try_into().expect("a chunk of 8 bytes")))
        .chain(last)
}

/// The content words of `bytes`, the last one zero-padded.
pub fn to_words(bytes: &[u8]) -> Vec<u64> {
    let words: Vec<u64> = word_iter(bytes).collect();
    assert_eq!(words.len(), words_for(bytes.len()), "one word per 8 bytes");
    words
}

/// The first `len` bytes of `words`.
pub fn from_words(words: &[u64], len: usize) -> Vec<u8> {
    assert!(
        words.len() * 8 >= len,
        "{len} bytes in {} words",
        words.len()
    );
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.truncate(len);
    bytes
}

#[cfg(test)]
mod tests {

    #[test]
    fn torn_full_rewrites_are_refused_and_torn_restamps_taken() {
        let old = stamp(3, 0, 1, 10);
        let full = stamp(3, 0, 13, 10);
        let re = stamp(3, 0, 13, 10 | RESTAMP_FLAG);
        assert!(consistent(old, old) && consistent(0, old) && consistent(re, re));
        // A full rewrite torn after its begin stamp: the content may be mixed.
        assert!(!consistent(full, old));
        // A restamp torn after its end stamp: the content was not touched.
        assert!(consistent(old, re));
        // A begin stamp newer than a restamp's end: a later write began.
        assert!(!consistent(stamp(3, 0, 20, 10), re));
        assert!(!consistent(stamp(3, 0, 20, 10 | RESTAMP_FLAG), re));
        // Another lap's or another length's begin stamp is another write.
        assert!(!consistent(stamp(2, 0, 1, 10), re));
        assert!(!consistent(stamp(3, 0, 1, 11), re));
    }

    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bytes_round_trip_through_words(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let words = to_words(&bytes);
            prop_assert_eq!(from_words(&words, bytes.len()), bytes);
        }

        #[test]
        fn stamps_round_trip(
            tag in 0..256u16,
            epoch in 0..256u32,
            proposal in 0..(1u64 << PROPOSAL_BITS),
            len in 0..(1usize << LEN_BITS),
        ) {
            prop_assert_eq!(
                unstamp(stamp(tag, epoch, proposal, len)),
                (tag, key(epoch, proposal), len)
            );
        }

        #[test]
        fn keys_order_by_epoch_then_proposal(
            a in (0..256u32, 0..(1u64 << PROPOSAL_BITS)),
            b in (0..256u32, 0..(1u64 << PROPOSAL_BITS)),
        ) {
            prop_assert_eq!(key(a.0, a.1).cmp(&key(b.0, b.1)), a.cmp(&b));
        }
    }
}
