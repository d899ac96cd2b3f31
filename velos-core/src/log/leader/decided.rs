//! The slots a leader decided above its applied prefix, waiting for the gap below them.

use super::Value;
use std::collections::VecDeque;

/// Decided slots and their values, in slot order: a map kept as a sorted queue, so that
/// the usual case — one slot decided at the prefix, applied at once — allocates nothing
/// (a `BTreeMap` allocates a node for its first entry and frees it with its last).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Decided(VecDeque<(u64, Value)>);

impl Decided {
    /// Records `slot` decided with `value`; a slot is decided once.
    pub(super) fn insert(&mut self, slot: u64, value: Value) {
        let at = self.0.partition_point(|&(s, _)| s < slot);
        assert!(
            self.0.get(at).is_none_or(|&(s, _)| s != slot),
            "a slot is decided once"
        );
        self.0.insert(at, (slot, value));
        assert!(
            self.0
                .iter()
                .zip(self.0.iter().skip(1))
                .all(|(a, b)| a.0 < b.0),
            "decided slots stay in order"
        );
    }

    /// The value of `slot` if it is the lowest decided slot: taken out.
    pub(super) fn take_first(&mut self, slot: u64) -> Option<Value> {
        match self.0.front() {
            Some(&(s, _)) if s == slot => self.0.pop_front().map(|(_, v)| v),
            _ => None,
        }
    }

    /// Whether a decided slot holds a configuration entry (not applied yet: it takes
    /// effect only once applied, so another change must wait for it).
    pub(super) fn holds_config(&self) -> bool {
        self.0.iter().any(|(_, v)| v.config)
    }

    /// The lowest decided slot.
    pub(super) fn first(&self) -> Option<u64> {
        self.0.front().map(|&(s, _)| s)
    }

    /// The highest decided slot.
    pub(super) fn last(&self) -> Option<u64> {
        self.0.back().map(|&(s, _)| s)
    }
}
