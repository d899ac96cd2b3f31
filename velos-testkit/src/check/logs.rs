//! What the checkers read: each replica's applied log.

/// One replica's applied log: the entries it applied, in order, and where it continued
/// after copying a peer's snapshot (the slots below were not applied one by one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedLog {
    /// The replica.
    pub replica: u16,
    /// `(slot, value as hex)`, in the order applied; an empty value is a no-op (or a
    /// configuration entry).
    pub entries: Vec<(u64, String)>,
    /// The points of the snapshots it restored: it applied slot `p` next after one.
    pub jumps: Vec<u64>,
}

impl AppliedLog {
    /// A log applied entry by entry from slot 0: `values[i]` in slot `i`.
    pub fn sequential(replica: u16, values: &[&str]) -> AppliedLog {
        AppliedLog {
            replica,
            entries: values
                .iter()
                .enumerate()
                .map(|(i, v)| (i as u64, (*v).to_string()))
                .collect(),
            jumps: Vec::new(),
        }
    }
}
