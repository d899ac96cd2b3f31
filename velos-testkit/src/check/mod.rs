//! The checkers, one per property, each named after its lemma: they read what replicas
//! applied ([`AppliedLog`]) or what clients saw (a key-value history) and return one line
//! per violation ([`Promises`] samples acceptor words as a run goes). The simulation harness (`velos sim`) and the campaign (`velos vopr`)
//! run them after every run; each is unit-tested on small hand-made logs, legal and
//! illegal.

mod agreement;
mod integrity;
pub mod linearizability;
mod logs;
mod no_holes;
mod prefix;
mod promises;
mod validity;

pub use agreement::agreement;
pub use integrity::integrity;
pub use logs::AppliedLog;
pub use no_holes::no_holes;
pub use prefix::prefixes;
pub use promises::Promises;
pub use validity::validity;
