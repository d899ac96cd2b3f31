//! Durability in simulated runs: every replica's disk (velos-sim's `SimDisk` running
//! velos-store's writer in virtual time, [`disks`]) and the checks of a whole-cluster
//! power loss ([`check`]). `velos vopr --power-loss` and `velos sim --durable` use both.

pub mod check;
pub mod disks;
