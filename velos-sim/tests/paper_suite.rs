//! The whole litmus suite under `velos-sim/litmus/` on the real model: every file passes,
//! and each file's explored state count is pinned (stateright style), so any change to the
//! model or the explorer shows up here as a changed number. After an intended change, copy
//! the regenerated table the failure message prints into [`STATES`].

use std::collections::BTreeMap;
use std::path::Path;
use velos_sim::litmus::{RunOptions, collect_files, run_file};

/// Explored states per file, relative to `velos-sim/litmus/`.
const STATES: &[(&str, usize)] = &[
    ("loopback/loopback-fig2d.litmus", 14),
    ("loopback/loopback-fig6a.litmus", 36),
    ("loopback/loopback-put-acked-early.litmus", 12),
    ("loopback/loopback-put-gf.litmus", 9),
    ("loopback/loopback-rcas-rfaa.litmus", 81),
    ("paper/fig2a-nopoll.litmus", 26),
    ("paper/fig2a.litmus", 14),
    ("paper/fig2b.litmus", 77),
    ("paper/fig2c.litmus", 56),
    ("paper/fig2d.litmus", 14),
    ("paper/fig2e.litmus", 44),
    ("paper/fig5-gf.litmus", 89),
    ("paper/fig5.litmus", 138),
    ("paper/fig6a.litmus", 36),
    ("paper/fig6b.litmus", 92),
    ("paper/fig6c.litmus", 81),
    ("paper/fig7a.litmus", 169),
    ("paper/fig7b-rcas.litmus", 153),
    ("paper/fig7b-rfaa.litmus", 258),
    ("paper/sec2.3-cpu-cas.litmus", 7),
    ("rules/rule1-rfence-does-not-wait-for-rw.litmus", 563),
    ("rules/rule1-rfence-orders-put-after-get.litmus", 191),
    ("rules/rule10-cas-cas-atomic.litmus", 69),
    ("rules/rule11-faa-faa-atomic.litmus", 93),
    ("rules/rule12-atomic-write-before-later-put.litmus", 155),
    ("rules/rule12-atomic-write-overtakes-get.litmus", 183),
    ("rules/rule13-lock-freed-at-commit.litmus", 135),
    ("rules/rule13-lock-held-until-write-commits.litmus", 81),
    ("rules/rule2-put-read-overtakes-get.litmus", 492),
    ("rules/rule2-put-reads-after-pending-local-write.litmus", 39),
    ("rules/rule3-put-write-overtakes-get.litmus", 150),
    ("rules/rule3-put-write-waits-for-older-put.litmus", 99),
    ("rules/rule4-put-lands-while-later-op-pending.litmus", 1006),
    ("rules/rule4-rw-commits-in-order.litmus", 161),
    ("rules/rule5-ack-waits-for-older-get.litmus", 259),
    ("rules/rule5-put-acked-before-it-lands.litmus", 120),
    ("rules/rule6-get-ignores-other-qp-rw.litmus", 121),
    ("rules/rule6-get-overtakes-get.litmus", 174),
    ("rules/rule6-get-waits-for-own-rw.litmus", 22),
    ("rules/rule7-local-writes-issued-in-order.litmus", 24),
    ("rules/rule7-rmw-result-before-its-write-lands.litmus", 145),
    (
        "rules/rule8-local-write-lands-while-later-op-pending.litmus",
        864,
    ),
    ("rules/rule8-local-writes-land-in-order.litmus", 41),
    ("rules/rule9-atomic-overtakes-get.litmus", 318),
    ("rules/rule9-failing-cas-respects-lock.litmus", 104),
];

#[test]
fn every_file_passes_with_its_pinned_state_count() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("litmus");
    let files = collect_files(&root).expect("the litmus suite is readable");
    assert!(
        !files.is_empty(),
        "no .litmus files under {}",
        root.display()
    );
    let pinned: BTreeMap<&str, usize> = STATES.iter().copied().collect();
    assert_eq!(pinned.len(), STATES.len(), "a file is pinned twice");
    let mut problems = Vec::new();
    let mut table = String::new();
    let mut seen = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).expect("under the root");
        let name: Vec<String> = relative
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let name = name.join("/");
        let report = match run_file(file, &RunOptions::default()) {
            Ok(report) => report,
            Err(e) => {
                problems.push(format!("{name}: {}", e.0));
                continue;
            }
        };
        if !report.pass {
            problems.push(format!(
                "{name}: FAIL ({} expect={} stuck={})",
                report.verdict, report.expect, report.stuck
            ));
        }
        match pinned.get(name.as_str()) {
            None => problems.push(format!("{name}: not pinned ({} states)", report.states)),
            Some(&n) if n != report.states => {
                problems.push(format!("{name}: {} states, pinned {n}", report.states))
            }
            Some(_) => {}
        }
        table += &format!("    (\"{name}\", {}),\n", report.states);
        seen.push(name);
    }
    for name in pinned.keys() {
        if !seen.iter().any(|s| s == name) {
            problems.push(format!("{name}: pinned but not in the suite"));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\nregenerated table:\nconst STATES: &[(&str, usize)] = &[\n{table}];",
        problems.join("\n")
    );
}
