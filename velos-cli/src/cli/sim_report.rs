//! What `velos sim` prints: the run, a timeline of the entries applied, each replica, a
//! durable run's figures (the power loss and the restarted run's own report), the checks.

use velos_testkit::harness::cluster::{ClusterReport, DurableReport};

/// Prints `report`: the run, its timeline, each replica, a durable run's figures, the
/// checks.
pub fn print_report(report: &ClusterReport, interval: u64) {
    let replicas = report
        .replicas
        .iter()
        .filter(|r| r.incarnation == 0)
        .count();
    let replaced = report.replicas.len() - replicas;
    println!(
        "seed {}, {} replicas{}, {} µs of virtual time, {} emulator steps",
        report.seed,
        replicas,
        if replaced > 0 {
            format!(" ({replaced} processes replaced)")
        } else {
            String::new()
        },
        report.duration_ns / 1_000,
        report.steps
    );
    // Decisions per interval, as the live replica that applied most saw them.
    let best = report
        .replicas
        .iter()
        .filter(|r| !r.crashed)
        .max_by_key(|r| r.applied.len());
    let buckets = report.duration_ns.div_ceil(interval) as usize;
    let mut per = vec![0u64; buckets.max(1)];
    if let Some(r) = best {
        for &t in &r.applied_at {
            let i = ((t / interval) as usize).min(per.len() - 1);
            per[i] += 1;
        }
    }
    println!(
        "timeline (entries applied per {} µs):",
        interval as f64 / 1e3
    );
    let mut changes = report.leader_changes.iter().peekable();
    for (i, n) in per.iter().enumerate() {
        let (from, to) = (i as u64 * interval, (i as u64 + 1) * interval);
        let mut line = format!("  {:>8.1} µs  {n:>6}", from as f64 / 1e3);
        while let Some(c) = changes.next_if(|c| c.at_ns < to) {
            line += &format!("   leader → {} at {:.1} µs", c.leader, c.at_ns as f64 / 1e3);
        }
        println!("{line}");
    }
    if report.frozen_slots > 0 {
        println!(
            "overflow fallback: {} slots froze epoch 0 and moved on",
            report.frozen_slots
        );
    }
    for r in &report.replicas {
        let copies: Vec<String> = r.installs.iter().map(|(p, _)| p.to_string()).collect();
        println!(
            "replica {}{}: {} entries applied{}{}",
            r.id,
            if r.incarnation > 0 {
                format!(" (incarnation {})", r.incarnation)
            } else {
                String::new()
            },
            r.applied.len(),
            if copies.is_empty() {
                String::new()
            } else {
                format!(", snapshots copied at {}", copies.join(", "))
            },
            if r.crashed { " (crashed)" } else { "" }
        );
    }
    if let Some(d) = &report.durable {
        print_durable(d, interval);
    }
    println!("checks:");
    for (name, ok) in &report.checks {
        println!("  {name}: {}", if *ok { "pass" } else { "FAIL" });
    }
}

/// A durable run's figures; after a power loss, the recovery and the restarted run.
fn print_durable(d: &DurableReport, interval: u64) {
    let us = |ns: Option<u64>| ns.map_or("-".into(), |ns| format!("{:.1} µs", ns as f64 / 1e3));
    let points: Vec<String> = d.points.iter().map(u64::to_string).collect();
    println!(
        "durable: index {} (disks' durable points {}); {} acknowledged slots became durable \
         ({} did not), acknowledgement → durable p50 {}, p99 {}",
        d.durable,
        points.join(", "),
        d.acknowledged_durable,
        d.acknowledged_not_durable,
        us(d.ack_to_durable_p50_ns),
        us(d.ack_to_durable_p99_ns)
    );
    if d.resumed > 0 {
        println!(
            "{} replaced process(es) resumed at their disk's newest snapshot",
            d.resumed
        );
    }
    let Some(p) = &d.power_loss else { return };
    let by_disk: Vec<String> = p.recovered_by_disk.iter().map(u64::to_string).collect();
    println!(
        "power loss at {:.1} µs: slots below {} decided, below {} durable; the disks \
         recover to {} ({} records cut, {} snapshots checked); the log restarts at slot {} \
         ({} decided slots lost, never durable)",
        p.at_ns as f64 / 1e3,
        p.decided,
        d.durable,
        by_disk.join(", "),
        p.cuts,
        p.snapshots_checked,
        p.recovered,
        p.decided - p.recovered
    );
    if p.stopped > 0 || p.flipped.is_some() {
        println!(
            "disk faults at the power loss: {} disk(s) full (stopped persisting){}",
            p.stopped,
            p.flipped.map_or(String::new(), |r| format!(
                ", a bit flipped on replica {r}'s"
            ))
        );
    }
    println!(
        "restarted from disk: first decision {} after the restart, {} slots decided",
        us(p.first_decision_ns),
        p.decided_after
    );
    if let Some(after) = &p.restarted {
        println!("--- the restarted cluster (its clock from the restart) ---");
        print_report(after, interval);
        println!("--- end of the restarted cluster ---");
    }
}
