//! The campaign's clients: each has one key-value operation outstanding at a time,
//! proposes it at whichever live replica leads (as a client library that tracks the
//! leader would), proposes it again — a new attempt, the same operation — when that
//! proposal is refused, lost, or slow, and completes it once a live replica has applied
//! it (the sessions of [`KvMachine`] make it take effect once). Every operation goes into
//! the history with its virtual invoke and response times.

use super::kv::{KvCommand, KvMachine, KvOp, value_name};
use super::scenario::Scenario;
use crate::check::linearizability::{HistoryOp, OpKind};
use crate::harness::script::Scripted;
use velos_sim::machine::Machine;
use velos_sim::rng::Rng;

/// A proposal older than this without an outcome is made again (ns).
pub(super) const RETRY_NS: u64 = 100_000;

/// A get served from the leader's lease: asked, then answered with the index it must
/// see (`velos_core::log::lease`).
#[derive(Clone, Copy, Debug)]
enum LeaseRead {
    Asked {
        replica: u16,
        id: u64,
        at_ns: u64,
    },
    /// `at_ns`: when it was asked. A replica that answered and then stops applying (a
    /// stale leader cut off by a broken queue pair, which the fault budget excuses) would
    /// hold the get for ever: after [`RETRY_NS`] it is asked again at the leader of the
    /// moment (a later answer's index is as good).
    Answered {
        replica: u16,
        index: u64,
        at_ns: u64,
    },
}

/// An operation waiting for its outcome.
#[derive(Clone, Debug)]
struct Outstanding {
    /// A get asked of the leader's lease; `None` with `through_log` once a lease read
    /// was refused (the get then goes through the log).
    lease: Option<LeaseRead>,
    through_log: bool,
    seq: u32,
    op: KvOp,
    /// The attempt number of its next proposal.
    attempt: u16,
    /// Where its newest proposal went: (replica, proposal id), and when.
    at: Option<(u16, u64, u64)>,
    /// Its entry in the history.
    index: usize,
}

#[derive(Clone, Debug)]
struct Client {
    id: u8,
    seq: u32,
    outstanding: Option<Outstanding>,
    next_at_ns: u64,
}

/// Every client, and the history they made.
#[derive(Clone, Debug)]
pub struct Clients {
    clients: Vec<Client>,
    rng: Rng,
    keys: u8,
    get_percent: u64,
    think_ns_max: u64,
    /// Gets are asked of the leader's lease first.
    leases: bool,
    /// Commands are submitted (gathered into batch entries), not proposed one an entry.
    submit: bool,
    history: Vec<HistoryOp>,
    /// Operations completed so far.
    completed: usize,
    /// Every value proposed (hex): what validity allows.
    proposed: Vec<String>,
}

impl Clients {
    /// The clients of `scenario`, none started.
    pub fn new(scenario: &Scenario) -> Clients {
        Clients {
            clients: (0..scenario.clients)
                .map(|id| Client {
                    id,
                    seq: 0,
                    outstanding: None,
                    next_at_ns: 0,
                })
                .collect(),
            rng: Rng::new(scenario.seed ^ 0x0063_6c69_656e_7473),
            keys: scenario.keys,
            get_percent: scenario.get_percent,
            think_ns_max: scenario.think_ns_max,
            leases: scenario.log.lease_ns > 0,
            submit: scenario.submit,
            history: Vec::new(),
            completed: 0,
            proposed: Vec::new(),
        }
    }

    /// Whether every operation started has completed.
    pub fn idle(&self) -> bool {
        self.clients.iter().all(|c| c.outstanding.is_none())
    }

    /// The history so far.
    pub fn history(&self) -> &[HistoryOp] {
        &self.history
    }

    /// Every value proposed, as hex.
    pub fn proposed(&self) -> &[String] {
        &self.proposed
    }

