//! The `velos` command-line tool.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cli;

/// Velos: one-sided Paxos for RDMA, its emulator and its tools.
#[derive(Parser)]
#[command(name = "velos", version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run `.litmus` tests on the emulator (exhaustively) or on the in-process backend.
    Litmus(cli::litmus::LitmusArgs),
    /// Measure the emulator: explorer states/s, suite time, simulated operations/s.
    Bench(cli::bench::BenchArgs),
    /// Run a Velos cluster on the simulation driver, with crashes; check the logs.
    Sim(cli::sim::SimArgs),
    /// Run one replica of a Velos log as a process over real RDMA (the `verbs` feature).
    Node(cli::node::NodeArgs),
    /// Run the replicated key-value demo: three in-process replicas, the leader crashed.
    Demo(cli::demo::DemoArgs),
    /// Run the seeded fault-injection campaign: faults, then liveness, then every checker.
    Vopr(cli::vopr::VoprArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Litmus(a) => cli::litmus::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Sim(a) => cli::sim::run_cli(a),
        Command::Node(a) => cli::node::run_cli(a),
        Command::Demo(a) => cli::demo::run_cli(a),
        Command::Vopr(a) => cli::vopr::run_cli(a),
    }
}
