//! The demo's report: the timeline, the leader change, the checks; printed as text or
//! written as JSON and an SVG timeline.

use super::DemoConfig;
use std::fmt;
use std::path::{Path, PathBuf};

/// One interval of the timeline.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Interval {
    /// Its start (ms from the start of the run).
    pub start_ms: f64,
    /// Writes acknowledged in it.
    pub commits: u64,
    /// Gets answered in it.
    pub gets: u64,
    /// The leader as a live replica saw it at the interval's end.
    pub leader: Option<u16>,
}

/// The crash of the leader and what followed.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LeaderChange {
    /// The crashed leader.
    pub crashed: u16,
    /// When it crashed (ms from the start).
    pub crash_ms: f64,
    /// The leader the survivors moved to.
    pub new_leader: Option<u16>,
    /// From the crash until a live replica saw the new leader (ms).
    pub elected_after_ms: Option<f64>,
    /// From the crash until the first write acknowledged once the new leader was seen
    /// (ms); writes the old leader decided just before it stopped do not count.
    pub first_commit_after_ms: Option<f64>,
    /// The survivors' commit rate against the three replicas': writes acknowledged per
    /// interval in the whole intervals after the first commit under the new leader, over
    /// those in the whole intervals before the crash ([`survivors_rate`]); none when
    /// either side has no whole interval or nothing was committed before the crash.
    pub survivors_rate: Option<f64>,
}

/// The survivors' commit rate against the three replicas' (see
/// [`LeaderChange::survivors_rate`]): `timeline`'s intervals of `interval_ms` that end by
/// `crash_ms`, against those that start at or after `resumed_ms` (the first commit under
/// the new leader) and end by `end_ms` (the run's end: a last, cut interval is left out).
pub fn survivors_rate(
    timeline: &[Interval],
    interval_ms: f64,
    crash_ms: f64,
    (resumed_ms, end_ms): (f64, f64),
) -> Option<f64> {
    let mean =
        |xs: Vec<u64>| (!xs.is_empty()).then(|| xs.iter().sum::<u64>() as f64 / xs.len() as f64);
    let before = mean(
        timeline
            .iter()
            .filter(|i| i.start_ms + interval_ms <= crash_ms)
            .map(|i| i.commits)
            .collect(),
    )?;
    let after = mean(
        timeline
            .iter()
            .filter(|i| i.start_ms >= resumed_ms && i.start_ms + interval_ms <= end_ms)
            .map(|i| i.commits)
            .collect(),
    )?;
    (before > 0.0).then(|| after / before)
}

/// How the leaders packed the clients' writes (the cluster's metrics at the end).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Batching {
    /// Batches committed.
    pub batches: u64,
    /// Mean commands per batch.
    pub commands_per_batch: f64,
    /// The most commands in one batch.
    pub batch_commands_max: u64,
    /// Median propose-to-commit latency at the leader (ms).
    pub latency_p50_ms: f64,
    /// 99th percentile of it (ms).
    pub latency_p99_ms: f64,
}

/// The checks on the survivors' maps.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Checks {
    /// The leader crashed, a survivor took over, and a write was acknowledged under it.
    pub failed_over: bool,
    /// The replicas that did not crash.
    pub survivors: Vec<u16>,
    /// Every survivor's map is the same, and there are two or more to compare.
    pub survivors_agree: bool,
    /// Every survivor's map is the one the acknowledged writes make (a write in doubt
    /// may or may not have taken effect).
    pub match_acknowledged: bool,
    /// Keys whose value in a survivor's map no acknowledged write explains.
    pub missing_writes: Vec<String>,
    /// Writes whose response (the value they replaced) was not what their client's
    /// earlier writes of the key had left (each client writes in a session: every write
    /// applies once, retries included).
    pub wrong_responses: u64,
    /// Keys in the first survivor's map at the end.
    pub keys_at_end: usize,
    /// Entries that did not decode as commands (over every replica).
    pub rejected_entries: usize,
}

