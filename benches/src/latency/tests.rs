//! The `paper-cx6` profile against the paper's numbers (virtual time is exact, so these are
//! assertions), and the structure of the benchmark's output (never its speed).

use super::round::{self, RoundKind};
use super::*;

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn pattern(kind: RoundKind, latency: &LatencyModel, dm: bool) -> u64 {
    median(round::measure(kind, latency, dm, 101, 7).expect("the rounds run"))
}

/// Within `percent` % of `target`.
fn near(value: u64, target: u64, percent: u64) -> bool {
    value.abs_diff(target) * 100 <= target * percent
}

/// Without jitter every step costs its base exactly: the majority is the second post's
/// completion (node 1; the loopback to node 0 is faster), so a CAS round takes
/// 2 cpu_local + cpu_post + doorbell + 2 wire + atomic + local_mem_write and a WRITE round
/// 2 cpu_local + cpu_post + doorbell + 2 wire + put_ack; device memory replaces atomic and
/// put_ack by device_mem_access.
#[test]
fn paper_cx6_rounds_cost_their_steps_exactly_without_jitter() {
    let l = LatencyModel {
        jitter_ns: 0,
        ..LatencyModel::paper_cx6()
    };
    let common = 2 * l.cpu_local_ns + l.cpu_post_ns + l.doorbell_ns + 2 * l.wire_ns;
    let cas = common + l.atomic_ns + l.local_mem_write_ns;
    let write = common + l.put_ack_ns;
    let dm = l.device_mem_access_ns;
    assert_eq!(pattern(RoundKind::Cas, &l, false), cas);
    assert_eq!(pattern(RoundKind::Write, &l, false), write);
    assert_eq!(pattern(RoundKind::Cas, &l, true), cas - l.atomic_ns + dm);
    assert_eq!(
        pattern(RoundKind::Write, &l, true),
        write - l.put_ack_ns + dm
    );
    assert_eq!((cas, write), (1_860, 1_220), "the profile's base costs");
}

/// The paper's numbers, within ±5 %: 3 CASes to a majority ≈ 1.9 µs, 3 WRITEs ≈ 1.25 µs,
/// an MMIO doorbell ≈ 300 ns, device memory ≈ 200 ns faster on both (±25 ns).
#[test]
fn paper_cx6_matches_the_papers_numbers() {
    let l = LatencyModel::paper_cx6();
    assert_eq!(LatencyModel::by_name("paper-cx6"), Some(l.clone()));
    assert_eq!(l.doorbell_ns, 300);
    let cas = pattern(RoundKind::Cas, &l, false);
    let write = pattern(RoundKind::Write, &l, false);
    assert!(near(cas, 1_900, 5), "CAS majority {cas} ns");
    assert!(near(write, 1_250, 5), "WRITE majority {write} ns");
    let cas_dm = pattern(RoundKind::Cas, &l, true);
    let write_dm = pattern(RoundKind::Write, &l, true);
    assert!(
        (175..=225).contains(&(cas - cas_dm)),
        "device memory saves {} ns on CASes",
        cas - cas_dm
    );
    assert!(
        (175..=225).contains(&(write - write_dm)),
        "device memory saves {} ns on WRITEs",
        write - write_dm
    );
}

