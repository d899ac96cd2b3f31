//! A generative test of the command line: argument vectors drawn from each subcommand's
//! flags with extreme and malformed values (0, 1, 2^64 - 1, negative, huge, not numbers),
//! each run of the binary capped in wall time and address space. Every run ends by itself
//! with exit status 0, 1 or 2, and none panics. Accepted runs are kept small by budget
//! flags that are not drawn (`--duration`, `--seeds`, `--runs`, `--quick`); flags whose
//! values make a run long (wall-clock benchmarks' times) draw only values the range refuses.
//! `PROPTEST_CASES` sets the cases (default 32).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Wall time one run may take.
const TIME_CAP: Duration = Duration::from_secs(25);

/// Address space one run may take, in KiB (`ulimit -v`): 6 GiB, above the litmus
/// explorer's 4 GiB budget and `velos sim`'s 256 MiB of emulated memory.
const MEMORY_CAP_KIB: u64 = 6 << 20;

/// How a flag's values are drawn.
#[derive(Clone, Copy, Debug)]
enum Values {
    /// No value: a switch.
    Switch,
    /// Whole numbers: extremes, small ones and malformed ones.
    Number,
    /// Only numbers the flag's range refuses (or malformed): its accepted values would make
    /// the run long.
    Refused,
    /// Times (`2ms`, nanoseconds), extreme and malformed.
    Time,
    /// One of these words.
    Words(&'static [&'static str]),
}

use Values::{Number, Refused, Switch, Time, Words};

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "10",
    "64",
    "100",
    "4096",
    "65536",
    "1000000",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "-1",
    "-3",
    "1.5",
    "0x10",
    "",
    "x",
];
const REFUSED: &[&str] = &[
    "0",
    "-1",
    "18446744073709551615",
    "99999999999999999999999",
    "x",
    "",
];
const TIMES: &[&str] = &[
    "0",
    "1",
    "1ns",
    "500ns",
    "10us",
    "100us",
    "250us",
    "1ms",
    "1s",
    "3600s",
    "3601s",
    "18446744073709551615",
    "-1us",
    "1.5us",
    "nan",
    "us",
    "5 parsecs",
];
const NODE_EVENTS: &[&str] = &[
    "0@50us",
    "1@100us",
    "1@100us+50us",
    "2@10us+20us:5us",
    "1@100us+0",
    "63@1us",
    "65535@1us",
    "65536@1us",
    "-1@1us",
    "1@",
    "@",
    "1@18446744073709551615+18446744073709551615:18446744073709551615",
    "x",
];

/// A subcommand: the arguments every run gets (the budget), the flags drawn, and how
/// many of them at least.
struct Sub {
    base: &'static [&'static str],
    flags: Vec<(&'static str, Values)>,
    at_least: usize,
}

