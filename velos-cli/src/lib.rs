//! # velos-cli: the `velos` command-line tool
//!
//! The binary (`src/main.rs`, `src/cli/`) parses arguments and prints; what it runs that
//! is not a library's lives here: the replicated key-value [`demo`] and the `velos node`
//! process ([`node`]). The library a service embeds is `velos`; the checks and the
//! campaign are velos-testkit's, the benchmarks velos-bench's.
#![deny(unsafe_code)]

pub mod demo;
pub mod node;