#[test]
fn quick_sweep_measures_every_point_and_writes_its_files() {
    let config = LatencyConfig {
        jobs: 1,
        ..LatencyConfig::quick()
    };
    let report = run(&config, false).expect("the quick sweep runs");
    assert_eq!(
        report.points.len(),
        config.protocols.len() * config.sizes.len() * config.device_memory.len()
    );
    for &p in &config.protocols {
        for &size in &config.sizes {
            for &dm in &config.device_memory {
                let x = report
                    .point(p, size, dm)
                    .unwrap_or_else(|| panic!("{} {size} B dm={dm} missing", p.name()));
                assert_eq!(x.decisions, config.proposals as u64);
                assert!(x.p50_ns > 0 && x.p50_ns <= x.p99_ns && x.p99_ns <= x.max_ns);
                assert_eq!(x.phases.is_some(), p == Protocol::Velos, "{x:?}");
                assert_eq!(x.cpu.is_some(), p == Protocol::Velos, "{x:?}");
                if let Some(c) = x.cpu {
                    // Structure only: the charge adds the path's CPU to virtual time, and
                    // the path is part of the whole window.
                    assert_eq!(x.cpu_charged_p50_ns, Some(c.cpu_charged_p50_ns));
                    assert!(c.cpu_charged_p50_ns >= x.p50_ns, "{x:?}");
                    assert!(c.cpu_charged_p99_ns >= c.cpu_charged_p50_ns, "{x:?}");
                    assert!(0.0 < c.path_steps && c.path_steps <= c.all_steps, "{x:?}");
                    assert_eq!(c.replays, config.cpu_replays);
                }
            }
        }
    }
    assert_eq!(report.rounds.len(), config.device_memory.len());
    assert_eq!(report.targets.len(), config.device_memory.len());
    for t in &report.targets {
        let x = report
            .point(Protocol::Velos, t.size, t.device_memory)
            .expect("the target's point");
        assert_eq!(t.cpu_charged_p50_ns, x.cpu_charged_p50_ns, "{t:?}");
        let ratio = t.cpu_charged_ratio.expect("a CPU-charged ratio");
        let charged = t.cpu_charged_p50_ns.expect("a CPU-charged median");
        assert!(
            (ratio - charged as f64 / t.cas_majority_ns as f64).abs() < 1e-9,
            "{t:?}"
        );
        assert_eq!(t.cpu_charged_within_25_percent, Some(ratio <= 1.25));
    }
    let table = table(&report);
    assert!(
        table.contains("velos")
            && table.contains("mu")
            && table.contains("target")
            && table.contains("velos+cpu")
            && table.contains("CPU-charged"),
        "{table}"
    );
    let dir = std::env::temp_dir().join(format!("velos-latency-test-{}", std::process::id()));
    write_outputs(&report, &dir).expect("outputs written");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("latency.json")).expect("json"))
            .expect("valid JSON");
    let points = json["points"].as_array().expect("points");
    assert_eq!(points.len(), report.points.len());
    for key in [
        "protocol",
        "size",
        "device_memory",
        "decisions",
        "p50_ns",
        "p99_ns",
    ] {
        assert!(points.iter().all(|x| !x[key].is_null()), "{key} missing");
    }
    for protocol in ["velos", "mu"] {
        assert!(
            points.iter().any(|x| x["protocol"] == protocol),
            "{protocol} missing"
        );
    }
    assert!(
        points
            .iter()
            .filter(|x| x["protocol"] == "velos")
            .all(|x| !x["phases"].is_null()),
        "velos phases missing"
    );
    for key in ["rounds", "targets", "config", "notes"] {
        assert!(!json[key].is_null(), "{key} missing");
    }
    for t in json["targets"].as_array().expect("targets") {
        for key in ["cpu_charged_p50_ns", "cpu_charged_ratio"] {
            assert!(t[key].is_number(), "targets: {key} missing in {t}");
        }
    }
    for x in points.iter().filter(|x| x["protocol"] == "velos") {
        assert!(x["cpu_charged_p50_ns"].is_number(), "{x}");
        for key in [
            "cpu_charged_p50_ns",
            "cpu_charged_p99_ns",
            "engine_cpu_path_p50_ns",
            "engine_cpu_all_p50_ns",
            "path_steps",
            "cpu_per_step_ns",
        ] {
            assert!(x["cpu"][key].is_number(), "cpu.{key} missing in {x}");
        }
    }
    let svg = std::fs::read_to_string(dir.join("latency.svg")).expect("plot written");
    assert!(svg.starts_with("<svg"), "an SVG document");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A decision's window is cut by the leader's virtual times: up to the majority CAS's
/// post on the path, the polls of the CAS round off it, from the last poll before the
/// majority's completion to the decision on it again.
#[test]
fn a_window_keeps_the_cas_round_off_the_critical_path() {
    use super::cpu::Window;
    // The proposal is input 10; the leader's steps follow it, one per input.
    let steps: Vec<(usize, u64)> = (11..=30).map(|i| (i, 100 * i as u64)).collect();
    // The majority CAS executes at 1 500 (input 15 chose it), completes at 2 500.
    let w = Window::new(10, &steps, Some((1_500, 2_500))).expect("a window");
    assert_eq!(w.start, 10);
    assert_eq!(w.ends, vec![(14, true), (23, false), (30, true)]);
    // Without the phases, or with a round too short to poll in, the whole window counts.
    let whole = vec![(30, true)];
    assert_eq!(Window::new(10, &steps, None).expect("a window").ends, whole);
    let w = Window::new(10, &steps, Some((1_500, 1_600))).expect("a window");
    assert_eq!(w.ends, whole);
    // No step recorded, or steps before the proposal: no window.
    assert!(Window::new(10, &[], None).is_none());
    assert!(Window::new(10, &[(9, 0), (11, 5)], None).is_none());
}
