//! The subcommands of the `velos` tool.

pub mod bench;
pub mod bench_bank;
pub mod bench_durable;
pub mod bench_failover_verbs;
pub mod bench_join;
pub mod demo;
pub mod flags;
pub mod litmus;
pub mod node;
pub mod report;
pub mod sim;
pub mod sim_report;
pub mod vopr;
