//! The key-value service's commands as log entries: one tag byte, the key's length (one
//! byte), the key, then the value (puts only). An empty entry is a leader's no-op.

/// A command of the replicated key-value service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvCommand {
    /// Sets `key` to `value`.
    Put {
        /// The key (at most 255 bytes).
        key: String,
        /// The value.
        value: String,
    },
    /// Removes `key`.
    Del {
        /// The key (at most 255 bytes).
        key: String,
    },
}

const PUT: u8 = b'P';
const DEL: u8 = b'D';

/// Why entry bytes are not a command.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The entry is empty (a no-op, not a command).
    #[error("an empty entry is a no-op, not a command")]
    Empty,
    /// The first byte names no command.
    #[error("unknown command tag {0:#04x} (expected 'P' or 'D')")]
    UnknownTag(u8),
    /// The entry ends before the key does.
    #[error("the entry ends inside the key ({have} of {need} bytes)")]
    Truncated {
        /// Key bytes present.
        have: usize,
        /// Key bytes announced.
        need: usize,
    },
    /// A delete carries bytes after its key.
    #[error("{0} stray bytes after a delete's key")]
    Trailing(usize),
    /// The key or the value is not UTF-8.
    #[error("the key or value is not UTF-8")]
    NotUtf8,
}

/// Why a command cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a key of {0} bytes is longer than 255")]
pub struct KeyTooLong(pub usize);

impl KvCommand {
    /// The entry bytes.
    pub fn encode(&self) -> Result<Vec<u8>, KeyTooLong> {
        let (tag, key, value) = match self {
            KvCommand::Put { key, value } => (PUT, key, value.as_str()),
            KvCommand::Del { key } => (DEL, key, ""),
        };
        let len = u8::try_from(key.len()).map_err(|_| KeyTooLong(key.len()))?;
        let mut out = Vec::with_capacity(2 + key.len() + value.len());
        out.push(tag);
        out.push(len);
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(value.as_bytes());
        Ok(out)
    }

    /// The command in `bytes`, or why they hold none.
    pub fn decode(bytes: &[u8]) -> Result<KvCommand, DecodeError> {
        let (&tag, rest) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if tag != PUT && tag != DEL {
            return Err(DecodeError::UnknownTag(tag));
        }
        let (&len, rest) = rest
            .split_first()
            .ok_or(DecodeError::Truncated { have: 0, need: 1 })?;
        let need = usize::from(len);
        if rest.len() < need {
            return Err(DecodeError::Truncated {
                have: rest.len(),
                need,
            });
        }
        let (key, value) = rest.split_at(need);
        let text = |b: &[u8]| {
            std::str::from_utf8(b)
                .map(str::to_owned)
                .map_err(|_| DecodeError::NotUtf8)
        };
        let key = text(key)?;
        if tag == PUT {
            Ok(KvCommand::Put {
                key,
                value: text(value)?,
            })
        } else if value.is_empty() {
            Ok(KvCommand::Del { key })
        } else {
            Err(DecodeError::Trailing(value.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_and_bad_bytes_are_errors() {
        for c in [
            KvCommand::Put {
                key: "k1".into(),
                value: "v1".into(),
            },
            KvCommand::Put {
                key: String::new(),
                value: String::new(),
            },
            KvCommand::Del { key: "k2".into() },
        ] {
            assert_eq!(KvCommand::decode(&c.encode().unwrap()), Ok(c));
        }
        assert_eq!(KvCommand::decode(b""), Err(DecodeError::Empty));
        assert_eq!(KvCommand::decode(b"X"), Err(DecodeError::UnknownTag(b'X')));
        assert_eq!(
            KvCommand::decode(b"P"),
            Err(DecodeError::Truncated { have: 0, need: 1 })
        );
        assert_eq!(
            KvCommand::decode(b"P\x05ab"),
            Err(DecodeError::Truncated { have: 2, need: 5 })
        );
        assert_eq!(KvCommand::decode(b"D\x01ab"), Err(DecodeError::Trailing(1)));
        assert_eq!(KvCommand::decode(b"P\x01\xffv"), Err(DecodeError::NotUtf8));
        let long = KvCommand::Del {
            key: "k".repeat(256),
        };
        assert_eq!(long.encode(), Err(KeyTooLong(256)));
    }
}
