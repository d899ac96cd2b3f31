//! The rendezvous's messages and their frames: a 4-byte big-endian length, then JSON. A
//! frame longer than [`MAX_FRAME`] is refused before anything is allocated for it, and a
//! frame's bytes are read as they arrive (a peer that announces a length and sends less
//! costs no more than it sent).

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

/// Frames larger than this are refused (every message is small).
pub(crate) const MAX_FRAME: usize = 1 << 16;

/// The dialer's first message: who it is and its nonce (no connection information).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hello {
    pub(crate) magic: String,
    pub(crate) cluster_id: String,
    pub(crate) node: u16,
    pub(crate) nonce: Vec<u8>,
}

/// The listener's answer to a hello.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Challenge {
    /// Its nonce, and its proof that it knows the secret (no connection information).
    Prove {
        magic: String,
        node: u16,
        nonce: Vec<u8>,
        proof: Vec<u8>,
    },
    Refuse(String),
}

/// The dialer's second message: its information and its proof, or why it stops (the
/// listener did not prove the secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Proof {
    Send { info: Vec<u8>, proof: Vec<u8> },
    Refuse(String),
}

/// The listener's last message: its information and its proof, or why it refuses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Answer {
    Accept { info: Vec<u8>, proof: Vec<u8> },
    Refuse(String),
}

/// The dialer's last frame: it took the listener's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ack {
    pub(crate) node: u16,
}

/// Writes `value` as one frame.
pub(crate) fn send<T: Serialize>(stream: &mut impl Write, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    assert!(bytes.len() <= MAX_FRAME, "our own messages fit a frame");
    stream.write_all(&(bytes.len() as u32).to_be_bytes())?;
    stream.write_all(&bytes)?;
    stream.flush()
}

/// Reads one frame as a `T`: an error for a frame too long, cut short, or not a `T`.
pub(crate) fn receive<T: for<'de> Deserialize<'de>>(stream: &mut impl Read) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "a frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    let mut bytes = Vec::new();
    stream.take(len as u64).read_to_end(&mut bytes)?;
    if bytes.len() < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("a frame cut short at {} of {len} bytes", bytes.len()),
        ));
    }
    serde_json::from_slice(&bytes).map_err(std::io::Error::other)
}

/// Reads `bytes` as a peer's frames of every kind in turn — a hello, a challenge, a
/// proof, an answer, an acknowledgement — the way the exchange reads them, until one
/// fails to decode; how many decoded. Never panics, and allocates no more than the
/// input's length: what the fuzz target checks.
pub fn decode_frames(bytes: &[u8]) -> usize {
    let mut reader = bytes;
    let mut decoded = 0;
    loop {
        let ok = match decoded % 5 {
            0 => receive::<Hello>(&mut reader).is_ok(),
            1 => receive::<Challenge>(&mut reader).is_ok(),
            2 => receive::<Proof>(&mut reader).is_ok(),
            3 => receive::<Answer>(&mut reader).is_ok(),
            _ => receive::<Ack>(&mut reader).is_ok(),
        };
        if !ok {
            return decoded;
        }
        decoded += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_errors() {
        let hello = Hello {
            magic: "m".into(),
            cluster_id: "c".into(),
            node: 3,
            nonce: vec![1, 2],
        };
        let mut bytes = Vec::new();
        send(&mut bytes, &hello).unwrap();
        send(&mut bytes, &Challenge::Refuse("no".into())).unwrap();
        assert_eq!(decode_frames(&bytes), 2);
        assert_eq!(receive::<Hello>(&mut &bytes[..]).unwrap(), hello);
        // Too long: refused before reading it.
        let mut long = (MAX_FRAME as u32 + 1).to_be_bytes().to_vec();
        long.extend_from_slice(b"{}");
        let e = receive::<Ack>(&mut &long[..]).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
        // Announced, then cut short.
        let mut short = 100u32.to_be_bytes().to_vec();
        short.extend_from_slice(b"{\"node\":1}");
        let e = receive::<Ack>(&mut &short[..]).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
        assert_eq!(decode_frames(b"\xff\xff\xff\xff"), 0);
    }
}
