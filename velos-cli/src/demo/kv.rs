//! The key-value store each replica applies the log to: a `BTreeMap<String, String>`,
//! shared with the demo so that gets can read the leader's copy while it runs. Its
//! snapshot is the map as length-prefixed keys and values.

use super::codec::{DecodeError, KvCommand};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use velos::embed::{Position, RestoreError, StateMachine};

/// The map of one replica.
pub type KvMap = BTreeMap<String, String>;

/// A replica's store: the map, and the entries that were not commands.
#[derive(Clone, Debug, Default)]
pub struct KvStore {
    map: Arc<Mutex<KvMap>>,
    rejected: Arc<Mutex<Vec<(Position, DecodeError)>>>,
}

impl KvStore {
    /// The map (a poisoned lock still gives the map: appliers never panic holding it).
    pub fn map(&self) -> MutexGuard<'_, KvMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Commands that did not decode, with why (the store skips them).
    pub fn rejected(&self) -> Vec<(Position, DecodeError)> {
        self.rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl StateMachine for KvStore {
    /// The value a put or delete replaced (`None`: the key was absent, or the command did
    /// not decode).
    type Response = Option<String>;

    fn apply(&mut self, position: Position, command: &[u8]) -> Option<String> {
        match KvCommand::decode(command) {
            Ok(KvCommand::Put { key, value }) => self.map().insert(key, value),
            Ok(KvCommand::Del { key }) => self.map().remove(&key),
            Err(e) => {
                self.rejected
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((position, e));
                None
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        let map = self.map();
        let mut out = Vec::new();
        for (k, v) in map.iter() {
            for s in [k, v] {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let mut map = KvMap::new();
        let mut rest = snapshot;
        let mut next = || -> Result<Option<String>, RestoreError> {
            if rest.is_empty() {
                return Ok(None);
            }
            let (len, tail) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| RestoreError("a length is cut short".into()))?;
            let len = u32::from_le_bytes(*len) as usize;
            if tail.len() < len {
                return Err(RestoreError(format!(
                    "{len} bytes announced, {} left",
                    tail.len()
                )));
            }
            let (text, tail) = tail.split_at(len);
            rest = tail;
            let text = std::str::from_utf8(text).map_err(|_| RestoreError("not UTF-8".into()))?;
            Ok(Some(text.to_owned()))
        };
        while let Some(key) = next()? {
            let value = next()?.ok_or_else(|| RestoreError(format!("key {key:?} has no value")))?;
            map.insert(key, value);
        }
        *self.map() = map;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(slot: u64) -> Position {
        Position { slot, index: 0 }
    }

    #[test]
    fn applies_commands_and_skips_bad_ones() {
        let mut s = KvStore::default();
        let put = KvCommand::Put {
            key: "a".into(),
            value: "1".into(),
        };
        s.apply(at(0), &put.encode().unwrap());
        s.apply(at(2), b"garbage");
        assert_eq!(s.map().get("a").map(String::as_str), Some("1"));
        s.apply(at(3), &KvCommand::Del { key: "a".into() }.encode().unwrap());
        assert!(s.map().is_empty());
        assert_eq!(s.rejected(), vec![(at(2), DecodeError::UnknownTag(b'g'))]);
    }

    #[test]
    fn a_snapshot_restores_the_map_and_a_bad_one_changes_nothing() {
        let mut s = KvStore::default();
        for (k, v) in [("a", "1"), ("b", ""), ("", "x")] {
            let put = KvCommand::Put {
                key: k.into(),
                value: v.into(),
            };
            s.apply(at(0), &put.encode().unwrap());
        }
        let snapshot = s.snapshot();
        let mut copy = KvStore::default();
        copy.restore(&snapshot).expect("a snapshot");
        assert_eq!(*copy.map(), *s.map());
        assert!(copy.restore(&snapshot[..snapshot.len() - 1]).is_err());
        assert!(
            copy.restore(&[1, 0, 0, 0, b'k']).is_err(),
            "a key without a value"
        );
        assert_eq!(*copy.map(), *s.map(), "unchanged by a failed restore");
    }
}