/// A power loss of every replica and the recovery from disk (`--power-loss-at`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct PowerLoss {
    /// When every replica crashed (ms from the start).
    pub at_ms: f64,
    /// Every slot below it was on a majority's disks then (`Cluster::durable_index`).
    pub durable_index: u64,
    /// The recovered log's next slot (`Cluster::first_slot`).
    pub recovered_slot: u64,
    /// `Cluster::recover`'s wall time (ms).
    pub recover_ms: f64,
    /// Writes acknowledged before the power loss.
    pub acknowledged: u64,
    /// Of them, those below the durable index (acknowledged as durable).
    pub acknowledged_durable: u64,
    /// Of them, those the recovered log does not hold (acknowledged, never durable).
    pub lost: u64,
    /// Keys whose recovered value no acknowledged write below the recovered log's end
    /// explains, and replicas whose recovered maps differ.
    pub mismatches: Vec<String>,
}

impl PowerLoss {
    /// Every durable write came back and nothing else is unexplained; its premise, a
    /// write acknowledged as durable.
    pub fn ok(&self) -> bool {
        self.acknowledged_durable > 0
            && self.recovered_slot >= self.durable_index
            && self.mismatches.is_empty()
    }
}

/// What [`run`](super::run) reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoReport {
    /// The configuration.
    pub config: DemoConfig,
    /// Puts acknowledged.
    pub puts_acked: u64,
    /// Deletes acknowledged.
    pub dels_acked: u64,
    /// Gets answered (from the leader's map).
    pub gets: u64,
    /// Gets that did not see the client's last acknowledged write of their key.
    pub stale_gets: u64,
    /// Writes their clients' sessions sent again after their leader crashed holding them
    /// (outcome unknown): each still applied once.
    pub retries: u64,
    /// Why the client stopped early, if it did.
    pub client_stopped: Option<String>,
    /// Changes of the leader seen during the run.
    pub leader_changes: u32,
    /// The crash and the new leader.
    pub leader_change: Option<LeaderChange>,
    /// Batches and commit latency.
    pub batching: Batching,
    /// Commits per interval.
    pub timeline: Vec<Interval>,
    /// The checks.
    pub checks: Checks,
    /// The power loss and the recovery, with `--power-loss-at`.
    pub power_loss: Option<PowerLoss>,
}

impl DemoReport {
    /// Whether the run failed over, and the survivors agree and hold every acknowledged
    /// write.
    pub fn ok(&self) -> bool {
        self.checks.failed_over
            && self.checks.survivors_agree
            && self.checks.match_acknowledged
            && self.checks.missing_writes.is_empty()
            && self.checks.wrong_responses == 0
            && self.checks.rejected_entries == 0
            && self.power_loss.as_ref().is_none_or(PowerLoss::ok)
    }

    /// Writes `report.json` and `timeline.svg` into `dir` (created if missing); their paths.
    pub fn write_files(&self, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let json = dir.join("report.json");
        std::fs::write(&json, serde_json::to_string_pretty(self)? + "\n")?;
        let svg = dir.join("timeline.svg");
        super::plot::timeline(self, &svg)?;
        Ok(vec![json, svg])
    }
}

