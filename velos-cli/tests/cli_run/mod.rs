//! Running the `velos` binary from a test: exit status, standard output, standard error.
//! Shared by the command-line tests (`tests/*_cli.rs`, `tests/vopr.rs`).

use std::process::Command;

/// `velos ARGS`: its exit status, standard output and standard error.
pub fn velos(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_velos"))
        .args(args)
        .output()
        .expect("velos runs");
    (
        out.status.code().expect("an exit status"),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}
