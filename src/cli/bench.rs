//! `velos bench`: measurements. Benchmarks report; they never assert speed.

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `velos bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// The emulator: explorer states/s over a litmus suite, simulated operations/s.
    Emulator {
        /// The litmus suite to explore.
        #[arg(long, default_value = "velos-sim/litmus")]
        suite: PathBuf,
        /// Repetitions; medians are reported.
        #[arg(long, default_value_t = 5)]
        repeats: usize,
        /// Operations per thread (4 threads) in the simulation run.
        #[arg(long, default_value_t = 250_000)]
        ops: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the subcommand.
pub fn run(args: BenchArgs) -> ExitCode {
    match args.what {
        Bench::Emulator {
            suite,
            repeats,
            ops,
            json,
        } => match velos::bench::emulator::measure(&suite, repeats, ops) {
            Ok(r) => {
                if json {
                    println!("{}", serde_json::to_string(&r).expect("report serialises"));
                } else {
                    println!(
                        "explorer: {} files, {} states, median {:.3} s, {:.0} states/s",
                        r.suite_files,
                        r.suite_states,
                        r.suite_seconds_median,
                        r.explorer_states_per_s
                    );
                    println!(
                        "simulator: {} ops ({} steps), median {:.3} s, {:.0} ops/s, {:.0} steps/s (one core)",
                        r.sim_ops,
                        r.sim_steps,
                        r.sim_seconds_median,
                        r.sim_ops_per_s,
                        r.sim_steps_per_s
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench emulator: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}
