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

/// The exit status of a run whose standard output or error was closed early (`velos … |
/// head -1`): what a shell reports for a process ended by SIGPIPE.
const BROKEN_PIPE_EXIT: i32 = 141;

/// A closed standard output ends the run quietly: the standard library ignores SIGPIPE, so
/// printing to a closed pipe panics with "failed printing to stdout: Broken pipe"; that
/// panic, and only it, exits at once with [`BROKEN_PIPE_EXIT`] instead of a backtrace.
fn end_quietly_on_broken_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        report(info);
    }));
}

fn main() -> ExitCode {
    end_quietly_on_broken_pipe();
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