impl fmt::Display for DemoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.config.interval.as_secs_f64() * 1e3;
        writeln!(f, "timeline ({ms:.0} ms intervals):")?;
        let crash = self.leader_change.as_ref().map(|c| c.crash_ms);
        let mut shown_leader = None;
        for i in &self.timeline {
            let mut note = String::new();
            if crash.is_some_and(|c| c >= i.start_ms && c < i.start_ms + ms) {
                note += "  <- leader crashed";
            }
            let lost = self.power_loss.as_ref().map(|p| p.at_ms);
            if lost.is_some_and(|c| c >= i.start_ms && c < i.start_ms + ms) {
                note += "  <- power lost: every replica";
            }
            if i.leader != shown_leader {
                if let Some(l) = i.leader {
                    note += &format!("  leader {l}");
                }
                shown_leader = i.leader;
            }
            writeln!(
                f,
                "  {:>7.0} ms {:>6} commits {:>6} gets {}",
                i.start_ms, i.commits, i.gets, note
            )?;
        }
        if let Some(c) = &self.leader_change {
            let opt = |x: Option<f64>| x.map_or("never".into(), |x| format!("{x:.1} ms"));
            writeln!(
                f,
                "leader {} crashed at {:.1} ms; new leader {} seen after {}; first commit under it after {}",
                c.crashed,
                c.crash_ms,
                c.new_leader.map_or("none".into(), |l| l.to_string()),
                opt(c.elected_after_ms),
                opt(c.first_commit_after_ms)
            )?;
            if let Some(rate) = c.survivors_rate {
                writeln!(
                    f,
                    "the survivors commit {rate:.2}x the three replicas' writes per interval"
                )?;
            }
        }
        writeln!(
            f,
            "clients ({}): {} puts and {} deletes acknowledged, {} gets ({} stale), {} retries",
            self.config.clients,
            self.puts_acked,
            self.dels_acked,
            self.gets,
            self.stale_gets,
            self.retries
        )?;
        let b = &self.batching;
        writeln!(
            f,
            "batches: {} ({:.1} commands each on average, at most {}); commit latency p50 {:.3} ms, p99 {:.3} ms",
            b.batches,
            b.commands_per_batch,
            b.batch_commands_max,
            b.latency_p50_ms,
            b.latency_p99_ms
        )?;
        if let Some(why) = &self.client_stopped {
            writeln!(f, "clients stopped early: {why}")?;
        }
        let c = &self.checks;
        writeln!(
            f,
            "survivors {:?}: maps {} ({} keys), {}; {} leader change(s)",
            c.survivors,
            if c.survivors_agree {
                "identical"
            } else if c.survivors.len() < 2 {
                "NOT COMPARED (fewer than two)"
            } else {
                "DIFFER"
            },
            c.keys_at_end,
            if c.match_acknowledged && c.missing_writes.is_empty() {
                "every acknowledged write present".to_string()
            } else {
                format!("MISSING {:?}", c.missing_writes)
            },
            self.leader_changes
        )?;
        if let Some(p) = &self.power_loss {
            writeln!(
                f,
                "power loss of every replica at {:.1} ms: durable index {}, recovered to slot {} \
                 in {:.1} ms; {} writes acknowledged before, {} of them durable, {} lost (never \
                 durable); {}",
                p.at_ms,
                p.durable_index,
                p.recovered_slot,
                p.recover_ms,
                p.acknowledged,
                p.acknowledged_durable,
                p.lost,
                if p.ok() {
                    "every durable write recovered".to_string()
                } else if p.acknowledged_durable == 0 {
                    "NOTHING WAS DURABLE: nothing checked".to_string()
                } else {
                    format!("RECOVERY WRONG: {:?}", p.mismatches)
                }
            )?;
        }
        if c.wrong_responses > 0 {
            writeln!(f, "WRONG RESPONSES: {} writes", c.wrong_responses)?;
        }
        if !c.failed_over {
            writeln!(
                f,
                "no failover: no write was acknowledged under a new leader after the crash"
            )?;
        }
        write!(f, "{}", if self.ok() { "OK" } else { "FAILED" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rate compares whole intervals only: before the crash, and from the first commit
    /// under the new leader to the end; none without both sides or a rate before.
    #[test]
    fn the_survivors_rate_compares_whole_intervals_around_the_failover() {
        let timeline: Vec<Interval> = [10, 10, 4, 0, 6, 8, 8, 3]
            .iter()
            .enumerate()
            .map(|(k, &commits)| Interval {
                start_ms: 50.0 * k as f64,
                commits,
                gets: 0,
                leader: None,
            })
            .collect();
        // Crash at 120 ms: before, the intervals at 0 and 50; the first commit under the
        // new leader at 190 ms: after, those at 200, 250, 300 (350 is cut by the end).
        let rate = survivors_rate(&timeline, 50.0, 120.0, (190.0, 390.0));
        assert_eq!(rate, Some(((6.0 + 8.0 + 8.0) / 3.0) / 10.0));
        assert_eq!(survivors_rate(&timeline, 50.0, 20.0, (190.0, 390.0)), None);
        assert_eq!(survivors_rate(&timeline, 50.0, 120.0, (390.0, 390.0)), None);
        let idle: Vec<Interval> = timeline
            .iter()
            .map(|i| Interval {
                commits: 0,
                ..i.clone()
            })
            .collect();
        assert_eq!(survivors_rate(&idle, 50.0, 120.0, (190.0, 390.0)), None);
    }
}
