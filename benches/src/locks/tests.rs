//! Structure of the lock benchmark's output (never its speed), and the locks' mutual
//! exclusion under the explorer.

use super::worker::{LockRef, Worker, Workload};
use super::*;
use velos_sim::explore::explore_checked;

#[test]
fn quick_sweep_has_every_lock_and_point() {
    let config = LocksConfig::quick();
    let report = run(&config, false).expect("the quick sweep runs");
    assert_eq!(
        report.points.len(),
        config.locks.len() * config.processes.len() * config.writer_percents.len()
    );
    for &lock in &config.locks {
        for &p in &config.processes {
            for &fw in &config.writer_percents {
                let x = report
                    .point(lock, p, fw)
                    .unwrap_or_else(|| panic!("{} P={p} F_W={fw} missing", lock.name()));
                assert!(x.throughput_per_s > 0.0, "{x:?}");
                assert!(x.acquisitions > 0, "{x:?}");
                assert!(x.latency_p50_ns > 0 && x.latency_p50_ns <= x.latency_p99_ns);
                assert_eq!(x.nodes, p.div_ceil(config.per_node));
                if !lock.reader_writer() {
                    assert_eq!(x.acquisitions, x.writer_acquisitions, "exclusive only");
                }
            }
        }
    }
    // The table names every lock; the JSON has every point; the plots exist.
    let table = table(&report);
    for lock in &config.locks {
        assert!(table.contains(lock.name()), "{table}");
    }
    let dir = std::env::temp_dir().join(format!("velos-locks-test-{}", std::process::id()));
    write_outputs(&report, &dir).expect("outputs written");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("locks.json")).expect("json"))
            .expect("valid JSON");
    let points = json["points"].as_array().expect("points");
    assert_eq!(points.len(), report.points.len());
    for key in [
        "lock",
        "processes",
        "writer_percent",
        "throughput_per_s",
        "latency_p50_ns",
        "latency_p99_ns",
        "acquisitions",
        "virtual_ns",
    ] {
        assert!(points.iter().all(|x| !x[key].is_null()), "{key} missing");
    }
    for fw in &config.writer_percents {
        let svg = std::fs::read_to_string(dir.join(format!("throughput_fw_{fw}.svg")))
            .expect("plot written");
        assert!(svg.starts_with("<svg"), "an SVG document");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One writer and one reader on two nodes, one acquisition each, explored exhaustively:
/// the foMPI lock never lets them in together, and every run finishes.
/// A window too short for any acquisition fails the point: mutual exclusion held on
/// nothing, and no throughput or latency was measured.
#[test]
fn a_window_without_an_acquisition_fails_the_point() {
    let config = LocksConfig {
        warmup_ns: 0,
        measure_ns: 1,
        ..LocksConfig::quick()
    };
    for lock in LockKind::ALL {
        let e = run_point(&config, lock, 4, 100.0).expect_err("nothing was acquired");
        assert!(
            format!("{e:#}").contains("no acquisition"),
            "{}: {e:#}",
            lock.name()
        );
    }
}

#[test]
fn fompi_excludes_writers_exhaustively() {
    let mut layout = LayoutBuilder::new(2);
    let nodes = [NodeId(0), NodeId(1), NodeId(1)];
    let lock = fompi::FompiRw::new(&mut layout, NodeId(0), &nodes);
    let own: Vec<Loc> = nodes.iter().map(|&n| layout.alloc(n)).collect();
    let mut machine = Machine::new(&layout.build());
    // writer_ppm 1_000_000: always a writer; 0: always a reader.
    for (i, ppm) in [1_000_000, 0, 1_000_000].into_iter().enumerate() {
        let work = Workload {
            writer_ppm: ppm,
            cs_ops: 1,
            think_ops: 0,
            limit: Some(1),
        };
        let t = machine.spawn(
            nodes[i],
            Worker::new(LockRef::Fompi(lock.clone()), i, 7, work, own[i]),
        );
        machine.set_private(own[i], t);
        for w in lock.private_words(i) {
            machine.set_private(w, t);
        }
    }
    let e = explore_checked(
        machine,
        5_000_000,
        |m| m.read(lock.word()),
        |m| {
            let inside: Vec<bool> = m
                .threads
                .iter()
                .filter(|t| t.process.entered > t.process.left)
                .map(|t| t.process.writer)
                .collect();
            let writers = inside.iter().filter(|w| **w).count();
            (writers > 1 || (writers == 1 && inside.len() > 1))
                .then(|| format!("inside together: {inside:?}"))
        },
    )
    .expect("explored within budget, exclusion holds");
    assert_eq!(e.stuck, 0, "every run can finish");
    assert_eq!(
        e.outcomes.into_iter().collect::<Vec<_>>(),
        vec![Some(0)],
        "the lock word returns to 0"
    );
}

/// The sweep's measured steps (each run once: an exclusive lock's point is repeated for
/// every F_W).
fn steps_simulated(report: &LocksReport) -> u64 {
    let mut runs: Vec<(&str, usize, u64)> = report
        .points
        .iter()
        .map(|x| (x.lock, x.processes, x.steps))
        .collect();
    let exclusive = |name: &str| {
        LockKind::ALL
            .iter()
            .any(|l| l.name() == name && !l.reader_writer())
    };
    runs.dedup_by(|a, b| exclusive(a.0) && a.0 == b.0 && a.1 == b.1);
    runs.iter().map(|r| r.2).sum()
}

/// The work bound checked before a sweep runs: the estimate stays near or above what the
/// sweep simulates on the cluster profile and on `uniform` (every step 1 ns), and the
/// windows scaled to a profile keep its work near the cluster profile's.
#[test]
fn the_estimate_bounds_the_work_and_scaled_windows_keep_it_alike() {
    let cluster = LocksConfig::quick();
    assert_eq!(
        cluster
            .clone()
            .on_profile(LatencyModel::cluster())
            .measure_ns,
        cluster.measure_ns,
        "the cluster profile keeps its windows"
    );
    let uniform = LocksConfig::quick().on_profile(LatencyModel::uniform());
    assert!(
        uniform.measure_ns < cluster.measure_ns / 100,
        "{}",
        uniform.measure_ns
    );
    let mut measured = Vec::new();
    for config in [&cluster, &uniform] {
        let report = run(config, false).expect("the quick sweep runs");
        assert!(report.points.iter().all(|x| x.acquisitions > 0));
        let steps = steps_simulated(&report);
        let estimate = config.estimated_steps();
        assert!(steps > 0);
        assert!(
            u128::from(steps) * 4 <= estimate * 5,
            "{}: {steps} steps, estimated {estimate}",
            config.latency.name
        );
        measured.push(steps);
    }
    // Unscaled, `uniform` simulates ≈ 45 times the cluster profile's steps.
    assert!(
        measured[1] < 4 * measured[0],
        "cluster {} steps, uniform {}",
        measured[0],
        measured[1]
    );
    // A sweep past the bound is refused before it runs, naming the flags.
    let mut huge = LocksConfig::full();
    huge.measure_ns = 1_000_000_000;
    let e = huge.check().unwrap_err().to_string();
    assert!(
        e.contains("--measure-us") && e.contains("--processes"),
        "{e}"
    );
}
