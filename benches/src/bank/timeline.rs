//! Commit times as clients saw them, merged and sorted: the longest gap between two
//! consecutive commits around a window, and rates.

/// Every commit's time (ns since the run began), sorted.
#[derive(Clone, Debug)]
pub struct Timeline {
    at: Vec<u64>,
    /// The run's end: stands for a commit after the last (a gap open at the end counts).
    end: u64,
}

/// A gap between two consecutive commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// When it began: the commit before it (ns).
    pub from: u64,
    /// How long it lasted (ns).
    pub len: u64,
}

impl Timeline {
    /// The commits at `at` (any order) of a run that ended at `end`.
    pub fn new(mut at: Vec<u64>, end: u64) -> Timeline {
        at.sort_unstable();
        assert!(
            at.last().is_none_or(|&l| l <= end),
            "commits before the end"
        );
        Timeline { at, end }
    }

    /// Commits in the run.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// The longest gap between consecutive commits that overlaps `[from, to]` — from the
    /// last commit at or before `from` to the first after it, and so on to the first
    /// commit after `to` (or the run's end); `None` if the window holds no such pair.
    pub fn longest_gap(&self, from: u64, to: u64) -> Option<Gap> {
        assert!(from <= to, "a window");
        let first = self.at.partition_point(|&t| t <= from).saturating_sub(1);
        let points = self.at[first..].iter().copied().chain([self.end]);
        let mut best: Option<Gap> = None;
        let mut prev: Option<u64> = None;
        for t in points {
            if let Some(p) = prev.filter(|&p| p <= to) {
                let gap = Gap {
                    from: p,
                    len: t - p,
                };
                if best.is_none_or(|b| gap.len > b.len) {
                    best = Some(gap);
                }
            }
            if t > to {
                break;
            }
            prev = Some(t);
        }
        best
    }

    /// Every gap longer than `min` that begins in `[from, to]`, in order.
    pub fn gaps_over(&self, from: u64, to: u64, min: u64) -> Vec<Gap> {
        let lo = self.at.partition_point(|&t| t < from);
        let hi = self.at.partition_point(|&t| t <= to);
        let next = self.at[lo..].iter().skip(1).copied().chain([self.end]);
        let gaps = self.at[lo..hi].iter().zip(next).map(|(&a, b)| Gap {
            from: a,
            len: b - a,
        });
        gaps.filter(|g| g.len > min).collect()
    }

    /// Commits in `[from, to)`.
    pub fn count(&self, from: u64, to: u64) -> usize {
        let lo = self.at.partition_point(|&t| t < from);
        let hi = self.at.partition_point(|&t| t < to);
        hi.saturating_sub(lo)
    }

    /// Commits per second in `[from, to)`.
    pub fn rate(&self, from: u64, to: u64) -> f64 {
        self.count(from, to) as f64 * 1e9 / to.saturating_sub(from).max(1) as f64
    }

    /// The last commit at or before `t`.
    pub fn last_until(&self, t: u64) -> Option<u64> {
        let i = self.at.partition_point(|&c| c <= t);
        i.checked_sub(1).map(|i| self.at[i])
    }
}
