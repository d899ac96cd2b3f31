//! A segment file of the durable log: a 16-byte header, then records, each one applied
//! entry, in consecutive slots.
//!
//! ```text
//! header:  "VLSG" | version: u16 = 1 | reserved: u16 = 0 | first slot: u64
//! record:  length: u32 | crc32c: u32 | slot: u64 | kind: u8 | bytes
//! ```
//!
//! Little-endian throughout. `length` counts what follows the checksum (slot, kind and
//! bytes: at least 9); the checksum covers the length's four bytes and everything the
//! length counts, so a flipped bit in either is caught. A record's slot is its
//! predecessor's plus one (the header's first slot for the first record). [`scan`] stops
//! at the first record that is cut short, fails its checksum, breaks the slot sequence,
//! has an unknown kind or announces more than [`MAX_RECORD_BYTES`] (checked before
//! anything is allocated): the records before it are the segment's content, the rest is
//! reported, never used.

use std::ops::Range;

/// The first four bytes of every segment.
pub const MAGIC: [u8; 4] = *b"VLSG";

/// The format version this code writes and reads.
pub const VERSION: u16 = 1;

/// Bytes of a segment's header.
pub const HEADER_BYTES: usize = 16;

/// Bytes of a record before its payload: the length and the checksum.
pub const RECORD_PREFIX_BYTES: usize = 8;

/// Bytes of a record's payload before the entry's bytes: the slot and the kind.
const PAYLOAD_FIXED_BYTES: usize = 9;

/// The largest payload a record may announce (16 MiB): a length above it is corruption,
/// refused before anything is allocated for it.
pub const MAX_RECORD_BYTES: u32 = 16 << 20;

/// What an entry is to the log that applied it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A value for the service (a no-op is an empty one).
    Service,
    /// A configuration entry of the log's membership (the engine's own encoding).
    Configuration,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Service => 0,
            Kind::Configuration => 1,
        }
    }

    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Service),
            1 => Some(Kind::Configuration),
            _ => None,
        }
    }
}

/// The file name of the segment whose first slot is `first`.
pub fn file_name(first: u64) -> String {
    format!("seg-{first:020}")
}

/// A segment's header: the slot of its first record.
pub fn header(first_slot: u64) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&first_slot.to_le_bytes());
    h
}

/// Appends the record of the entry applied in `slot` to `out`; the bytes it took.
///
/// # Panics
/// If `bytes` is longer than a record holds ([`MAX_RECORD_BYTES`] less the slot and the
/// kind): the log's values are far smaller, so a caller that gets here broke its own
/// bound.
pub fn append_record(out: &mut Vec<u8>, slot: u64, kind: Kind, bytes: &[u8]) -> usize {
    let payload = PAYLOAD_FIXED_BYTES + bytes.len();
    let len = u32::try_from(payload)
        .ok()
        .filter(|&l| l <= MAX_RECORD_BYTES)
        .unwrap_or_else(|| panic!("an entry of {} bytes fits no record", bytes.len()));
    let start = out.len();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // the checksum, once the rest is in place
    out.extend_from_slice(&slot.to_le_bytes());
    out.push(kind.byte());
    out.extend_from_slice(bytes);
    let crc = checksum(&out[start..start + 4], &out[start + RECORD_PREFIX_BYTES..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    // Postcondition: the record is its prefix and its payload, nothing more.
    debug_assert_eq!(out.len() - start, RECORD_PREFIX_BYTES + payload);
    out.len() - start
}

/// The checksum of a record: crc32c over its length's bytes, then its payload.
fn checksum(len: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(len), payload)
}

/// One record [`scan`] found valid: where its entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The slot that decided the entry.
    pub slot: u64,
    /// What the entry is.
    pub kind: Kind,
    /// The entry's bytes, as a range of the scanned segment.
    pub bytes: Range<usize>,
}

