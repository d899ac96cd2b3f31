//! The key-value state machine both examples replicate: a put is `key`, a zero byte,
//! `value`, and answers the value it replaced; a get is `key` alone, answered through the
//! log.

use std::collections::BTreeMap;
use velos::embed::{Position, RestoreError, StateMachine};

/// The service's state: what each replica applies the log to.
#[derive(Default)]
pub struct KvStore(pub BTreeMap<String, String>);

impl StateMachine for KvStore {
    /// A put answers the value it replaced, a get the value it found.
    type Response = Option<String>;

    /// A command is `key`, a zero byte, `value` (a put) or `key` alone (a get: through
    /// the log, so it sees every write committed before it).
    fn apply(&mut self, _: Position, command: &[u8]) -> Option<String> {
        let text = String::from_utf8_lossy(command);
        match text.split_once('\0') {
            Some((key, value)) => self.0.insert(key.into(), value.into()),
            None => self.0.get(text.as_ref()).cloned(),
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).expect("a map of strings serializes")
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        self.0 = serde_json::from_slice(bytes).map_err(|e| RestoreError(e.to_string()))?;
        Ok(())
    }
}

/// A put's command bytes.
pub fn put(key: &str, value: &str) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(!key.contains('\0'), "a key holds no zero byte");
    Ok(format!("{key}\0{value}").into_bytes())
}
