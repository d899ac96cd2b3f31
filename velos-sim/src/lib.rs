//! # velos-sim: an emulator of the rdma-rmw operational semantics
#![deny(unsafe_code)]

pub mod litmus;
