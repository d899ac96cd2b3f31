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

use super::value::{from_words, words_for};

/// A snapshot's stamp.
pub fn stamp(point: u64) -> u64 {
    point
        .checked_add(1)
        .expect("a snapshot point below 2^64 - 1")
}

/// The words of a bank holding the snapshot `bytes` of `point`, content padded to
/// `content_words`: begin stamp, point, length, content, end stamp. The reference the
/// tests hold [`BankImage`] to (a replica writes banks through it, word by word).
#[cfg(test)]
pub fn bank_words(point: u64, bytes: &[u8], content_words: u32) -> Vec<u64> {
    let content = super::value::to_words(bytes);
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

/// A bank's words computed one at a time, for a snapshot written over several turns
/// ([`super::Replica::snapshot_taken`]): begin stamp, point, length, then the content —
/// the membership's words (what a copier's [`super::membership::Membership::unwrap_snapshot`]
/// reads first), then `service` — without the padding, and without copying `service` into
/// words; the end stamp goes to the bank's last word.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BankImage {
    point: u64,
    membership: Vec<u64>,
    service: Vec<u8>,
}

impl BankImage {
    /// The image of the snapshot of `point` whose content is `membership`, then `service`.
    pub fn new(point: u64, membership: Vec<u64>, service: Vec<u8>) -> BankImage {
        BankImage {
            point,
            membership,
            service,
        }
    }

    /// Its point.
    pub fn point(&self) -> u64 {
        self.point
    }

    /// The words that hold something before the end stamp: begin stamp, point, length,
    /// content.
    pub fn used(&self) -> usize {
        3 + self.membership.len() + words_for(self.service.len())
    }

    /// The content's length in bytes (the bank's length word): the membership's words,
    /// then the service's bytes.
    pub fn len_bytes(&self) -> usize {
        8 * self.membership.len() + self.service.len()
    }

    /// Word `i < used()` of the bank; the end stamp is [`stamp`] of the point.
    pub fn word(&self, i: usize) -> u64 {
        assert!(i < self.used(), "word {i} of {}", self.used());
        let head = self.membership.len();
        match i {
            0 => stamp(self.point),
            1 => self.point,
            2 => self.len_bytes() as u64,
            _ if i - 3 < head => self.membership[i - 3],
            _ => {
                let at = 8 * (i - 3 - head);
                let bytes = &self.service[at..self.service.len().min(at + 8)];
                let mut word = [0; 8];
                word[..bytes.len()].copy_from_slice(bytes);
                u64::from_le_bytes(word)
            }
        }
    }
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
    fn an_image_is_the_bank_without_its_padding() {
        let membership = vec![1, 0, 0b111];
        let service = b"hello, ring: eleven bytes and more".to_vec();
        let mut content: Vec<u8> = membership
            .iter()
            .flat_map(|w: &u64| w.to_le_bytes())
            .collect();
        content.extend_from_slice(&service);
        let whole = bank_words(41, &content, 12);
        let image = BankImage::new(41, membership, service);
        assert_eq!(image.used(), 3 + 3 + 5);
        let words: Vec<u64> = (0..image.used()).map(|i| image.word(i)).collect();
        assert_eq!(words, whole[..image.used()], "the same words");
        assert!(whole[image.used()..whole.len() - 1].iter().all(|&w| w == 0));
        assert_eq!(
            whole[whole.len() - 1],
            stamp(image.point()),
            "the end stamp"
        );
    }

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
