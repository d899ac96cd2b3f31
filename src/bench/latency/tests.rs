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
            }
        }
    }
    assert_eq!(report.rounds.len(), config.device_memory.len());
    assert_eq!(report.targets.len(), config.device_memory.len());
    let table = table(&report);
    assert!(
        table.contains("velos") && table.contains("mu") && table.contains("target"),
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
    let svg = std::fs::read_to_string(dir.join("latency.svg")).expect("plot written");
    assert!(svg.starts_with("<svg"), "an SVG document");
    let _ = std::fs::remove_dir_all(&dir);
}
