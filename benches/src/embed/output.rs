//! What the embedding benchmark prints and writes: the table and `embed.json`.

use super::EmbedReport;
use super::report::SystemSummary;
use anyhow::Context;
use std::fmt::Write;
use std::path::Path;

/// The short table: per system the medians, the ratios, the targets, what the engine did
/// per decision, and the notes.
pub fn table(report: &EmbedReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<17} | {:>13} | {:>13} | {:>14} | {:>16} | {:>19} | {:>15}",
        "",
        "commits/s 1c",
        "commits/s many",
        "lat p50/p99 µs",
        "engine ns/dec",
        "leader thr ns/dec",
        "process ns/dec"
    );
    let _ = writeln!(
        out,
        "{:<17} | {:>13} | {:>13} | {:>14} | {:>16} | {:>19} | {:>15}",
        "", "", "", "1 client", "1c / many", "1c / many", "1c / many"
    );
    let systems = [&report.velos, &report.omnipaxos, &report.omnipaxos_threads];
    for s in systems {
        let _ = writeln!(
            out,
            "{:<17} | {:>13.0} | {:>13.0} | {:>14} | {:>16} | {:>19} | {:>15}",
            s.system,
            s.commits_per_s_1client,
            s.commits_per_s_many,
            format!(
                "{:.2}/{:.2}",
                s.latency_p50_ns_1client as f64 / 1e3,
                s.latency_p99_ns_1client as f64 / 1e3
            ),
            pair(s.cpu_ns_per_decision, s.cpu_ns_per_decision_many),
            pair(
                s.leader_thread_cpu_ns_per_decision,
                s.leader_thread_cpu_ns_per_decision_many
            ),
            pair(
                s.process_cpu_ns_per_decision,
                s.process_cpu_ns_per_decision_many
            ),
        );
    }
    if let (Some(one), Some(many)) = (
        report.velos.nic_cpu_ns_per_decision,
        report.velos.nic_cpu_ns_per_decision_many,
    ) {
        let _ = writeln!(
            out,
            "velos in-process NIC (in the leader thread's figure; a real NIC's work): {one:.0} / \
             {many:.0} ns per decision (1c / many)"
        );
    }
    let _ = writeln!(
        out,
        "velos / omnipaxos commits/s: {:.2}x one client, {:.2}x many ({} outstanding)",
        report.ratio_1client, report.ratio_many, report.config.outstanding
    );
    let [one, many, batched] = report.ratio_threads;
    let _ = writeln!(
        out,
        "velos / omnipaxos-threads commits/s: {one:.2}x one client, {many:.2}x many, \
         {batched:.2}x batched"
    );
    for s in systems {
        let _ = writeln!(
            out,
            "{} batched ({} outstanding, {} commands per entry): {:.0} commands/s, engine \
             {:.0} ns, leader thread {:.0} ns per command",
            s.system,
            report.config.outstanding,
            report.config.batch,
            s.commits_per_s_batched,
            s.cpu_ns_per_command_batched,
            s.leader_thread_cpu_ns_per_command_batched
        );
    }
    let _ = writeln!(
        out,
        "velos / omnipaxos commands/s, batched: {:.2}x",
        report.ratio_batched
    );
    if let (Some(p50), Some(p99)) = (report.velos.submit_p50_us, report.velos.submit_p99_us) {
        let rate = report
            .submit_runs
            .iter()
            .map(|r| r.submits_per_s)
            .sum::<f64>()
            / report.submit_runs.len().max(1) as f64;
        let _ = writeln!(
            out,
            "velos Cluster::submit, one client thread: p50 {p50:.1} µs, p99 {p99:.1} µs \
             ({rate:.0} submits/s)"
        );
    }
    for t in &report.targets {
        let verdict = if t.met { "met" } else { "missed" };
        let _ = writeln!(
            out,
            "target {}: {:.2} against {} ({verdict})",
            t.name, t.value, t.bound
        );
    }
    for s in systems {
        let _ = writeln!(out, "{}", counts_line(s));
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

fn pair(a: f64, b: f64) -> String {
    format!("{a:.0} / {b:.0}")
}

/// What the engine did per decision, one client then many.
fn counts_line(s: &SystemSummary) -> String {
    let mut line = format!("{} per decision (1 client | many):", s.system);
    for (name, one) in &s.per_decision_1client {
        let many = s.per_decision_many.get(name).copied().unwrap_or(0.0);
        let _ = write!(line, " {name} {one:.2}|{many:.2}");
    }
    line
}

/// Writes `embed.json` into `dir`.
pub fn write_outputs(report: &EmbedReport, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("embed.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(())
}