/// Why [`scan`] stopped before the segment's end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Cut {
    /// The header is missing, short, or not this format's.
    #[error("not a segment of version {VERSION}: {0}")]
    Header(String),
    /// The last record is cut short: a write that did not finish (a torn tail).
    #[error("a record cut short: {have} of {need} bytes")]
    Torn {
        /// Bytes the record needs.
        need: usize,
        /// Bytes left in the segment.
        have: usize,
    },
    /// A record's length is above [`MAX_RECORD_BYTES`] or below a record's fixed part.
    #[error("a record announcing {0} bytes")]
    Length(u32),
    /// A record's checksum does not match its bytes.
    #[error("a checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum {
        /// The checksum the record holds.
        stored: u32,
        /// The checksum of its bytes.
        computed: u32,
    },
    /// A record's slot is not its predecessor's plus one.
    #[error("slot {found} where slot {expected} comes next")]
    Slot {
        /// The slot the sequence needs.
        expected: u64,
        /// The slot the record names.
        found: u64,
    },
    /// A record of a kind this version does not know.
    #[error("a record of unknown kind {0}")]
    Kind(u8),
}

/// What a segment holds: its first slot, its valid records, how many of its bytes they
/// take (the header included: where a writer may append again), and why the scan
/// stopped before the end, if it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    /// The slot of its first record (the header's).
    pub first_slot: u64,
    /// The valid records, in slot order.
    pub records: Vec<Record>,
    /// Bytes of the valid prefix: the header and the valid records.
    pub valid_bytes: usize,
    /// Why the scan stopped before the segment's end, and at which byte; `None` if every
    /// byte belongs to a valid record.
    pub cut: Option<(usize, Cut)>,
}

impl Scan {
    /// The slot after the last valid record: where the segment's log continues.
    pub fn next_slot(&self) -> u64 {
        self.first_slot + self.records.len() as u64
    }
}

/// Reads a segment's bytes: the valid records from the start, up to the first record
/// that is torn, corrupt, out of sequence or of an unknown kind (reported in
/// [`Scan::cut`]). A segment whose header is bad holds no record.
pub fn scan(segment: &[u8]) -> Scan {
    let first_slot = match read_header(segment) {
        Ok(first) => first,
        Err(e) => {
            return Scan {
                first_slot: 0,
                records: Vec::new(),
                valid_bytes: 0,
                cut: Some((0, e)),
            };
        }
    };
    let mut records = Vec::new();
    let mut at = HEADER_BYTES;
    let mut next = first_slot;
    let cut = loop {
        if at == segment.len() {
            break None;
        }
        match read_record(segment, at, next) {
            Ok((record, end)) => {
                records.push(record);
                next += 1;
                at = end;
            }
            Err(e) => break Some((at, e)),
        }
    };
    // Postconditions: the records are consecutive and lie inside the valid prefix.
    debug_assert!(
        records
            .iter()
            .enumerate()
            .all(|(i, r)| r.slot == first_slot + i as u64)
    );
    debug_assert!(records.last().is_none_or(|r| r.bytes.end == at));
    Scan {
        first_slot,
        records,
        valid_bytes: at,
        cut,
    }
}

