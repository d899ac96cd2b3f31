//! `velos litmus`: run `.litmus` files on the model, and optionally on a real backend;
//! exit 0 when all pass, 1 when a verdict differs, a forbidden outcome is observed or an
//! execution fails, 2 for a file that does not parse, a usage error, an exceeded state
//! budget, or no RDMA device.

use super::flags::number;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use velos::sim::litmus::{
    Backend, MemBackend, Report, RunError, RunOptions, Totals, collect_files, render, run_file,
    run_file_on,
};

/// Arguments of `velos litmus`.
#[derive(Args)]
pub struct LitmusArgs {
    /// Files or directories (searched recursively for `*.litmus`).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The backend: `sim` explores every execution; `mem` (in-process threads) and `verbs`
    /// (real RDMA, a build with `--features verbs`) also run real executions, checked
    /// against the model.
    #[arg(long, value_enum, default_value_t = BackendArg::Sim)]
    backend: BackendArg,
    /// The explorer's state budget per test, 1 to 10^8.
    #[arg(long, default_value_t = 5_000_000, value_parser = number::<usize>(1, 100_000_000, ""))]
    max_states: usize,
    /// Real executions per test (`mem`, `verbs`), 1 to 10^6.
    #[arg(long, default_value_t = 200, value_parser = number::<u64>(1, 1_000_000, ""))]
    runs: u64,
    /// Seed of the real backends' jitter (random delays between a thread's operations).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// One JSON object per test, then one with the totals, instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Sim,
    Mem,
    Verbs,
}

/// Runs the subcommand.
pub fn run(args: LitmusArgs) -> ExitCode {
    ExitCode::from(status(args))
}

/// Runs the subcommand and returns its exit status.
pub fn status(args: LitmusArgs) -> u8 {
    let options = RunOptions {
        // What `run_file` explores; a real backend is handed to `run_file_on` below.
        backend: Backend::Sim,
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
                return 2;
            }
        }
    }
    if files.is_empty() {
        eprintln!("no .litmus files found");
        return 2;
    }
    match args.backend {
        BackendArg::Sim => {
            let ran = run_all(&files, args.json, |f| run_file(f, &options));
            finish(ran, args.json, None)
        }
        BackendArg::Mem => {
            let mut backend = MemBackend { seed: args.seed };
            let ran = run_all(&files, args.json, |f| {
                run_file_on(f, &options, &mut backend)
            });
            finish(ran, args.json, None)
        }
        BackendArg::Verbs => verbs(&files, &options, args.json),
    }
}

#[cfg(feature = "verbs")]
fn verbs(files: &[PathBuf], options: &RunOptions, json: bool) -> u8 {
    match velos_testkit::verbs_litmus::VerbsBackend::open(options.seed) {
        Ok(mut backend) => {
            if !json {
                println!("verbs backend on device {}", backend.device());
            }
            let ran = run_all(files, json, |f| run_file_on(f, options, &mut backend));
            let busy = backend.busy().as_secs_f64();
            let note = format!(
                "verbs executions took {busy:.1} s ({:.1} ms each)",
                1e3 * busy / ran.totals.runs.max(1) as f64
            );
            finish(ran, json, Some(note))
        }
        Err(e) => {
            eprintln!("velos litmus --backend verbs: {e}");
            2
        }
    }
}

#[cfg(not(feature = "verbs"))]
fn verbs(_files: &[PathBuf], _options: &RunOptions, _json: bool) -> u8 {
    eprintln!(
        "velos litmus --backend verbs: this build of velos has no RDMA backend: \
         rebuild with `cargo build --release --features verbs`"
    );
    2
}

/// What running the files established.
struct Ran {
    totals: Totals,
    /// Files that could not be run (bad input, exceeded budget).
    broken: usize,
}

/// Runs every file and prints each report.
fn run_all(
    files: &[PathBuf],
    json: bool,
    mut run: impl FnMut(&Path) -> Result<Report, RunError>,
) -> Ran {
    let mut totals = Totals::default();
    let mut broken = 0usize;
    for file in files {
        match run(file) {
            Ok(report) => {
                if json {
                    println!(
                        "{}",
                        serde_json::to_string(&report).expect("reports serialise")
                    );
                } else {
                    print!("{}", render(&report));
                }
                totals.add(&report);
            }
            Err(e) => {
                eprintln!("{e}");
                broken += 1;
            }
        }
    }
    Ran { totals, broken }
}

