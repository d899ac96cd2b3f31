//! The `velos` command-line tool.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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
    /// Benchmarks: the emulator, distributed locks, decision latency and failover (beside
    /// the Mu baseline), the embedded engine beside OmniPaxos, a replica's replacement
    /// (in virtual time, and under a bank service's clients on the embedding).
    Bench(cli::bench::BenchArgs),
    /// Run a Velos cluster on the simulation driver, with crashes; check the logs.
    Sim(Box<cli::sim::SimArgs>),
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

/// `cmd` and every subcommand below it take `-3` as a value (refused by the flag's
/// range, which the message names) rather than as an unknown flag.
fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
    cmd.allow_negative_numbers(true)
        .mut_subcommands(negative_numbers_are_values)
}

/// Parses the command line (exit 2 on a usage error, naming the flag).
fn parse() -> Args {
    let matches = negative_numbers_are_values(Args::command()).get_matches();
    Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    end_quietly_on_broken_pipe();
    let args = parse();
    match args.command {
        Command::Litmus(a) => cli::litmus::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Sim(a) => cli::sim::run_cli(*a),
        Command::Node(a) => cli::node::run_cli(a),
        Command::Demo(a) => cli::demo::run_cli(a),
        Command::Vopr(a) => cli::vopr::run_cli(a),
    }
}

#[cfg(test)]
mod tests {
    use super::Args;
    use clap::{CommandFactory, FromArgMatches};

    /// The arguments of each `cargo run [--release] [--features F] -- ARGS` in `text` (up to
    /// a comment or the end of an inline code span), and of each code line that starts
    /// with `velos `; synopses (`[--flag X]`, `…`) are left out.
    fn commands(text: &str) -> Vec<Vec<String>> {
        let mut found = Vec::new();
        // Inside a ```sh block (and only there: a toml line may start with `velos`).
        let mut shell = false;
        let mut fenced = false;
        for line in text.lines() {
            if let Some(language) = line.strip_prefix("```") {
                fenced = !fenced;
                shell = fenced && language == "sh";
                continue;
            }
            let mut spans: Vec<&str> = line
                .match_indices("cargo run")
                .filter_map(|(at, _)| {
                    let rest = &line[at..];
                    let args = rest.find(" -- ").map(|i| &rest[i + 4..])?;
                    Some(args.split(['`', '#']).next().unwrap_or(""))
                })
                .collect();
            let trimmed = line.trim_start();
            if (shell || line.starts_with("    ")) && trimmed.starts_with("velos ") {
                spans.push(trimmed["velos ".len()..].split('#').next().unwrap_or(""));
            }
            for span in spans {
                let placeholder = span
                    .split_whitespace()
                    .next()
                    .is_none_or(|w| w.chars().all(|c| c.is_ascii_uppercase()));
                if span.contains(['[', '…', '|', '<']) || placeholder {
                    continue;
                }
                found.push(span.split_whitespace().map(String::from).collect());
            }
        }
        found
    }

    /// `velos ARGS` through the CLI's own definition, without running anything.
    fn parse(args: &[String]) -> Result<Args, clap::Error> {
        let argv = std::iter::once("velos").chain(args.iter().map(String::as_str));
        let matches =
            super::negative_numbers_are_values(Args::command()).try_get_matches_from(argv)?;
        Args::from_arg_matches(&matches)
    }

    #[test]
    fn every_command_the_readme_gives_parses() {
        // The README and the measurements it links to, each figure with its command.
        let docs = [
            include_str!("../../README.md"),
            include_str!("../../paper-notes/results.md"),
        ];
        let commands: Vec<Vec<String>> = docs.into_iter().flat_map(commands).collect();
        assert!(commands.len() >= 20, "the README's commands: {commands:?}");
        let refused: Vec<String> = commands
            .iter()
            .filter_map(|args| match parse(args) {
                Ok(_) => None,
                Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => None,
                Err(e) => Some(format!("velos {}: {e}", args.join(" "))),
            })
            .collect();
        assert!(refused.is_empty(), "{}", refused.join("\n"));
    }

    #[test]
    fn a_stale_flag_in_a_command_is_caught() {
        let text = "    cargo run --release -- sim --no-such-flag 3\n";
        assert!(parse(&commands(text)[0]).is_err());
        let fenced = "```sh\nvelos sim --no-such-flag 3\n```\nvelos sim --no-such-flag 4\n\
                      ```toml\nvelos = { path = \"x\" }\n```\n";
        let found = commands(fenced);
        assert_eq!(found.len(), 1, "code lines only: {found:?}");
        assert!(parse(&found[0]).is_err());
    }
}