fn read_header(segment: &[u8]) -> Result<u64, Cut> {
    let h = segment
        .get(..HEADER_BYTES)
        .ok_or_else(|| Cut::Header(format!("{} bytes, a header has 16", segment.len())))?;
    if h[0..4] != MAGIC {
        return Err(Cut::Header(format!("magic {:02x?}", &h[0..4])));
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION || h[6..8] != [0, 0] {
        return Err(Cut::Header(format!("version {version}")));
    }
    Ok(u64::from_le_bytes(h[8..16].try_into().expect("8 bytes")))
}

/// The record at byte `at`, which must be slot `expected`, and the byte after it.
fn read_record(segment: &[u8], at: usize, expected: u64) -> Result<(Record, usize), Cut> {
    let rest = &segment[at..];
    let torn = |need: usize| Cut::Torn {
        need,
        have: rest.len(),
    };
    let prefix = rest
        .get(..RECORD_PREFIX_BYTES)
        .ok_or_else(|| torn(RECORD_PREFIX_BYTES))?;
    let len = u32::from_le_bytes(prefix[0..4].try_into().expect("4 bytes"));
    // The bound before anything is read past the prefix.
    if len > MAX_RECORD_BYTES || (len as usize) < PAYLOAD_FIXED_BYTES {
        return Err(Cut::Length(len));
    }
    let need = RECORD_PREFIX_BYTES + len as usize;
    let payload = rest
        .get(RECORD_PREFIX_BYTES..need)
        .ok_or_else(|| torn(need))?;
    let stored = u32::from_le_bytes(prefix[4..8].try_into().expect("4 bytes"));
    let computed = checksum(&prefix[0..4], payload);
    if stored != computed {
        return Err(Cut::Checksum { stored, computed });
    }
    let slot = u64::from_le_bytes(payload[0..8].try_into().expect("8 bytes"));
    if slot != expected {
        return Err(Cut::Slot {
            expected,
            found: slot,
        });
    }
    let kind = Kind::from_byte(payload[8]).ok_or(Cut::Kind(payload[8]))?;
    let start = at + RECORD_PREFIX_BYTES + PAYLOAD_FIXED_BYTES;
    Ok((
        Record {
            slot,
            kind,
            bytes: start..at + need,
        },
        at + need,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(first: u64, entries: &[&[u8]]) -> Vec<u8> {
        let mut s = header(first).to_vec();
        for (i, e) in entries.iter().enumerate() {
            append_record(&mut s, first + i as u64, Kind::Service, e);
        }
        s
    }

    #[test]
    fn records_read_back_as_written() {
        let s = segment(7, &[b"a", b"", &[9; 300]]);
        let scan = scan(&s);
        assert_eq!(scan.cut, None);
        assert_eq!(scan.valid_bytes, s.len());
        assert_eq!(scan.next_slot(), 10);
        let bytes: Vec<&[u8]> = scan.records.iter().map(|r| &s[r.bytes.clone()]).collect();
        assert_eq!(bytes, [&b"a"[..], b"", &[9; 300]]);
    }

    #[test]
    fn an_empty_segment_is_its_header() {
        let s = header(3);
        let scan = scan(&s);
        assert_eq!(scan.next_slot(), 3);
        assert_eq!(
            (scan.records.len(), scan.valid_bytes, scan.cut),
            (0, 16, None)
        );
    }

    #[test]
    fn a_bad_header_holds_nothing() {
        assert!(matches!(scan(b"VLSG").cut, Some((0, Cut::Header(_)))));
        let mut s = segment(0, &[b"x"]);
        s[0] = b'X';
        assert!(matches!(scan(&s).cut, Some((0, Cut::Header(_)))));
        let mut s = segment(0, &[b"x"]);
        s[4] = 2;
        assert!(matches!(scan(&s).cut, Some((0, Cut::Header(_)))));
    }

    #[test]
    fn a_length_past_the_bound_is_refused_before_reading_it() {
        let mut s = header(0).to_vec();
        s.extend_from_slice(&u32::MAX.to_le_bytes());
        s.extend_from_slice(&[0; 4]);
        assert_eq!(scan(&s).cut, Some((16, Cut::Length(u32::MAX))));
        let mut s = header(0).to_vec();
        s.extend_from_slice(&3u32.to_le_bytes());
        s.extend_from_slice(&[0; 20]);
        assert_eq!(scan(&s).cut, Some((16, Cut::Length(3))));
    }

    #[test]
    fn a_gap_in_the_slots_ends_the_valid_records() {
        let mut s = segment(5, &[b"a"]);
        append_record(&mut s, 7, Kind::Service, b"c");
        let scan = scan(&s);
        assert_eq!(scan.records.len(), 1);
        assert!(matches!(
            scan.cut,
            Some((
                _,
                Cut::Slot {
                    expected: 6,
                    found: 7
                }
            ))
        ));
    }

    #[test]
    fn configuration_entries_keep_their_kind() {
        let mut s = header(0).to_vec();
        append_record(&mut s, 0, Kind::Configuration, b"members");
        assert_eq!(scan(&s).records[0].kind, Kind::Configuration);
        let last = s.len() - b"members".len() - 1;
        s[last] = 9; // an unknown kind, checksum made to match
        let len = s[16..20].to_vec();
        let crc = checksum(&len, &s[24..]);
        s[20..24].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(scan(&s).cut, Some((16, Cut::Kind(9))));
    }
}