/// Prints `note` (text only) and the totals, last; returns the exit status.
fn finish(ran: Ran, json: bool, note: Option<String>) -> u8 {
    let Ran { totals, broken } = ran;
    if json {
        let summary = serde_json::json!({ "summary": totals });
        println!("{summary}");
    } else {
        if let Some(note) = note {
            println!("{note}");
        }
        println!("{}", totals.line());
    }
    if broken > 0 {
        2
    } else if totals.failed > 0 {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LitmusArgs,
    }

    fn status_of(argv: &[&str]) -> u8 {
        let cli = Cli::try_parse_from(std::iter::once("litmus").chain(argv.iter().copied()))
            .expect("arguments parse");
        status(cli.args)
    }

    /// A fresh directory under the system's temporary directory, removed when dropped.
    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("velos-cli-")
            .tempdir()
            .expect("scratch dir")
    }

    fn write(dir: &tempfile::TempDir, file: &str, text: &str) -> String {
        let p = dir.path().join(file);
        std::fs::write(&p, text).expect("write test file");
        p.display().to_string()
    }

    const FIG6C: &str = "litmus fig6c\nnodes 3\nloc x@2 = 0\nloc a@1 = 9\nloc b@3 = 9\n\
thread T1@1\n  rcas a x 0 1\nthread T3@3\n  rfaa b x 1\nexists a = 0 && x = 1\nexpect forbidden\n";

    #[test]
    fn the_suite_passes_with_exit_0() {
        let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus");
        assert_eq!(status_of(&[suite]), 0);
    }

    #[test]
    fn a_wrong_expectation_exits_1() {
        let dir = scratch();
        let f = write(
            &dir,
            "t.litmus",
            &FIG6C.replace("expect forbidden", "expect allowed"),
        );
        assert_eq!(status_of(&[&f]), 1);
        assert_eq!(status_of(&[&f, "--json"]), 1);
    }

    #[test]
    fn bad_input_exits_2_never_a_verdict() {
        let dir = scratch();
        let parse_error = write(
            &dir,
            "p.litmus",
            &FIG6C.replace("rcas a x 0 1", "rcas a nowhere 0 1"),
        );
        assert_eq!(status_of(&[&parse_error]), 2);
        let not_local = write(
            &dir,
            "n.litmus",
            &FIG6C.replace("rcas a x 0 1", "store x 1"),
        );
        assert_eq!(status_of(&[&not_local]), 2);
        let no_lock = write(&dir, "l.litmus", &FIG6C.replace("rcas a x 0 1", "acq m"));
        assert_eq!(status_of(&[&no_lock]), 2);
        let ok = write(&dir, "ok.litmus", FIG6C);
        assert_eq!(
            status_of(&[&ok, "--max-states", "5"]),
            2,
            "budget exceeded is not a verdict"
        );
        assert_eq!(status_of(&[&ok, "--max-states", "1000"]), 0);
        let missing = dir.path().join("missing.litmus").display().to_string();
        assert_eq!(status_of(&[&missing]), 2);
        let empty_dir = scratch();
        let empty = empty_dir.path().display().to_string();
        assert_eq!(status_of(&[&empty]), 2);
    }

    #[test]
    fn a_symlink_loop_runs_each_test_once() {
        let dir = scratch();
        write(&dir, "ok.litmus", FIG6C);
        std::os::unix::fs::symlink(".", dir.path().join("self")).expect("a link");
        std::os::unix::fs::symlink("ok.litmus", dir.path().join("again.litmus")).expect("a link");
        let found = collect_files(dir.path()).expect("the walk ends");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(status_of(&[&dir.path().display().to_string()]), 0);
    }

    #[test]
    fn a_test_too_large_for_the_memory_budget_exits_2_at_once() {
        let dir = scratch();
        let stores: String = (0..20_000)
            .map(|i| format!("  store x {}\n", i % 7))
            .collect();
        let text = format!(
            "litmus big\nnodes 1\nloc x@1 = 0\nthread T@1\n{stores}exists x = 0\nexpect allowed\n"
        );
        let f = write(&dir, "big.litmus", &text);
        let started = std::time::Instant::now();
        assert_eq!(status_of(&[&f]), 2);
        assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    }

    #[test]
    fn library_instructions_run_their_real_implementations() {
        let dir = scratch();
        let text = "litmus l\nnodes 1\nlock m wlock\nthread T@1\n  acq m\n  rel m\nexists T:r0 = 0\nexpect allowed\n";
        let f = write(&dir, "l.litmus", text);
        assert_eq!(status_of(&[&f]), 0);
        let wrong = write(
            &dir,
            "w.litmus",
            &text.replace("expect allowed", "expect forbidden"),
        );
        assert_eq!(status_of(&[&wrong]), 1);
    }

    #[test]
    fn the_mem_backend_observes_nothing_forbidden() {
        let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus/paper");
        assert_eq!(status_of(&[suite, "--backend", "mem", "--runs", "20"]), 0);
        assert_eq!(
            status_of(&[suite, "--backend", "mem", "--runs", "5", "--json"]),
            0
        );
    }

    /// On real verbs the paper suite passes; without a device (or a build without the
    /// feature) the command says so and exits 2, and this test prints a skip message,
    /// unless `VELOS_REQUIRE_RDMA=1`.
    #[test]
    fn the_verbs_backend_runs_the_suite_or_exits_2() {
        let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus/paper");
        let status = status_of(&[suite, "--backend", "verbs", "--runs", "3"]);
        let required = std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1");
        #[cfg(feature = "verbs")]
        let device = match velos_testkit::verbs_litmus::VerbsBackend::open(1) {
            Err(velos::sim::litmus::FabricError::Unavailable(e)) => Err(e),
            _ => Ok(()),
        };
        #[cfg(not(feature = "verbs"))]
        let device: Result<(), String> = Err("a build without the verbs feature".into());
        match device {
            Err(why) if !required => {
                println!("skipped: {why} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
                assert_eq!(status, 2, "no device is a usage error");
            }
            _ => assert_eq!(status, 0),
        }
    }
}
