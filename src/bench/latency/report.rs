//! What the latency benchmark measured: the raw result of a point, the points, the
//! reference rounds and the target check.

use super::{LatencyConfig, Protocol};
use hdrhistogram::Histogram;
use serde::Serialize;

/// Where a decision's time went (means over a point, virtual ns), from the leader's own
/// steps: `turn` from the proposal to the leader's first post for it (the rest of its
/// pause or turn); `posting` from there to the post of the CAS that completed the
/// majority (the value's puts and the CASes ahead of it); `cas_round` from that post to
/// the majority's completion (the round trip, including any wait behind the value's
/// writes on the same queue pair); `notice` from there to the decision (the leader's
/// polling: a test, a load, its plan).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Phases {
    /// Proposal to the first post.
    pub turn_ns: u64,
    /// First post to the majority CAS's post.
    pub posting_ns: u64,
    /// The majority CAS's post to the majority's completion.
    pub cas_round_ns: u64,
    /// The majority's completion to the decision.
    pub notice_ns: u64,
}

/// The raw result of one point.
pub(super) struct Measured {
    pub(super) hist: Histogram<u64>,
    phase_sums: [u64; 4],
    phase_count: u64,
    pub(super) steps: u64,
    pub(super) simulated_ns: u64,
    pub(super) trace_hash: u64,
}

impl Measured {
    pub(super) fn new() -> Measured {
        Measured {
            hist: Histogram::new(3).expect("3 significant digits"),
            phase_sums: [0; 4],
            phase_count: 0,
            steps: 0,
            simulated_ns: 0,
            trace_hash: 0,
        }
    }

    pub(super) fn record(&mut self, latency_ns: u64, phases: Option<Phases>) {
        self.hist
            .record(latency_ns.max(1))
            .expect("the histogram grows");
        if let Some(p) = phases {
            let parts = [p.turn_ns, p.posting_ns, p.cas_round_ns, p.notice_ns];
            for (sum, part) in self.phase_sums.iter_mut().zip(parts) {
                *sum += part;
            }
            self.phase_count += 1;
        }
    }

    pub(super) fn phases(&self) -> Option<Phases> {
        let n = self.phase_count;
        (n > 0).then(|| Phases {
            turn_ns: self.phase_sums[0] / n,
            posting_ns: self.phase_sums[1] / n,
            cas_round_ns: self.phase_sums[2] / n,
            notice_ns: self.phase_sums[3] / n,
        })
    }
}

/// One measured point.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyPoint {
    /// The protocol's name.
    pub protocol: &'static str,
    /// Value size in bytes.
    pub size: usize,
    /// Replicated words in NIC device memory.
    pub device_memory: bool,
    /// Decisions measured.
    pub decisions: u64,
    /// Median decision latency (virtual ns).
    pub p50_ns: u64,
    /// 99th percentile (virtual ns).
    pub p99_ns: u64,
    /// Mean (virtual ns).
    pub mean_ns: f64,
    /// Longest (virtual ns).
    pub max_ns: u64,
    /// Where the time went (means), when the protocol reports it.
    pub phases: Option<Phases>,
    /// Virtual time simulated (ns).
    pub simulated_ns: u64,
    /// Machine steps simulated.
    pub steps: u64,
    /// The simulator's trace hash (hex): the same configuration gives the same hash.
    pub trace_hash: String,
}

/// The reference patterns under one placement: medians over `rounds` rounds (virtual ns).
#[derive(Clone, Debug, Serialize)]
pub struct RoundRef {
    /// The targets in NIC device memory.
    pub device_memory: bool,
    /// 3 CASes posted together, waited for a majority.
    pub cas_majority_ns: u64,
    /// 3 inline WRITEs posted together, waited for a majority.
    pub write_majority_ns: u64,
}

/// The target: a protocol's 1-byte median decision against one CAS round to a majority.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// The protocol's name.
    pub protocol: &'static str,
    /// The placement.
    pub device_memory: bool,
    /// The smallest size measured (1 B in the full sweep).
    pub size: usize,
    /// Its median decision latency (virtual ns).
    pub p50_ns: u64,
    /// The CAS round to a majority in the same placement (virtual ns).
    pub cas_majority_ns: u64,
    /// `p50_ns / cas_majority_ns`.
    pub ratio: f64,
    /// Whether the ratio is at most 1.05 (within 5 % of one CAS round).
    pub within_5_percent: bool,
}

/// Everything a sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    /// What was measured.
    pub config: LatencyConfig,
    /// Every point, in the order protocol, placement, size.
    pub points: Vec<LatencyPoint>,
    /// The reference patterns, per placement.
    pub rounds: Vec<RoundRef>,
    /// The target, per placement (Velos's: its 1-byte decision against one CAS round).
    pub targets: Vec<TargetCheck>,
    /// What to know when reading the numbers (how each protocol is measured).
    pub notes: Vec<String>,
    /// Wall time of the whole sweep (s).
    pub wall_seconds: f64,
}

impl LatencyReport {
    /// The point of `protocol` at `size` bytes and `device_memory`, if measured.
    pub fn point(
        &self,
        protocol: Protocol,
        size: usize,
        device_memory: bool,
    ) -> Option<&LatencyPoint> {
        self.points.iter().find(|x| {
            x.protocol == protocol.name() && x.size == size && x.device_memory == device_memory
        })
    }

    /// The reference patterns under `device_memory`, if measured.
    pub fn round(&self, device_memory: bool) -> Option<&RoundRef> {
        self.rounds
            .iter()
            .find(|r| r.device_memory == device_memory)
    }
}

/// Per placement: Velos's smallest size's median against the CAS round (the target is
/// Velos's; Mu's numbers are in the points).
pub(super) fn targets(report: &LatencyReport) -> Vec<TargetCheck> {
    let config = &report.config;
    let Some(&size) = config.sizes.iter().min() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &protocol in config.protocols.iter().filter(|&&p| p == Protocol::Velos) {
        for &dm in &config.device_memory {
            let (Some(x), Some(r)) = (report.point(protocol, size, dm), report.round(dm)) else {
                continue;
            };
            let ratio = x.p50_ns as f64 / r.cas_majority_ns as f64;
            out.push(TargetCheck {
                protocol: protocol.name(),
                device_memory: dm,
                size,
                p50_ns: x.p50_ns,
                cas_majority_ns: r.cas_majority_ns,
                ratio,
                within_5_percent: ratio <= 1.05,
            });
        }
    }
    out
}

/// The notes of a report measuring `protocols`.
pub(super) fn notes(protocols: &[Protocol]) -> Vec<String> {
    let mut notes = Vec::new();
    if protocols.contains(&Protocol::Velos) {
        notes.push(
            "velos: timed from the proposal handed to the leader to the leader reporting \
             it decided (its turn, the value's puts, the accept CASes, its polling)"
                .to_string(),
        );
    }
    if protocols.contains(&Protocol::Mu) {
        notes.push(
            "mu: timed from the leader's first write of the entry to a majority's \
             acknowledgements; the emulator's put moves one word, so Mu's fast path is one \
             WRITE per entry word (value words, then the header), not one WRITE per entry"
                .to_string(),
        );
    }
    notes
}
