//! `cargo bench -p velos-bench --bench engine_profile`: the engine's decision path for a
//! profiler — the recording `cargo bench -p velos-bench --bench engine` replays (a stable
//! leader's inputs, no backend, one thread), replayed `VELOS_PROFILE_REPLAYS` times (default 20) with nothing else
//! around it, so that a profiler's counts per decision are the engine's. For instruction
//! counts per function (the figures of `paper-notes/results.md`, "The engine's CPU per
//! decision"):
//!
//! ```sh
//! cargo bench -p velos-bench --bench engine_profile --no-run
//! valgrind --tool=callgrind --toggle-collect='*Recording*replay*' \
//!     target/release/deps/engine_profile-* 1client
//! callgrind_annotate --inclusive=no callgrind.out.*
//! ```
//!
//! The argument picks the load: `1client` (default), `64outstanding` or `64submitted`. Prints the
//! decisions replayed, so that counts divide into counts per decision. With
//! `VELOS_PROFILE_PART=nic` it replays the same window's operations on the in-process NIC
//! instead (`Recording::replay_nic`; callgrind's `--toggle-collect='*replay_nic*'`).
//! Reports; asserts nothing about speed.

use velos_bench::engine::{Client, record_with};

fn main() -> anyhow::Result<()> {
    velos_bench::release_engine("engine_profile")?;
    let load = std::env::args().nth(1).unwrap_or_else(|| "1client".into());
    let (outstanding, client) = match load.as_str() {
        "1client" => (1, Client::Propose),
        "64outstanding" => (64, Client::Propose),
        "64submitted" => (64, Client::Submit),
        other => anyhow::bail!(
            "engine_profile: the load is 1client, 64outstanding or 64submitted, not {other:?}"
        ),
    };
    let replays: u64 = match std::env::var("VELOS_PROFILE_REPLAYS") {
        Ok(n) => n
            .parse()
            .ok()
            .filter(|&n| (1..=10_000).contains(&n))
            .ok_or_else(|| anyhow::anyhow!("VELOS_PROFILE_REPLAYS: 1 to 10000, not {n:?}"))?,
        Err(_) => 20,
    };
    // The recording runs the replicas in real time: slowed down by a profiler, a leader
    // can be deposed while recording (its failure timeout is wall-clock); try again.
    let mut attempts = 0;
    let recording = loop {
        attempts += 1;
        match record_with(2_000, 4_000, outstanding, client) {
            Ok(recording) => break recording,
            Err(e) if attempts < 5 => eprintln!("engine_profile: recording again ({e})"),
            Err(e) => return Err(e),
        }
    };
    let nic = match std::env::var("VELOS_PROFILE_PART").as_deref() {
        Ok("nic") => true,
        Ok("engine") | Err(_) => false,
        Ok(other) => anyhow::bail!("VELOS_PROFILE_PART: engine or nic, not {other:?}"),
    };
    if nic {
        let fabric = recording.nic_fabric()?;
        for _ in 0..replays {
            recording.replay_nic(&fabric)?;
        }
    } else {
        for _ in 0..replays {
            let replica = recording.start();
            recording.replay(replica)?;
        }
    }
    println!(
        "engine_profile/{load}: {} replays of {} decisions: {} decisions",
        replays,
        recording.decisions,
        replays * recording.decisions
    );
    Ok(())
}
