//! Log values in a value buffer: a stamp word, `proposal << 32 | length`, then the bytes in
//! little-endian words. The proposer writes the stamp first and the content after it (puts
//! land in order), so a reader that reads the content and *then* the stamp knows the content
//! is the stamped attempt's when the stamp still matches.

/// The stamp word of a buffer written for `proposal` with `len` bytes.
pub fn stamp(proposal: u64, len: usize) -> u64 {
    assert!(
        proposal <= u64::from(u32::MAX) && len <= u32::MAX as usize,
        "stamp fields of 32 bits"
    );
    proposal << 32 | len as u64
}

/// The proposal and length of a stamp word.
pub fn unstamp(word: u64) -> (u64, usize) {
    (word >> 32, (word & u64::from(u32::MAX)) as usize)
}

/// Words needed for `len` bytes.
pub fn words_for(len: usize) -> usize {
    len.div_ceil(8)
}

/// The content words of `bytes`, the last one zero-padded.
pub fn to_words(bytes: &[u8]) -> Vec<u64> {
    let words: Vec<u64> = bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();
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
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bytes_round_trip_through_words(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let words = to_words(&bytes);
            prop_assert_eq!(from_words(&words, bytes.len()), bytes);
        }

        #[test]
        fn stamps_round_trip(proposal in 0..=u64::from(u32::MAX), len in 0..=u32::MAX as usize) {
            prop_assert_eq!(unstamp(stamp(proposal, len)), (proposal, len));
        }
    }
}
