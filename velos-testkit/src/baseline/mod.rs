//! Baselines: other replication protocols on the same programming model and emulator, so
//! that Velos is compared with them on equal terms.

pub mod mu;