    /// One visit at `now`: outcomes taken from the live replicas, completed operations
    /// answered, slow or refused ones proposed again, and (if `start`) new operations
    /// started by idle clients whose pause is over. `next[r]`: the entries replica r's
    /// service has applied.
    pub fn visit(
        &mut self,
        now: u64,
        machine: &mut Machine<Scripted>,
        (kv, next): (&[KvMachine], &[u64]),
        start: bool,
    ) {
        let up: Vec<bool> = machine
            .threads
            .iter()
            .map(|t| machine.is_up(t.node))
            .collect();
        self.take_reads(machine, &up);
        // Proposals lost or refused: their operation is proposed again.
        for (r, thread) in machine.threads.iter_mut().enumerate() {
            if !up[r] {
                continue;
            }
            for (id, result) in thread.process.take_results() {
                if result.is_ok() {
                    continue; // decided: it completes once applied
                }
                for c in &mut self.clients {
                    if let Some(o) = &mut c.outstanding
                        && o.at.is_some_and(|(rr, ii, _)| (rr, ii) == (r as u16, id))
                    {
                        o.at = None;
                    }
                }
            }
        }
        let leader =
            (0..machine.threads.len()).find(|&r| up[r] && machine.threads[r].process.is_leader());
        for i in 0..self.clients.len() {
            self.complete(i, now, kv, &up);
            self.complete_lease_read(i, now, (kv, next), &up);
            let c = &mut self.clients[i];
            if c.outstanding.is_none() && start && now >= c.next_at_ns {
                self.start(i, now);
            }
            let leases = self.leases;
            let c = &mut self.clients[i];
            let Some(o) = &mut c.outstanding else {
                continue;
            };
            if leases && matches!(o.op, KvOp::Get { .. }) && !o.through_log {
                let stale = match o.lease {
                    None => true,
                    Some(LeaseRead::Asked { replica, at_ns, .. }) => {
                        !up[usize::from(replica)] || now.saturating_sub(at_ns) >= RETRY_NS
                    }
                    Some(LeaseRead::Answered { replica, at_ns, .. }) => {
                        !up[usize::from(replica)] || now.saturating_sub(at_ns) >= RETRY_NS
                    }
                };
                if let (Some(l), true) = (leader, stale) {
                    let id = machine.threads[l].process.read();
                    o.lease = Some(LeaseRead::Asked {
                        replica: l as u16,
                        id,
                        at_ns: now,
                    });
                }
                continue;
            }
            let stale = match o.at {
                None => true,
                Some((r, _, at)) => !up[usize::from(r)] || now.saturating_sub(at) >= RETRY_NS,
            };
            let (Some(l), true) = (leader, stale) else {
                continue;
            };
            let command = KvCommand {
                client: c.id,
                seq: o.seq,
                attempt: o.attempt,
                op: o.op,
            }
            .encode();
            let hex: String = command.iter().map(|b| format!("{b:02x}")).collect();
            let leader = &mut machine.threads[l].process;
            let taken = if self.submit {
                // Its entry's proposal: the outcome `take_results` reports for it.
                leader.submit(&command).map(|at| at.proposal)
            } else {
                leader.propose(command)
            };
            match taken {
                Ok(id) => {
                    // Each proposal is a value of its own: one lost by a leader may still
                    // be decided by the next (adopted), so it is never proposed again.
                    o.attempt += 1;
                    o.at = Some((l as u16, id, now));
                    self.proposed.push(hex);
                }
                Err(_) => o.at = None, // refused, not proposed: again at the next visit
            }
        }
    }

    /// Lease reads answered since the last visit: an index to wait for, or a refusal
    /// (the get then goes through the log).
    fn take_reads(&mut self, machine: &mut Machine<Scripted>, up: &[bool]) {
        for (r, thread) in machine.threads.iter_mut().enumerate() {
            if !up[r] {
                continue;
            }
            for (id, answer) in thread.process.take_reads() {
                let asked = |o: &&mut Outstanding| {
                    matches!(o.lease, Some(LeaseRead::Asked { replica, id: i, .. })
                        if (usize::from(replica), i) == (r, id))
                };
                let Some(o) = self
                    .clients
                    .iter_mut()
                    .filter_map(|c| c.outstanding.as_mut())
                    .find(|o| asked(o))
                else {
                    continue; // a read asked again elsewhere meanwhile
                };
                let at_ns = match o.lease {
                    Some(LeaseRead::Asked { at_ns, .. }) => at_ns,
                    _ => unreachable!("an answer to a read asked"),
                };
                match answer {
                    Ok(index) => {
                        o.lease = Some(LeaseRead::Answered {
                            replica: r as u16,
                            index,
                            at_ns,
                        })
                    }
                    Err(_) => (o.lease, o.through_log) = (None, true),
                }
            }
        }
    }

