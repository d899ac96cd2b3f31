//! The tiny built-in clients of `velos node`: what the node proposes while it leads.
//!
//! * [`Client::Script`]: `values` values, pipelined (as many in flight as the leader's
//!   window takes): throughput.
//! * [`Client::ClosedLoop`]: `values` values, one at a time: the next is proposed once
//!   the previous is decided; each decision's latency (from the proposal to the
//!   replica's report that its slot decided, wall clock) goes into a histogram.
//! * [`Client::Stdin`]: one value per line of standard input (hex), proposed in order;
//!   each outcome is reported (`{"proposal": id, "slot": s}` or `{"proposal": id,
//!   "error": "..."}`), as are lines that are not hex.

use super::event::{Event, LatencySummary};
use crossbeam_channel::{Receiver, unbounded};
use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::io::BufRead;
use std::time::{Duration, Instant};
use velos_core::log::{ProposeError, Replica};
use velos_rdma::WorkRequests;

/// Which client a node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Pipelined proposals of generated values.
    Script,
    /// One generated value at a time, with latencies.
    ClosedLoop,
    /// Values read from standard input.
    Stdin,
}

/// Decision latencies of a closed-loop client, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies {
            histogram: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
}

impl Latencies {
    /// Records one decision that took `took`.
    pub fn record(&mut self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.histogram.saturating_record(ns);
    }

    /// The summary, or `None` before the first decision.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.histogram.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(LatencySummary {
            count: self.histogram.len(),
            p50_us: us(self.histogram.value_at_quantile(0.5)),
            p90_us: us(self.histogram.value_at_quantile(0.9)),
            p99_us: us(self.histogram.value_at_quantile(0.99)),
            max_us: us(self.histogram.max()),
            requests_per_decision: None,
            doorbells_per_decision: None,
        })
    }
}

/// The closed-loop client's state: the proposal in flight, and when it was made.
#[derive(Debug, Default)]
pub struct ClosedLoop {
    /// Values still to propose.
    pub remaining: u64,
    /// The proposal in flight: its id and when it was made.
    pub in_flight: Option<(u64, Instant)>,
    /// Latencies so far.
    pub latencies: Latencies,
    /// The work requests (and doorbells) the node had counted at the first proposal, and
    /// at the last decision.
    pub requests: Option<(WorkRequests, WorkRequests)>,
}

/// Runs a [`Client`] against a replica, between the replica's steps.
#[derive(Debug)]
pub struct Driver {
    client: Client,
    me: u16,
    size: usize,
    closed: ClosedLoop,
    /// Values proposed so far by the closed loop or the script (numbers its values).
    proposed: u64,
    /// Values the script has still to propose ([`Client::Script`] only).
    script_left: u64,
    /// Standard input's lines, read by a thread ([`Client::Stdin`] only).
    lines: Option<Receiver<String>>,
    /// Lines read so far; the stdin proposals in flight by replica proposal id.
    line_count: u64,
    stdin_in_flight: HashMap<u64, u64>,
    /// Whether the closed loop's summary has been reported.
    reported: bool,
}

