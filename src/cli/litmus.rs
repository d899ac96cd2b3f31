//! `velos litmus`: run `.litmus` files; exit 0 when all pass, 1 when a verdict differs,
//! 2 for a file that does not parse, a usage error, or an exceeded state budget.

use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use velos::sim::litmus::{Backend, RunOptions, collect_files, render, run_file};

/// Arguments of `velos litmus`.
#[derive(Args)]
pub struct LitmusArgs {
    /// Files or directories (searched recursively for `*.litmus`).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The backend: `sim` explores every execution; `mem` runs real executions.
    #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
    backend: BackendArg,
    /// The explorer's state budget per test.
    #[arg(long, default_value_t = 5_000_000)]
    max_states: usize,
    /// Executions per test on the `mem` backend.
    #[arg(long, default_value_t = 200)]
    runs: u64,
    /// Seed of the `mem` backend's jitter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON object per test instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Sim,
    Mem,
}

/// Runs the subcommand.
pub fn run(args: LitmusArgs) -> ExitCode {
    let options = RunOptions {
        backend: match args.backend {
            BackendArg::Sim => Backend::Sim,
            BackendArg::Mem => Backend::Mem,
        },
        max_states: args.max_states,
        runs: args.runs,
        seed: args.seed,
        mutation: None,
    };
    let mut files = Vec::new();
    for path in &args.paths {
        match collect_files(path) {
            Ok(f) => files.extend(f),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        }
    }
    if files.is_empty() {
        eprintln!("no .litmus files found");
        return ExitCode::from(2);
    }
    let (mut failed, mut broken, mut passed) = (0usize, 0usize, 0usize);
    for file in &files {
        match run_file(file, &options) {
            Ok(report) => {
                if args.json {
                    println!(
                        "{}",
                        serde_json::to_string(&report).expect("reports serialise")
                    );
                } else {
                    print!("{}", render(&report));
                }
                if report.pass {
                    passed += 1;
                } else {
                    failed += 1;
                }
            }
            Err(e) => {
                eprintln!("{e}");
                broken += 1;
            }
        }
    }
    if !args.json {
        println!("{passed} passed, {failed} failed");
    }
    if broken > 0 {
        ExitCode::from(2)
    } else if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
