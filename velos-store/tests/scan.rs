//! The scan of a segment against every way its bytes can go wrong after a crash or on a
//! bad disk: a tail cut at any byte (a write that did not finish), any one bit flipped,
//! arbitrary bytes. Property: the scan keeps exactly the records that lie wholly before
//! the damage, cuts at the damaged record's first byte, never panics, and never hands out
//! a record that was not written.

use proptest::prelude::*;
use velos_store::segment::{Cut, HEADER_BYTES, Kind, append_record, header, scan};

/// A segment of `entries` from `first`, and where each record starts and ends.
fn build(first: u64, entries: &[(bool, Vec<u8>)]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut s = header(first).to_vec();
    let mut bounds = Vec::new();
    for (i, (config, bytes)) in entries.iter().enumerate() {
        let kind = if *config {
            Kind::Configuration
        } else {
            Kind::Service
        };
        let start = s.len();
        append_record(&mut s, first + i as u64, kind, bytes);
        bounds.push((start, s.len()));
    }
    (s, bounds)
}

fn entries() -> impl Strategy<Value = Vec<(bool, Vec<u8>)>> {
    prop::collection::vec(
        (any::<bool>(), prop::collection::vec(any::<u8>(), 0..64)),
        0..12,
    )
}

/// The scan's records are the first `n` entries, byte for byte.
fn holds_first(segment: &[u8], entries: &[(bool, Vec<u8>)], first: u64, n: usize) {
    let found = scan(segment);
    assert_eq!(found.records.len(), n, "{:?}", found.cut);
    for (i, r) in found.records.iter().enumerate() {
        assert_eq!(r.slot, first + i as u64);
        assert_eq!(&segment[r.bytes.clone()], &entries[i].1[..]);
        let kind = if entries[i].0 {
            Kind::Configuration
        } else {
            Kind::Service
        };
        assert_eq!(r.kind, kind);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_tail_cut_anywhere_keeps_the_whole_records_before_it(
        first in 0u64..1 << 40,
        entries in entries(),
        at in any::<prop::sample::Index>(),
    ) {
        let (s, bounds) = build(first, &entries);
        let k = at.index(s.len() + 1);
        let cut = &s[..k];
        let whole = bounds.iter().filter(|&&(_, end)| end <= k).count();
        if k < HEADER_BYTES {
            prop_assert!(matches!(scan(cut).cut, Some((0, Cut::Header(_)))));
            prop_assert!(scan(cut).records.is_empty());
        } else {
            holds_first(cut, &entries, first, whole);
            let found = scan(cut);
            let boundary = k == HEADER_BYTES || bounds.iter().any(|&(_, end)| end == k);
            if boundary {
                prop_assert_eq!(found.cut, None);
                prop_assert_eq!(found.valid_bytes, k);
            } else {
                // Torn, at the first byte of the record cut short.
                let start = bounds[whole].0;
                prop_assert!(
                    matches!(found.cut, Some((at, Cut::Torn { .. })) if at == start),
                    "torn at {}: {:?}", start, found.cut
                );
                prop_assert_eq!(found.valid_bytes, start);
            }
        }
    }

    #[test]
    fn a_flipped_bit_cuts_at_the_record_that_holds_it(
        first in 0u64..1 << 40,
        entries in entries().prop_filter("a record to flip", |e| !e.is_empty()),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let (mut s, bounds) = build(first, &entries);
        let k = at.index(s.len());
        s[k] ^= 1 << bit;
        let found = scan(&s);
        match bounds.iter().position(|&(start, end)| start <= k && k < end) {
            // In the header: a foreign header, or another first slot that record 0 breaks.
            None => {
                prop_assert!(k < HEADER_BYTES);
                prop_assert!(found.records.is_empty());
                prop_assert!(found.cut.is_some());
            }
            Some(i) => {
                holds_first(&s, &entries, first, i);
                let (start, _) = bounds[i];
                prop_assert!(matches!(found.cut, Some((at, _)) if at == start), "{:?}", found.cut);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_yield_only_checksummed_records(
        first in any::<u64>(),
        garbage in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut s = header(first).to_vec();
        s.extend_from_slice(&garbage);
        let found = scan(&s);
        prop_assert!(found.valid_bytes <= s.len());
        // Random bytes pass a 32-bit checksum about once in four billion records.
        prop_assert!(found.records.is_empty());
        let _ = scan(&garbage);
    }
}
