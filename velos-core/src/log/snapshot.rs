//! Snapshots in registered memory, for replicas that fell off the ring ([`super::ring`]).
//!
//! Every replica has a snapshot region: a header naming the bank that holds its newest
//! snapshot (1 + bank, 0 before the first), and two banks, each a begin stamp, the snapshot
//! point (every log instance below it is in the snapshot), the length in bytes, the content
//! in little-endian words, and an end stamp. A stamp is point + 1 (never 0). The owner
//! writes a new snapshot with CPU stores into the bank the header does not name — begin
//! stamp, point, length, content, end stamp — then the header, and only then publishes the
//! point in its heartbeat word (its stores land in program order). Points only grow.
//!
//! A copier gets the header, then the end stamp of the bank it names, then (once complete)
//! the point, length and content, then the begin stamp. Lemma (consistent snapshot): when
//! both stamps read equal, non-zero and equal to point + 1, the words read are the snapshot
//! of that point. Proof: as the value buffers' lemma ([`super::value`]): the end stamp read
//! is write j's, which landed after j's content; every later write of the bank lands its
//! begin stamp, different from j's (points grow), before any of its content, so a content
//! word of a later write implies a begin stamp read other than j's.
//!
//! The region needs no lock. A node lock (rdma-rmw §4.4) would also keep a copier's reads
//! consistent, but a copier that crashed inside it would leave the owner unable to write a
//! snapshot ever again (a ticket lock has no way out); with stamps a crash on either side
//! costs nothing but the copy under way, which the copier restarts from another replica.
//! Two banks let the owner write a new snapshot while a copier reads the previous one.

use super::value::{from_words, to_words};

/// A snapshot's stamp.
pub fn stamp(point: u64) -> u64 {
    point
        .checked_add(1)
        .expect("a snapshot point below 2^64 - 1")
}

/// The words of a bank holding the snapshot `bytes` of `point`, content padded to
/// `content_words`: begin stamp, point, length, content, end stamp.
pub fn bank_words(point: u64, bytes: &[u8], content_words: u32) -> Vec<u64> {
    let content = to_words(bytes);
    assert!(
        content.len() <= content_words as usize,
        "{} bytes in {content_words} words",
        bytes.len()
    );
    let mut words = vec![stamp(point), point, bytes.len() as u64];
    words.extend(&content);
    words.resize(3 + content_words as usize, 0);
    words.push(stamp(point));
    assert_eq!(words.len(), content_words as usize + 4, "a whole bank");
    words
}

/// The snapshot a copied bank holds, if its stamps agree (lemma (consistent snapshot)) and
/// its length fits: `(point, bytes)`.
pub fn read_bank(words: &[u64]) -> Option<(u64, Vec<u8>)> {
    assert!(words.len() >= 4, "a bank has stamps, point and length");
    let (begin, end) = (words[0], words[words.len() - 1]);
    let (point, len) = (words[1], words[2]);
    let content = &words[3..words.len() - 1];
    let consistent = begin == end && end != 0 && point.checked_add(1) == Some(end);
    let fits = usize::try_from(len).is_ok_and(|l| l <= content.len() * 8);
    (consistent && fits).then(|| (point, from_words(content, len as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bank_round_trips_and_a_torn_one_is_refused() {
        let words = bank_words(41, b"hello, ring", 3);
        assert_eq!(words.len(), 7);
        assert_eq!(read_bank(&words), Some((41, b"hello, ring".to_vec())));
        let mut torn = words.clone();
        torn[0] = stamp(43); // a later write's begin stamp landed
        assert_eq!(read_bank(&torn), None);
        let mut unwritten = words.clone();
        unwritten[0] = 0;
        unwritten[6] = 0;
        assert_eq!(read_bank(&unwritten), None, "never written");
        let mut long = words;
        long[2] = 25;
        assert_eq!(read_bank(&long), None, "longer than the bank");
    }
}
