//! A replicated key-value service embedded in one process: three Velos replicas on
//! threads, each applying the log to a `BTreeMap<String, String>`; a client streams puts,
//! deletes and gets while the leader is crashed mid-run; the survivors' maps are checked
//! against every acknowledged write.
//!
//! `cargo run --release --example replicated_kv` (the same scenario as `velos demo`).

use std::process::ExitCode;
use velos::demo::{DemoConfig, run};

fn main() -> ExitCode {
    let report = match run(&DemoConfig::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("replicated_kv: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{report}");
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