fn subcommands(paper: &'static str) -> Vec<Sub> {
    let paper_words: &'static [&'static str] = Box::leak(Box::new([
        paper,
        "/nonexistent.litmus",
        "/dev/null",
        "/proc/self/fd",
    ]));
    let out_dirs: &'static [&'static str] = &["/proc/nope", "/dev/null", "/dev/null/x"];
    let latencies: &'static [&'static str] = &["cluster", "paper-cx6", "generic", "uniform", "x"];
    vec![
        Sub {
            base: &["sim", "--duration", "300us", "--json"],
            flags: vec![
                ("--duration", Words(&["0", "3601s", "-1us", "x"])),
                ("--replicas", Number),
                ("--seed", Number),
                ("--crash-leader-at", Time),
                ("--crash", Words(NODE_EVENTS)),
                ("--replace", Words(NODE_EVENTS)),
                ("--pause", Words(NODE_EVENTS)),
                ("--delay", Words(NODE_EVENTS)),
                ("--delay-from", Words(NODE_EVENTS)),
                ("--snapshot-every", Number),
                ("--snapshot-bytes", Number),
                (
                    "--members",
                    Words(&["0,1,5", "0,1", "0", "", "0,,1", "64", "-1", "x"]),
                ),
                (
                    "--reconfigure",
                    Words(&["100us=0,1", "100us=0,1,2,3", "1s=0", "x=0", "="]),
                ),
                ("--lease", Time),
                ("--slots", Number),
                ("--value-size", Number),
                ("--values", Number),
                ("--pipeline", Number),
                ("--near-overflow", Number),
                ("--epochs", Number),
                ("--latency", Words(latencies)),
                ("--jitter", Number),
                ("--jitter-within-cost", Switch),
                ("--interval", Time),
            ],
            at_least: 0,
        },
        Sub {
            base: &["vopr", "--json"],
            flags: vec![
                (
                    "--seeds",
                    Words(&[
                        "0..1",
                        "7..8",
                        "18446744073709551614..18446744073709551615",
                        "1..0",
                        "0..0",
                        "-1..1",
                        "0..",
                        "..",
                        "x",
                    ]),
                ),
                ("--jobs", Number),
                ("--overflow", Switch),
                ("--list-mutants", Switch),
                ("--mutant", Words(&["x", ""])),
                ("--history-out", Words(&["/dev/null", "/proc/nope/h.jsonl"])),
            ],
            at_least: 1, // --seeds: the default is 100 seeds
        },
        Sub {
            base: &["litmus", "--runs", "3"],
            flags: vec![
                ("--runs", Refused),
                ("--max-states", Number),
                ("--backend", Words(&["sim", "mem", "verbs", "x"])),
                ("--seed", Number),
                ("--json", Switch),
                ("", Words(paper_words)),
            ],
            at_least: 0,
        },
        Sub {
            base: &["demo", "--duration", "300ms"],
            flags: vec![
                ("--duration", Words(&["0", "601s", "-1s", "x"])),
                ("--crash-at", Time),
                ("--interval", Time),
                ("--clients", Number),
                ("--out", Words(out_dirs)),
                ("--json", Switch),
            ],
            at_least: 1,
        },
        Sub {
            base: &[
                "bench",
                "embed",
                "--quick",
                "--commits-1client",
                "300",
                "--commits-many",
                "600",
                "--warmup-commits",
                "20",
            ],
            flags: vec![
                ("--repeats", Refused),
                ("--commits-many", Refused),
                ("--outstanding", Number),
                ("--velos-pipeline", Number),
                ("--velos-follower-idle", Words(&["spin", "sleep", "nap"])),
                ("--omnipaxos-tick-us", Refused),
                ("--omnipaxos-election-ticks", Refused),
                ("--out", Words(out_dirs)),
                ("--json", Switch),
            ],
            at_least: 1,
        },
        Sub {
            base: &[
                "bench",
                "locks",
                "--quick",
                "--warmup-us",
                "5",
                "--measure-us",
                "20",
                "--jobs",
                "2",
            ],
            flags: vec![
                (
                    "--processes",
                    Words(&["1", "4,8", "256", "260", "1025", "65536", "0", "-3", "x"]),
                ),
                ("--locks", Words(&["rma-rw", "x"])),
                (
                    "--writer-percent",
                    Words(&["0", "100", "101", "-1", "nan", "inf", "1e308"]),
                ),
                ("--per-node", Number),
                ("--t-dc", Number),
                ("--t-l-node", Number),
                ("--t-l-root", Number),
                ("--t-r", Number),
                (
                    "--cs-ops",
                    Words(&["1", "100", "10000", "10001", "0", "-1", "x"]),
                ),
                (
                    "--think-ops",
                    Words(&["0", "100", "10000", "10001", "-1", "x"]),
                ),
                ("--seed", Number),
                // Not `uniform`: every step costs 1 ns there, and 256 processes take
                // minutes of wall time per 25 µs of virtual time (a known limit).
                (
                    "--latency",
                    Words(&["cluster", "paper-cx6", "generic", "x"]),
                ),
                ("--out", Words(out_dirs)),
                ("--json", Switch),
            ],
            at_least: 0,
        },
        Sub {
            base: &["bench", "latency", "--quick", "--jobs", "2"],
            flags: vec![
                ("--protocols", Words(&["velos", "mu", "velos,mu", "x"])),
                ("--sizes", Words(&["1", "1,65536", "65537", "0", "-1", "x"])),
                ("--memory", Words(&["host", "device", "both", "x"])),
                ("--proposals", Words(&["1", "5", "100001", "0", "-1", "x"])),
                (
                    "--warmup-proposals",
                    Words(&["0", "3", "100001", "-1", "x"]),
                ),
                ("--gap-ns", Number),
                ("--idle-pause-ns", Number),
                ("--failure-timeout-ns", Number),
                ("--cpu-replays", Words(&["1", "3", "1001", "0", "x"])),
                ("--seed", Number),
                ("--latency", Words(latencies)),
                ("--out", Words(out_dirs)),
                ("--json", Switch),
            ],
            at_least: 0,
        },
        Sub {
            base: &[
                "bench", "failover", "--quick", "--seeds", "1", "--jobs", "2",
            ],
            flags: vec![
                ("--seeds", Refused),
                ("--jobs", Refused),
                ("--protocols", Words(&["velos", "mu", "x"])),
                ("--first-seed", Number),
                ("--value-bytes", Number),
                ("--velos-crash-us", Number),
                ("--velos-after-us", Number),
                ("--mu-crash-us", Number),
                ("--mu-after-us", Number),
                ("--latency", Words(latencies)),
                ("--out", Words(out_dirs)),
                ("--json", Switch),
            ],
            at_least: 0,
        },
        Sub {
            base: &["bench", "join", "--seeds", "1"],
            flags: vec![
                ("--seeds", Refused),
                ("--slots", Number),
                (
                    "--snapshot-bytes",
                    Words(&["0", "8", "4096", "16777217", "-1", "x"]),
                ),
                ("--snapshot-every", Number),
                ("--latency", Words(latencies)),
                ("--former-leader", Switch),
                ("--json", Switch),
            ],
            at_least: 0,
        },
        Sub {
            base: &[
                "bench",
                "emulator",
                "--repeats",
                "1",
                "--ops",
                "1000",
                "--json",
            ],
            flags: vec![
                ("--suite", Words(paper_words)),
                ("--repeats", Refused),
                ("--ops", Refused),
            ],
            at_least: 0,
        },
        Sub {
            base: &["bench", "bank", "--runs", "1"],
            flags: vec![
                ("--runs", Refused),
                ("--state-bytes", Words(&["63", "65", "67108872", "-8", "x"])),
                ("--async-clients", Words(&["5", "-1", "x"])),
                ("--before-crash", Words(&["99ms", "0", "601s", "-1s", "x"])),
                ("--vote-timeout", Words(&["0", "601s", "x"])),
                ("--place", Words(&["nowhere"])),
            ],
            at_least: 1, // every drawn value is refused: no run starts
        },
        Sub {
            base: &["node", "--id", "0", "--rendezvous-timeout", "1s"],
            flags: vec![
                (
                    "--config",
                    Words(&["/nonexistent.toml", "/dev/null", "CLUSTER"]),
                ),
                ("--id", Number),
                ("--client", Words(&["script", "closed-loop", "stdin", "x"])),
                ("--values", Number),
                ("--value-size", Number),
                ("--slots", Number),
                ("--run-for", Time),
                ("--heartbeat-period", Time),
                ("--failure-timeout", Time),
                ("--embed", Switch),
                ("--join", Switch),
                ("--incarnation", Number),
            ],
            at_least: 1,
        },
    ]
}

