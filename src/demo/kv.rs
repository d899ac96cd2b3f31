//! The key-value store each replica applies the log to: a `BTreeMap<String, String>`,
//! shared with the demo so that gets can read the leader's copy while it runs.

use super::codec::{DecodeError, KvCommand};
use crate::local::StateMachine;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The map of one replica.
pub type KvMap = BTreeMap<String, String>;

/// A replica's store: the map, and the entries that were not commands.
#[derive(Clone, Debug, Default)]
pub struct KvStore {
    map: Arc<Mutex<KvMap>>,
    rejected: Arc<Mutex<Vec<(u64, DecodeError)>>>,
}

impl KvStore {
    /// The map (a poisoned lock still gives the map: appliers never panic holding it).
    pub fn map(&self) -> MutexGuard<'_, KvMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Entries that did not decode, with why (the store skips them).
    pub fn rejected(&self) -> Vec<(u64, DecodeError)> {
        self.rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl StateMachine for KvStore {
    fn apply(&mut self, slot: u64, entry: &[u8]) {
        match KvCommand::decode(entry) {
            Ok(KvCommand::Put { key, value }) => {
                self.map().insert(key, value);
            }
            Ok(KvCommand::Del { key }) => {
                self.map().remove(&key);
            }
            Err(DecodeError::Empty) => {} // a no-op filling a gap
            Err(e) => self
                .rejected
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((slot, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_commands_and_skips_bad_entries() {
        let mut s = KvStore::default();
        let put = KvCommand::Put {
            key: "a".into(),
            value: "1".into(),
        };
        s.apply(0, &put.encode().unwrap());
        s.apply(1, b"");
        s.apply(2, b"garbage");
        assert_eq!(s.map().get("a").map(String::as_str), Some("1"));
        s.apply(3, &KvCommand::Del { key: "a".into() }.encode().unwrap());
        assert!(s.map().is_empty());
        assert_eq!(s.rejected(), vec![(2, DecodeError::UnknownTag(b'g'))]);
    }
}
