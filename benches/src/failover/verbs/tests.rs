//! The verbs failover benchmark's bookkeeping, without a device: what a trial reports,
//! the medians and ratios, and the premise that every crash was followed by a decision.

use super::*;

fn trial(k: u32, detect_us: Option<u64>, failover_us: Option<u64>) -> VerbsTrial {
    VerbsTrial {
        trial: k,
        crashed: 0,
        applied_before: 50,
        detect_ns: detect_us.map(|us| us * 1_000),
        failover_ns: failover_us.map(|us| us * 1_000),
        false_suspicions: None,
    }
}

#[test]
fn the_summary_splits_detection_from_takeover_and_the_ratio_compares_failovers() {
    let velos = summarise(
        Protocol::Velos,
        vec![
            trial(0, Some(20), Some(30)),
            trial(1, Some(22), Some(40)),
            trial(2, Some(21), Some(35)),
        ],
    );
    let mu = summarise(
        Protocol::Mu,
        vec![
            trial(0, Some(600), Some(700)),
            trial(1, Some(580), Some(690)),
            trial(2, Some(620), Some(760)),
        ],
    );
    assert_eq!(
        (velos.detect_us, velos.failover_us),
        (Some(21.0), Some(35.0))
    );
    assert_eq!(velos.takeover_us, Some(14.0), "takeovers 10, 18, 14");
    assert_eq!(
        (mu.failover_us, mu.failover_p99_us),
        (Some(700.0), Some(760.0))
    );
    let r = report(
        &VerbsFailoverConfig::full(),
        "rxe0".into(),
        vec![velos, mu],
        1.0,
    );
    assert_eq!(r.ratio_p50, Some(20.0));
    assert!(
        r.missing_premises().is_empty(),
        "{:?}",
        r.missing_premises()
    );
    let table = table(&r);
    assert!(table.contains("p50 20.0x"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("velos ")), "{table}");
}

#[test]
fn a_crash_without_a_decision_after_it_is_a_missing_premise() {
    let velos = summarise(
        Protocol::Velos,
        vec![trial(0, Some(20), Some(30)), trial(1, Some(20), None)],
    );
    assert_eq!(velos.no_failover, 1);
    let r = report(
        &VerbsFailoverConfig::full(),
        "rxe0".into(),
        vec![velos],
        1.0,
    );
    assert_eq!(r.ratio_p50, None, "no Mu, no ratio");
    assert_eq!(r.missing_premises().len(), 1, "{:?}", r.missing_premises());
    let none = report(&VerbsFailoverConfig::full(), "rxe0".into(), Vec::new(), 1.0);
    assert!(!none.missing_premises().is_empty(), "nothing measured");
}

#[test]
fn bad_configurations_are_refused_with_the_reason() {
    let ok = VerbsFailoverConfig::full();
    assert!(ok.check().is_ok());
    let refused = |c: VerbsFailoverConfig| format!("{:#}", c.check().unwrap_err());
    assert!(
        refused(VerbsFailoverConfig {
            trials: 0,
            ..ok.clone()
        })
        .contains("trials")
    );
    assert!(
        refused(VerbsFailoverConfig {
            time_scale: 0,
            ..ok.clone()
        })
        .contains("time scale")
    );
    assert!(
        refused(VerbsFailoverConfig {
            value_bytes: 300,
            ..ok.clone()
        })
        .contains("bytes")
    );
    assert!(
        refused(VerbsFailoverConfig {
            after_entries: 0,
            ..ok.clone()
        })
        .contains("after")
    );
    assert!(
        refused(VerbsFailoverConfig {
            protocols: Vec::new(),
            ..ok
        })
        .contains("protocol")
    );
}
