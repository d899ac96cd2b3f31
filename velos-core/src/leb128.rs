//! LEB128, the variable-length encoding of unsigned integers the log's entries use: a
//! configuration entry's incarnations here, a batch's frame lengths and a session
//! envelope's fields in the library. Seven bits a byte, low bits first, the high bit set
//! on every byte but the last.

/// Appends `value` as LEB128.
pub fn push(out: &mut Vec<u8>, value: u64) {
    let mut rest = value;
    loop {
        let low = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// The LEB128 value at the start of `bytes`, of at most `max_bytes` bytes (at most 10),
/// and what follows it; `None` if it runs past `bytes` or past `max_bytes`.
pub fn take(bytes: &[u8], max_bytes: usize) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(max_bytes.min(10)) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_truncations_are_refused() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            push(&mut bytes, value);
            bytes.push(0xAA);
            assert_eq!(take(&bytes, 10), Some((value, &[0xAA][..])), "{value}");
        }
        assert_eq!(take(&[0x80, 0x80], 10), None, "runs past the bytes");
        assert_eq!(take(&[0x80, 0x01], 1), None, "runs past max_bytes");
        assert_eq!(take(&[], 10), None);
    }
}