/// The flags drawn for one run: a subset of `sub`'s flags, each with a value index.
fn draw(sub: &Sub) -> impl Strategy<Value = Vec<(usize, usize)>> {
    let n = sub.flags.len();
    let at_least = sub.at_least;
    proptest::sample::subsequence((0..n).collect::<Vec<_>>(), at_least..=n.min(5))
        .prop_flat_map(|flags| {
            let len = flags.len();
            (Just(flags), proptest::collection::vec(any::<usize>(), len))
        })
        .prop_map(|(flags, picks)| flags.into_iter().zip(picks).collect())
}

/// The argument vector of `sub` with the drawn flags (`CLUSTER`: `cluster`).
fn argv(sub: &Sub, drawn: &[(usize, usize)], cluster: &str) -> Vec<String> {
    let mut args: Vec<String> = sub.base.iter().map(|s| s.to_string()).collect();
    for &(flag, pick) in drawn {
        let (name, values) = sub.flags[flag];
        let value = match values {
            Switch => None,
            Number => Some(NUMBERS[pick % NUMBERS.len()]),
            Refused => Some(REFUSED[pick % REFUSED.len()]),
            Time => Some(TIMES[pick % TIMES.len()]),
            Words(words) => Some(words[pick % words.len()]),
        };
        // A flag drawn that the base already sets replaces the base's value.
        if let Some(at) = args
            .iter()
            .position(|a| a == name)
            .filter(|_| !name.is_empty())
        {
            args.drain(at..(at + 2).min(args.len()));
        }
        if !name.is_empty() {
            args.push(name.to_string());
        }
        if let Some(v) = value {
            args.push(if v == "CLUSTER" { cluster } else { v }.to_string());
        }
    }
    args
}

