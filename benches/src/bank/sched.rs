//! Where the threads' time went (Linux): a sampler that reads every thread's scheduler
//! statistics (`/proc/self/task/*/schedstat`: time on a CPU, time runnable but waiting
//! for one) every [`PERIOD`], so that a gap between commits can be told apart as the
//! leader's thread waiting for a core (CPU contention) or running (the engine's own
//! work). Off unless asked: the sampling costs a few per cent of a core.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the threads are sampled.
pub const PERIOD: Duration = Duration::from_millis(1);

/// One thread's counters at one moment.
#[derive(Clone, Debug)]
struct Thread {
    tid: u64,
    name: String,
    ran_ns: u64,
    waited_ns: u64,
}

/// Every thread's counters, sampled over a run.
#[derive(Debug, Default)]
pub struct Samples {
    /// (ns since the run began, every thread's counters).
    at: Vec<(u64, Vec<Thread>)>,
}

/// Every thread of this process now (none where `/proc` has no scheduler statistics).
fn threads() -> Vec<Thread> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(name), Some(stat)) = (read("comm"), read("schedstat")) else {
            continue;
        };
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
        if let (Some(Some(ran_ns)), Some(Some(waited_ns))) = (fields.next(), fields.next()) {
            let name = name.trim().to_string();
            out.push(Thread {
                tid,
                name,
                ran_ns,
                waited_ns,
            });
        }
    }
    out
}

impl Samples {
    /// Samples every [`PERIOD`] until `stop`, timing each from `epoch`.
    pub fn run(epoch: Instant, stop: &AtomicBool) -> Samples {
        let mut s = Samples::default();
        while !stop.load(Ordering::SeqCst) {
            let at = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            s.at.push((at, threads()));
            std::thread::sleep(PERIOD);
        }
        s
    }

    /// Per thread, from the last sample at or before `from` to the first at or after
    /// `to`: `name: ran x ms, waited y ms` for each thread that did either (the interval
    /// measured first); empty without samples around it.
    pub fn between(&self, from: u64, to: u64) -> Vec<String> {
        assert!(from <= to, "an interval");
        let before = self.at.iter().rev().find(|(t, _)| *t <= from);
        let after = self.at.iter().find(|(t, _)| *t >= to);
        let (Some((t0, a)), Some((t1, b))) = (before, after) else {
            return Vec::new();
        };
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut out = vec![format!("threads over {:.3} ms around it:", ms(t1 - t0))];
        for y in b {
            let x = a.iter().find(|x| x.tid == y.tid);
            let ran = y.ran_ns - x.map_or(0, |x| x.ran_ns.min(y.ran_ns));
            let waited = y.waited_ns - x.map_or(0, |x| x.waited_ns.min(y.waited_ns));
            if ran + waited >= 100_000 {
                let line = format!(
                    "{:<16} ran {:>7.3} ms, waited for a core {:>7.3} ms",
                    y.name,
                    ms(ran),
                    ms(waited)
                );
                out.push(line);
            }
        }
        out
    }
}
