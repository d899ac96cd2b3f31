//! `velos bench`: measurements of the emulator. Benchmarks report; they never assert speed.

use clap::Args;
use std::process::ExitCode;

/// Arguments of `velos bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// What to measure: `emulator`.
    #[arg(default_value = "emulator")]
    what: String,
}

/// Runs the subcommand.
pub fn run(args: BenchArgs) -> ExitCode {
    eprintln!("unknown benchmark {}", args.what);
    ExitCode::from(2)
}