/// Runs `PROGRAM ARGS` under the memory cap and `time_cap`: its exit status (`None`:
/// ended by a signal, or killed at the time cap), its standard error and its wall time.
fn run_capped(
    program: &str,
    args: &[String],
    time_cap: Duration,
) -> (Option<i32>, String, Duration) {
    let stderr = tempfile::tempfile().expect("a temporary file");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_CAP_KIB} && exec \"$0\" \"$@\""))
        .arg(program)
        .args(args)
        // glibc reserves address space per thread arena: keep the cap about the heap.
        .env("MALLOC_ARENA_MAX", "2")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.try_clone().expect("a second handle"))
        .spawn()
        .expect("velos runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("a status") {
            break Some(status);
        }
        if started.elapsed() > time_cap {
            child.kill().expect("killed");
            child.wait().expect("reaped");
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    let mut file = stderr;
    std::io::Seek::rewind(&mut file).expect("rewound");
    std::io::Read::read_to_string(&mut file, &mut text).expect("utf-8");
    (status.and_then(|s| s.code()), text, started.elapsed())
}

/// The cases per subcommand: `PROPTEST_CASES`, else 32 in all.
fn cases(subs: usize) -> u32 {
    let total = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32u32);
    total.div_ceil(subs as u32).max(1)
}

#[test]
fn every_drawn_command_line_ends_with_0_1_or_2_and_no_panic() {
    let paper = concat!(env!("CARGO_MANIFEST_DIR"), "/../velos-sim/litmus/paper");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = dir.path().join("three.toml");
    std::fs::write(
        &cluster,
        "cluster_id = \"fuzz\"\nsecret = \"0123456789abcdef\"\n\
         [[node]]\nid = 0\naddress = \"127.0.0.1:7400\"\n\
         [[node]]\nid = 1\naddress = \"127.0.0.1:7401\"\n\
         [[node]]\nid = 2\naddress = \"127.0.0.1:7402\"\n",
    )
    .expect("written");
    let cluster = cluster.display().to_string();
    let subs = subcommands(paper);
    let ran = std::cell::Cell::new(0u32);
    let exits = std::cell::RefCell::new([0u32; 3]);
    for sub in &subs {
        // A node over real verbs would wait for its peers: drawn only without them.
        if sub.base[0] == "node" && cfg!(feature = "verbs") {
            continue;
        }
        let mut runner = TestRunner::new(Config {
            cases: cases(subs.len()),
            failure_persistence: None,
            // Each shrinking step runs the binary again.
            max_shrink_iters: 32,
            ..Config::default()
        });
        runner
            .run(&draw(sub), |drawn| {
                let args = argv(sub, &drawn, &cluster);
                let (code, stderr, took) = run_capped(env!("CARGO_BIN_EXE_velos"), &args, TIME_CAP);
                let line = format!("velos {}", args.join(" "));
                prop_assert!(took <= TIME_CAP, "{line}: over {TIME_CAP:?}\n{stderr}");
                prop_assert!(
                    matches!(code, Some(0..=2)),
                    "{line}: exit {code:?} (took {took:?})\n{stderr}"
                );
                prop_assert!(!stderr.contains("panicked"), "{line}: a panic\n{stderr}");
                exits.borrow_mut()[code.expect("checked") as usize] += 1;
                ran.set(ran.get() + 1);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // The premise: runs happened, and the draws reach both accepted runs and refusals.
    let (ran, exits) = (ran.get(), exits.into_inner());
    println!(
        "{ran} runs; exit 0: {}, 1: {}, 2: {}",
        exits[0], exits[1], exits[2]
    );
    assert!(ran >= subs.len() as u32 - 1, "{ran} runs");
    assert!(exits[2] > 0, "no refusal drawn: {exits:?}");
}

/// The harness itself: a run over the time cap, a run ended by a signal and a run over
/// the memory cap are told apart from a run that ends with its own status.
#[test]
fn the_caps_catch_a_hang_a_signal_and_a_memory_hog() {
    let sh = |script: &str| {
        let args = ["-c".to_string(), script.to_string()];
        run_capped("sh", &args, Duration::from_secs(1))
    };
    let (code, _, took) = sh("sleep 5");
    assert_eq!(code, None, "a hang is killed");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(sh("kill -ABRT $$").0, None, "an abort is no exit status");
    assert_eq!(sh("exit 2").0, Some(2));
    let (code, _, _) = sh(&format!(
        "ulimit -v; test $(ulimit -v) -le {MEMORY_CAP_KIB}"
    ));
    assert_eq!(code, Some(0), "the memory cap is in force");
    let sub = Sub {
        base: &["sim", "--replicas", "3"],
        flags: vec![("--replicas", Number)],
        at_least: 1,
    };
    assert_eq!(argv(&sub, &[(0, 14)], ""), ["sim", "--replicas", "-1"]);
}