    /// Completes client `i`'s lease read once its replica applied every entry below the
    /// read's index: the state then answers it.
    fn complete_lease_read(
        &mut self,
        i: usize,
        now: u64,
        (kv, next): (&[KvMachine], &[u64]),
        up: &[bool],
    ) {
        let c = &mut self.clients[i];
        let Some(o) = &c.outstanding else {
            return;
        };
        let (Some(LeaseRead::Answered { replica, index, .. }), KvOp::Get { key }) = (o.lease, o.op)
        else {
            return;
        };
        let r = usize::from(replica);
        if !up[r] || next[r] < index {
            return;
        }
        let value = kv[r].value(key).map(value_name);
        self.finish(i, now, Some(value));
    }

    /// Client `i`'s operation completed at `now`; a get returned `got` (`None`: a put).
    fn finish(&mut self, i: usize, now: u64, got: Option<Option<String>>) {
        let c = &mut self.clients[i];
        let o = c.outstanding.take().expect("an operation outstanding");
        let entry = &mut self.history[o.index];
        assert!(entry.response_ns.is_none(), "an operation completes once");
        entry.response_ns = Some(now);
        self.completed += 1;
        if let Some(value) = got {
            entry.value = value;
        }
        c.next_at_ns = now + self.rng.below(self.think_ns_max + 1);
    }

    /// Completes client `i`'s operation if a live replica applied it.
    fn complete(&mut self, i: usize, now: u64, kv: &[KvMachine], up: &[bool]) {
        let c = &mut self.clients[i];
        let Some(o) = &c.outstanding else {
            return;
        };
        if o.lease.is_some() {
            return; // a lease read: see `complete_lease_read`
        }
        let applied = kv
            .iter()
            .zip(up)
            .filter(|&(_, &up)| up)
            .find_map(|(m, _)| m.session(c.id).filter(|&(seq, _)| seq == o.seq));
        let Some((_, result)) = applied else {
            return;
        };
        let got = matches!(o.op, KvOp::Get { .. }).then(|| result.map(value_name));
        self.finish(i, now, got);
    }

    /// Starts client `i`'s next operation at `now`.
    fn start(&mut self, i: usize, now: u64) {
        let key = self.rng.below(u64::from(self.keys)) as u8;
        let get = self.rng.below(100) < self.get_percent;
        let c = &mut self.clients[i];
        assert!(c.outstanding.is_none(), "one operation at a time");
        c.seq += 1;
        let (op, kind, value) = if get {
            (KvOp::Get { key }, OpKind::Get, None)
        } else {
            (
                KvOp::Put { key },
                OpKind::Put,
                Some(value_name((c.id, c.seq))),
            )
        };
        self.history.push(HistoryOp {
            client: u64::from(c.id),
            kind,
            key: format!("k{key}"),
            value,
            invoke_ns: now,
            response_ns: None,
        });
        c.outstanding = Some(Outstanding {
            lease: None,
            through_log: false,
            seq: c.seq,
            op,
            attempt: 0,
            at: None,
            index: self.history.len() - 1,
        });
    }

    /// Operations completed so far.
    pub fn completed(&self) -> usize {
        self.completed
    }

    /// Whether some operation is outstanding.
    pub fn waiting(&self) -> bool {
        self.clients.iter().any(|c| c.outstanding.is_some())
    }

    /// The operations still outstanding: `(client, seq, invoked at)`.
    pub fn pending(&self) -> Vec<(u8, u32, u64)> {
        self.clients
            .iter()
            .filter_map(|c| {
                let o = c.outstanding.as_ref()?;
                Some((c.id, o.seq, self.history[o.index].invoke_ns))
            })
            .collect()
    }
}
