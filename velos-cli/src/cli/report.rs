//! Running a benchmark and printing its report, shared by the `velos bench` subcommands.

use super::flags::check_out;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

/// Prints a benchmark's report: one JSON object with `json`, else `text(report)`.
pub fn print_report<R: serde::Serialize>(report: &R, json: bool, text: impl FnOnce(&R) -> String) {
    if json {
        let line = serde_json::to_string(report).expect("a report serialises");
        println!("{line}");
    } else {
        print!("{}", text(report));
    }
}

/// One benchmark as the command line runs it: its name, how it runs, writes its files,
/// which premises of its verdicts did not hold, and prints its table.
pub struct Job<'a, C, R> {
    pub name: &'static str,
    pub run: fn(&C, bool) -> anyhow::Result<R>,
    pub write: fn(&R, &Path) -> anyhow::Result<()>,
    pub missing_premises: fn(&R) -> Vec<String>,
    pub text: &'a dyn Fn(&R) -> String,
}

impl<C, R: serde::Serialize> Job<'_, C, R> {
    /// Runs with `config` (an error in it is a usage error: exit 2), writes the files
    /// into `out`, prints JSON or the table; a verdict whose premise did not hold fails
    /// the run (exit 1), named on stderr.
    pub fn main(&self, config: Result<C, String>, out: Option<&Path>, json: bool) -> ExitCode {
        let name = self.name;
        // A usage error, the `--out` directory's included, stops before the run.
        let config = config
            .map_err(|e| format!("bench {name}: {e}"))
            .and_then(|c| check_out(&format!("bench {name}"), out).map(|()| c));
        let config = match config {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        let report = match (self.run)(&config, std::io::stderr().is_terminal()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("bench {name}: {e:#}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(dir) = out
            && let Err(e) = (self.write)(&report, dir)
        {
            eprintln!("bench {name}: {e:#}");
            return ExitCode::FAILURE;
        }
        if json {
            let line = serde_json::to_string(&report).expect("report serialises");
            println!("{line}");
        } else {
            print!("{}", (self.text)(&report));
        }
        let missing = (self.missing_premises)(&report);
        for m in &missing {
            eprintln!("bench {name}: {m}");
        }
        if missing.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}
