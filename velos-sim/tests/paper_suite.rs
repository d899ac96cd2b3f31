//! The whole litmus suite under `velos-sim/litmus/` on the real model: every file passes,
//! and each file's explored state count is pinned (stateright style), so any change to the
//! model or the explorer shows up here as a changed number. After an intended change, copy
//! the regenerated table the failure message prints into [`STATES`].

use std::collections::BTreeMap;
use std::path::Path;
use velos_sim::litmus::{RunOptions, collect_files, run_file};

/// Explored states per file, relative to `velos-sim/litmus/`.
const STATES: &[(&str, usize)] = &[
    ("locks/fig11a-wlock-get.litmus", 1039),
    ("locks/fig11b-wlock-wait.litmus", 606),
    ("locks/fig11c-slock.litmus", 877),
    ("locks/fig12a-slock-unlocked-reader.litmus", 316),
    ("locks/fig12b-nlock-unlocked-reader.litmus", 277),
    ("locks/fig12c-nlock-locked-reader.litmus", 1256),
    ("locks/fig12c-nlock-other-node.litmus", 2500),
    ("locks/fig8a-wlock-cpu.litmus", 803),
    ("locks/fig8b-wlock-puts.litmus", 21604),
    ("locks/fig8c-gf-no-lock.litmus", 73),
    ("locks/fig8d-wlock-gf.litmus", 4397),
    ("locks/fig8e-slock.litmus", 3861),
    ("locks/fig8f-nlock-data-node.litmus", 727),
    ("locks/fig8f-nlock-other-node.litmus", 1006),
    ("loopback/loopback-fig2d.litmus", 11),
    ("loopback/loopback-fig6a.litmus", 24),
    ("loopback/loopback-put-acked-early.litmus", 10),
    ("loopback/loopback-put-gf.litmus", 8),
    ("loopback/loopback-rcas-rfaa.litmus", 49),
    ("paper/fig2a-nopoll.litmus", 15),
    ("paper/fig2a.litmus", 11),
    ("paper/fig2b.litmus", 30),
    ("paper/fig2c.litmus", 24),
    ("paper/fig2d.litmus", 11),
    ("paper/fig2e.litmus", 23),
    ("paper/fig5-gf.litmus", 28),
    ("paper/fig5.litmus", 35),
    ("paper/fig6a.litmus", 24),
    ("paper/fig6b.litmus", 56),
    ("paper/fig6c.litmus", 49),
    ("paper/fig7a.litmus", 111),
    ("paper/fig7b-rcas.litmus", 97),
    ("paper/fig7b-rfaa.litmus", 162),
    ("paper/sec2.3-cpu-cas.litmus", 6),
    ("rules/rule1-rfence-does-not-wait-for-rw.litmus", 103),
    ("rules/rule1-rfence-orders-get-after-get.litmus", 59),
    ("rules/rule1-rfence-orders-put-after-get.litmus", 53),
    ("rules/rule10-cas-cas-atomic.litmus", 37),
    ("rules/rule11-faa-faa-atomic.litmus", 61),
    ("rules/rule12-atomic-write-before-later-put.litmus", 88),
    ("rules/rule12-atomic-write-overtakes-get.litmus", 129),
    ("rules/rule13-lock-freed-at-commit.litmus", 94),
    ("rules/rule13-lock-held-until-write-commits.litmus", 49),
    ("rules/rule2-put-read-overtakes-get.litmus", 166),
    ("rules/rule2-put-reads-after-pending-local-write.litmus", 15),
    ("rules/rule2-put-reads-in-order.litmus", 72),
    ("rules/rule3-put-write-overtakes-get.litmus", 82),
    ("rules/rule3-put-write-waits-for-older-put.litmus", 21),
    ("rules/rule4-put-lands-while-later-op-pending.litmus", 350),
    ("rules/rule4-rw-commits-in-order.litmus", 24),
    ("rules/rule5-ack-waits-for-older-get.litmus", 137),
    ("rules/rule5-put-acked-before-it-lands.litmus", 45),
    ("rules/rule6-get-ignores-other-qp-rw.litmus", 51),
    ("rules/rule6-get-overtakes-get.litmus", 68),
    ("rules/rule6-get-waits-for-own-rw.litmus", 11),
    ("rules/rule7-local-writes-issued-in-order.litmus", 17),
    ("rules/rule7-rmw-result-before-its-write-lands.litmus", 104),
    (
        "rules/rule8-local-write-lands-while-later-op-pending.litmus",
        402,
    ),
    ("rules/rule8-local-writes-land-in-order.litmus", 18),
    ("rules/rule9-atomic-overtakes-get.litmus", 159),
    ("rules/rule9-atomic-waits-for-own-rw.litmus", 15),
    ("rules/rule9-failing-cas-respects-lock.litmus", 86),
    ("rules/tso-cas-drains-the-store-buffer.litmus", 24),
    ("rules/tso-mfence-drains-the-store-buffer.litmus", 22),
    ("rules/tso-post-waits-for-older-store.litmus", 49),
    ("sc/fig15a-sc-mp.litmus", 11157),
    ("sc/fig15b-sc-sb.litmus", 222450),
    ("sc/fig15c-sc-cas-write.litmus", 1472),
    ("sc/fig15d-sc-after-put.litmus", 3324),
    ("sc/fig15e-sc-after-get.litmus", 8387),
    ("sc/sc-after-get-same-node.litmus", 4160),
    ("sc/sc-after-put-same-node.litmus", 2357),
    ("velos/seqlock-value-read-local.litmus", 86),
    ("velos/seqlock-value-read.litmus", 330),
    ("velos/write-other-qp-then-cas.litmus", 261),
    ("velos/write-then-cas-remote-reader.litmus", 166),
    ("velos/write-then-cas.litmus", 47),
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