impl Driver {
    /// A driver for `client` on node `me`, proposing `values` values of `size` bytes.
    pub fn new(client: Client, me: u16, values: u64, size: usize) -> Driver {
        let lines = (client == Client::Stdin).then(|| {
            let (tx, rx) = unbounded();
            std::thread::spawn(move || {
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        Driver {
            client,
            me,
            size,
            closed: ClosedLoop {
                remaining: if client == Client::ClosedLoop {
                    values
                } else {
                    0
                },
                ..ClosedLoop::default()
            },
            proposed: 0,
            script_left: if client == Client::Script { values } else { 0 },
            lines,
            line_count: 0,
            stdin_in_flight: HashMap::new(),
            reported: false,
        }
    }

    /// Proposes what the client has to propose now and reports outcomes; `posted` counts
    /// the RDMA work requests and doorbells the node has posted so far (zero if it does
    /// not count them).
    pub fn pump(
        &mut self,
        replica: &mut Replica,
        posted: WorkRequests,
        on_event: &mut impl FnMut(Event),
    ) {
        for (id, result) in replica.take_results() {
            if let Some((ours, at)) = self.closed.in_flight
                && ours == id
            {
                self.closed.in_flight = None;
                if result.is_ok() {
                    self.closed.latencies.record(at.elapsed());
                    self.closed.remaining -= 1;
                    if let Some((_, last)) = &mut self.closed.requests {
                        *last = posted;
                    }
                }
            }
            if let Some(line) = self.stdin_in_flight.remove(&id) {
                on_event(outcome(line, result.map_err(|e| e.to_string())));
            }
        }
        match self.client {
            Client::Script => self.pump_script(replica),
            Client::ClosedLoop => {
                if self.closed.requests.is_none() && replica.is_leader() {
                    self.closed.requests = Some((posted, posted));
                }
                self.pump_closed_loop(replica, on_event);
            }
            Client::Stdin => self.pump_stdin(replica, on_event),
        }
    }

    /// Keeps the leader's pipeline full while values are left: value `n` names this
    /// node, and `n` with the incarnation in its high 16 bits (a replacement's values are
    /// new ones).
    fn pump_script(&mut self, replica: &mut Replica) {
        let pipeline = replica.config().pipeline as usize;
        while self.script_left > 0 && replica.is_leader() && replica.proposals_waiting() < pipeline
        {
            let n = self.proposed | replica.incarnation() << 48;
            if replica
                .propose(generated_value(self.me, n, self.size))
                .is_err()
            {
                break; // not leading after all, or the log is full: at the next turn
            }
            self.proposed += 1;
            self.script_left -= 1;
        }
    }

    fn pump_closed_loop(&mut self, replica: &mut Replica, on_event: &mut impl FnMut(Event)) {
        if self.closed.in_flight.is_some() || !replica.is_leader() {
            return;
        }
        if self.closed.remaining == 0 {
            if !self.reported
                && let Some(latency) = self.latency()
            {
                self.reported = true;
                on_event(Event::Latency { latency });
            }
            return;
        }
        let value = generated_value(self.me, self.proposed, self.size);
        match replica.propose(value) {
            Ok(id) => {
                self.proposed += 1;
                self.closed.in_flight = Some((id, Instant::now()));
            }
            // Not leading after all, or busy: try again at the next turn.
            Err(ProposeError::NotLeader { .. } | ProposeError::Busy(_)) => {}
            // The log cannot take more: stop measuring.
            Err(_) => self.closed.remaining = 0,
        }
    }

    fn pump_stdin(&mut self, replica: &mut Replica, on_event: &mut impl FnMut(Event)) {
        let Some(lines) = &self.lines else { return };
        while let Ok(line) = lines.try_recv() {
            let number = self.line_count;
            self.line_count += 1;
            let proposed = parse_hex_value(&line)
                .and_then(|value| replica.propose(value).map_err(|e| e.to_string()));
            match proposed {
                Ok(id) => {
                    self.stdin_in_flight.insert(id, number);
                }
                Err(error) => on_event(outcome(number, Err(error))),
            }
        }
    }

    /// The closed loop's latencies so far, if it decided anything.
    pub fn latency(&self) -> Option<LatencySummary> {
        let mut summary = self.closed.latencies.summary()?;
        if let Some((first, last)) = self.closed.requests
            && last.posted > first.posted
        {
            let per = |n: u64| n as f64 / summary.count as f64;
            summary.requests_per_decision = Some(per(last.posted - first.posted));
            summary.doorbells_per_decision = Some(per(last.doorbells - first.doorbells));
        }
        Some(summary)
    }
}

pub(crate) fn outcome(proposal: u64, result: Result<u64, String>) -> Event {
    match result {
        Ok(slot) => Event::Outcome {
            proposal,
            slot: Some(slot),
            error: None,
        },
        Err(error) => Event::Outcome {
            proposal,
            slot: None,
            error: Some(error),
        },
    }
}

/// The `n`-th generated value of node `me`, `size` bytes: the proposer's id (2 bytes,
/// little endian), `n` (8 bytes), then zeros.
pub fn generated_value(me: u16, n: u64, size: usize) -> Vec<u8> {
    assert!(
        size >= 10,
        "a value of {size} bytes cannot name its proposer"
    );
    let mut v = Vec::with_capacity(size);
    v.extend_from_slice(&me.to_le_bytes());
    v.extend_from_slice(&n.to_le_bytes());
    v.resize(size, 0);
    v
}

/// A line of standard input as a value: hex digits (surrounding blanks ignored).
pub fn parse_hex_value(line: &str) -> Result<Vec<u8>, String> {
    let text = line.trim();
    if text.len() % 2 != 0 {
        return Err(format!("{text:?}: an odd number of hex digits"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| format!("{text:?}: not hex at byte {}", i / 2))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_summarise_what_was_recorded() {
        let mut l = Latencies::default();
        assert!(l.summary().is_none());
        for us in 1..=100 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary().unwrap();
        assert_eq!(s.count, 100);
        assert!((s.p50_us - 50.0).abs() < 0.1, "{s:?}");
        assert!((s.p99_us - 99.0).abs() < 0.1, "{s:?}");
        assert!((s.max_us - 100.0).abs() < 0.1, "{s:?}");
    }

    #[test]
    fn hex_lines_parse_and_bad_ones_say_why() {
        assert_eq!(parse_hex_value(" 00ff10 \n"), Ok(vec![0, 255, 16]));
        assert_eq!(parse_hex_value(""), Ok(vec![]));
        assert!(parse_hex_value("abc").unwrap_err().contains("odd"));
        assert!(parse_hex_value("zz").unwrap_err().contains("not hex"));
    }

    #[test]
    fn generated_values_name_their_proposer() {
        let v = generated_value(258, 7, 16);
        assert_eq!(v.len(), 16);
        assert_eq!(&v[..2], &[2, 1]);
        assert_eq!(&v[2..10], &7u64.to_le_bytes());
    }
}
