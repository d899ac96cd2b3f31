//! A snapshot file: the state of a replica's service (and whatever else the caller
//! packs in: the session table, the membership) at a point of the log, checksummed.
//!
//! ```text
//! "VLSN" | version: u16 = 1 | reserved: u16 = 0 | point: u64 | length: u32 | crc32c: u32 | bytes
//! ```
//!
//! `point` is the first slot the snapshot does not include; the checksum covers the
//! point, the length and the bytes. A file that is short, long, or fails its checksum is
//! no snapshot ([`decode`] says why): a crash while it was written leaves such a file,
//! which the recovery passes over for an older snapshot.

/// The first four bytes of every snapshot file.
pub const MAGIC: [u8; 4] = *b"VLSN";

/// The format version this code writes and reads.
pub const VERSION: u16 = 1;

/// Bytes before the snapshot's own.
pub const HEADER_BYTES: usize = 24;

/// The largest snapshot a file may announce (1 GiB): a length above it is corruption,
/// refused before anything is allocated for it.
pub const MAX_SNAPSHOT_BYTES: u32 = 1 << 30;

/// The file name of the snapshot at `point`.
pub fn file_name(point: u64) -> String {
    format!("snap-{point:020}")
}

/// The temporary name a snapshot is written under before its rename.
pub fn tmp_name(point: u64) -> String {
    format!("snap-{point:020}.tmp")
}

/// Why a file is not a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The header is short or not this format's.
    #[error("not a snapshot of version {VERSION}: {0}")]
    Header(String),
    /// The file holds fewer or more bytes than the header announces.
    #[error("{announced} bytes announced, {found} found")]
    Length {
        /// Bytes the header announces.
        announced: usize,
        /// Bytes after the header.
        found: usize,
    },
    /// The checksum does not match.
    #[error("a checksum mismatch")]
    Checksum,
}

/// The file of a snapshot at `point` holding `bytes`.
///
/// # Panics
/// If `bytes` is longer than [`MAX_SNAPSHOT_BYTES`] (the log's snapshots are bounded far
/// below it).
pub fn encode(point: u64, bytes: &[u8]) -> Vec<u8> {
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&l| l <= MAX_SNAPSHOT_BYTES)
        .unwrap_or_else(|| panic!("a snapshot of {} bytes fits no file", bytes.len()));
    let mut out = Vec::with_capacity(HEADER_BYTES + bytes.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&point.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    let crc = checksum(&out[8..20], bytes);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(bytes);
    debug_assert_eq!(
        decode(&out).map(|(p, b)| (p, b.len())),
        Ok((point, bytes.len()))
    );
    out
}

fn checksum(point_and_len: &[u8], bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(point_and_len), bytes)
}

/// The snapshot a file holds: its point and its bytes.
pub fn decode(file: &[u8]) -> Result<(u64, &[u8]), SnapshotError> {
    let h = file.get(..HEADER_BYTES).ok_or_else(|| {
        SnapshotError::Header(format!("{} bytes, a header has {HEADER_BYTES}", file.len()))
    })?;
    if h[0..4] != MAGIC {
        return Err(SnapshotError::Header(format!("magic {:02x?}", &h[0..4])));
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION || h[6..8] != [0, 0] {
        return Err(SnapshotError::Header(format!("version {version}")));
    }
    let point = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(h[16..20].try_into().expect("4 bytes"));
    let bytes = &file[HEADER_BYTES..];
    if len > MAX_SNAPSHOT_BYTES || len as usize != bytes.len() {
        return Err(SnapshotError::Length {
            announced: len as usize,
            found: bytes.len(),
        });
    }
    let stored = u32::from_le_bytes(h[20..24].try_into().expect("4 bytes"));
    if stored != checksum(&h[8..20], bytes) {
        return Err(SnapshotError::Checksum);
    }
    Ok((point, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_back_and_any_damage_is_refused() {
        let file = encode(42, b"state");
        assert_eq!(decode(&file), Ok((42, &b"state"[..])));
        for cut in 0..file.len() {
            assert!(decode(&file[..cut]).is_err(), "cut at {cut}");
        }
        for byte in 0..file.len() {
            for bit in 0..8 {
                let mut bad = file.clone();
                bad[byte] ^= 1 << bit;
                assert!(decode(&bad).is_err(), "bit {bit} of byte {byte}");
            }
        }
        let mut long = file.clone();
        long.push(0);
        assert!(matches!(decode(&long), Err(SnapshotError::Length { .. })));
    }
}
