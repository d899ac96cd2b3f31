//! One Mu node as a [`Process`]: the turn loop (heartbeat, failure detector, then the
//! role's step), the batches of operations it issues and their continuations.

use super::lead::Lead;
use super::{MuConfig, Word};
use std::collections::VecDeque;
use velos_rdma::{Op, Process, Reply, Shared, Step, WorkId};

/// Work id of the heartbeat reads of peer p: `FD + p`.
pub(super) const FD: u32 = 1_000;
/// Work id of the leader's control reads and writes at peer p: `CTRL + p`.
pub(super) const CTRL: u32 = 2_000;
/// Work id of the leader's log writes at peer p: `LOG + p`.
pub(super) const LOG: u32 = 3_000;

/// What to do with the replies of the batch of operations just executed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Then {
    /// Nothing: start the next turn.
    Tick,
    /// The reply is the clock: run the turn.
    Turn,
    /// Per peer of the list: `Test`, then loads of its heartbeat, request and grant.
    FdCollect(Vec<u16>),
    /// The grant to this peer under this proposal number is in effect.
    Granted(u16, u64),
    /// A follower's load of the header of the slot it scans.
    Scan,
    /// A follower's loads of the value of this slot, which it applies.
    Apply(u64),
    /// A continuation of the leader (`leader.rs`, `takeover.rs`).
    Lead(super::lead::Then),
}

/// A peer as the failure detector sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Peer {
    pub(super) score: u8,
    pub(super) trusted: bool,
    pub(super) hb: u64,
    pub(super) fd_pending: bool,
    /// Its request and grant words, as last read.
    pub(super) req: u64,
    pub(super) grant: u64,
}

/// A node's role.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Role {
    Follower,
    Leader(Box<Lead>),
}

/// A decision of this node as leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decision {
    /// The slot.
    pub slot: u64,
    /// When the leader started writing it (ns).
    pub proposed_at: u64,
    /// When a majority had it (ns).
    pub decided_at: u64,
    /// Whether it re-proposed a value found during a takeover (not a new proposal).
    pub reproposal: bool,
}

/// One node of a Mu cluster (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MuNode {
    pub(super) cfg: Shared<MuConfig>,
    pub(super) me: u16,
    pub(super) now: u64,
    queue: VecDeque<Op>,
    replies: Vec<Reply>,
    pub(super) then: Then,
    hb: u64,
    next_hb: u64,
    next_fd: u64,
    collect_at: Option<u64>,
    pub(super) peers: Vec<Peer>,
    /// The proposal number this node granted write permission to (its grant word).
    pub(super) granted: u64,
    /// The writers its last `SetWriteAccess` allowed.
    pub(super) writers: u64,
    /// The highest proposal number seen anywhere.
    pub(super) max_seen: u64,
    pending_grant: Option<(u16, u64)>,
    pub(super) role: Role,
    /// Follower: the next slot whose header to read, and the commit point learnt.
    pub(super) scan: u64,
    pub(super) commit_known: u64,
    /// Every entry applied, in order: (slot, value words).
    pub applied: Vec<(u64, Vec<u64>)>,
    /// When each entry was applied (ns).
    pub applied_at: Vec<u64>,
    /// Every value this node proposed as leader.
    pub proposed: Vec<Vec<u64>>,
    /// Its decisions as leader.
    pub decisions: Vec<Decision>,
    /// When it started a takeover (suspected the leader, or lost its majority).
    pub takeovers_started: Vec<u64>,
    /// When it entered the fast path as leader.
    pub terms_started: Vec<u64>,
    /// Its log writes refused by a follower (`RemoteAccess`): it had been deposed.
    pub refusals: u64,
    /// A stall to inject, for tests: from this time its CPU stops for this long (as a
    /// descheduled or paused process would), then goes on where it was.
    pub stall: Option<(u64, u64)>,
}

impl MuNode {
    /// Node `me` of a cluster configured by `cfg`; `Err` says what is wrong.
    pub fn new(cfg: Shared<MuConfig>, me: u16) -> Result<MuNode, String> {
        cfg.check()?;
        if me >= cfg.replicas {
            return Err(format!("node {me} of {} replicas", cfg.replicas));
        }
        let peer = Peer {
            score: cfg.score_max,
            trusted: true,
            hb: 0,
            fd_pending: false,
            req: 0,
            grant: 0,
        };
        Ok(MuNode {
            peers: vec![peer; usize::from(cfg.replicas)],
            cfg,
            me,
            now: 0,
            queue: VecDeque::new(),
            replies: Vec::new(),
            then: Then::Tick,
            hb: 0,
            next_hb: 0,
            next_fd: 0,
            collect_at: None,
            granted: 0,
            writers: u64::MAX,
            max_seen: 0,
            pending_grant: None,
            role: Role::Follower,
            scan: 0,
            commit_known: 0,
            applied: Vec::new(),
            applied_at: Vec::new(),
            proposed: Vec::new(),
            decisions: Vec::new(),
            takeovers_started: Vec::new(),
            terms_started: Vec::new(),
            refusals: 0,
            stall: None,
        })
    }

    /// Its role, the failure detector's view and its grant, in words (for failure reports).
    pub fn describe(&self) -> String {
        format!(
            "node {} at {} ns: {:?}; granted {}; peers {:?}; takeovers at {:?}; fast path \
             from {:?}; {} decisions, {} refused writes",
            self.me,
            self.now,
            self.role,
            self.granted,
            self.peers,
            self.takeovers_started,
            self.terms_started,
            self.decisions.len(),
            self.refusals
        )
    }

    /// Whether this node is the leader in the fast path.
    pub fn is_leader(&self) -> bool {
        matches!(&self.role, Role::Leader(lead) if lead.fast())
    }

    /// The node this one trusts as leader: the lowest id it trusts, itself included.
    pub(super) fn believed_leader(&self) -> u16 {
        (0..self.cfg.replicas)
            .find(|&p| p == self.me || self.peers[usize::from(p)].trusted)
            .expect("a node trusts itself")
    }

    /// The other nodes.
    pub(super) fn others(&self) -> impl Iterator<Item = u16> + use<> {
        let me = self.me;
        (0..self.cfg.replicas).filter(move |&p| p != me)
    }

    /// Queues an operation of the current batch.
    pub(super) fn op(&mut self, op: Op) {
        self.queue.push_back(op);
    }

    /// Queues a batch ending in `then`.
    pub(super) fn batch(&mut self, ops: impl IntoIterator<Item = Op>, then: Then) {
        self.queue.extend(ops);
        self.then = then;
    }

    /// Pauses for the idle time, then a new turn.
    pub(super) fn idle(&mut self) {
        let ns = self.cfg.idle_pause_ns;
        self.batch([Op::Pause { ns }], Then::Tick);
    }

    fn on(&mut self, then: Then, replies: Vec<Reply>) {
        match then {
            Then::Tick => self.batch([Op::Now], Then::Turn),
            Then::Turn => {
                if let Some(Reply::Value(now)) = replies.first() {
                    self.now = *now;
                }
                self.turn();
            }
            Then::FdCollect(peers) => self.fd_collected(&peers, &replies),
            Then::Granted(peer, proposal) => self.granted(peer, proposal),
            Then::Scan => self.scanned(&replies),
            Then::Apply(slot) => self.apply(slot, &replies),
            Then::Lead(then) => self.lead_then(then, &replies),
        }
    }

    /// One turn: housekeeping first (heartbeat, heartbeat reads), then the role's step.
    fn turn(&mut self) {
        if let Some((at, ns)) = self.stall
            && self.now >= at
        {
            self.stall = None;
            return self.batch([Op::Pause { ns }], Then::Tick);
        }
        let cfg = self.cfg.clone();
        if self.now >= self.next_hb {
            self.hb += 1;
            self.next_hb = self.now + cfg.hb_period_ns;
            let loc = cfg.word(self.me, Word::Heartbeat);
            self.op(Op::Store {
                loc,
                value: self.hb,
            });
        }
        if self.now >= self.next_fd {
            self.next_fd = self.now + cfg.fd_period_ns;
            self.collect_at = Some(self.now + cfg.fd_collect_ns);
            for p in self.others() {
                let peer = &mut self.peers[usize::from(p)];
                if peer.fd_pending {
                    continue; // the last read has not come back: it counts as silence
                }
                peer.fd_pending = true;
                for k in 0..3u32 {
                    let remote =
                        cfg.word(p, [Word::Heartbeat, Word::Request, Word::Grant][k as usize]);
                    self.queue.push_back(Op::Get {
                        local: cfg.scratch(self.me, p, k),
                        remote,
                        work_id: WorkId(FD + u32::from(p)),
                    });
                }
            }
        }
        if !self.queue.is_empty() {
            self.then = Then::Tick;
            return;
        }
        if self.collect_at.is_some_and(|at| self.now >= at) {
            self.collect_at = None;
            let peers: Vec<u16> = self.others().collect();
            for &p in &peers {
                self.op(Op::Test {
                    work_id: WorkId(FD + u32::from(p)),
                });
                for k in 0..3 {
                    self.op(Op::Load {
                        loc: cfg.scratch(self.me, p, k),
                    });
                }
            }
            self.then = Then::FdCollect(peers);
            return;
        }
        self.role_step();
    }

    /// The heartbeat reads came back (or not): scores, trust, and requests to grant.
    fn fd_collected(&mut self, peers: &[u16], replies: &[Reply]) {
        assert_eq!(replies.len(), 4 * peers.len(), "fd: four replies per peer");
        let cfg = self.cfg.clone();
        for (&p, r) in peers.iter().zip(replies.chunks(4)) {
            let peer = &mut self.peers[usize::from(p)];
            let word = |i: usize| match r[i] {
                Reply::Value(v) => v,
                _ => 0,
            };
            let moved = match &r[0] {
                Reply::Value(1) if peer.fd_pending => {
                    peer.fd_pending = false;
                    let moved = word(1) != peer.hb;
                    (peer.hb, peer.req, peer.grant) = (word(1), word(2), word(3));
                    moved
                }
                Reply::Failed(_) => {
                    peer.fd_pending = false;
                    false
                }
                _ => false,
            };
            peer.score = if moved {
                (peer.score + 1).min(cfg.score_max)
            } else {
                peer.score.saturating_sub(1)
            };
            if peer.trusted && peer.score < cfg.fail_below {
                peer.trusted = false;
            } else if !peer.trusted && peer.score >= cfg.recover_at {
                peer.trusted = true;
            }
            self.max_seen = self.max_seen.max(peer.req).max(peer.grant);
        }
        let leader = self.believed_leader();
        let request = self.peers[usize::from(leader)].req;
        if leader != self.me && request != 0 && request != self.granted {
            self.pending_grant = Some((leader, request));
        }
        self.then = Then::Tick;
    }

    /// The role's step: grant a pending request, take over, follow or lead.
    fn role_step(&mut self) {
        let leader = self.believed_leader();
        if let Role::Leader(_) = self.role
            && leader != self.me
        {
            self.step_down();
        }
        match &self.role {
            Role::Leader(_) => self.lead_step(),
            Role::Follower => {
                if let Some((peer, proposal)) = self.pending_grant.take()
                    && peer == leader
                {
                    self.grant(peer, proposal);
                } else if leader == self.me {
                    self.take_over();
                } else {
                    self.follow();
                }
            }
        }
    }

    /// Leaves the leader role: a follower again, of whoever it grants next.
    pub(super) fn step_down(&mut self) {
        self.role = Role::Follower;
        self.scan = self.applied.len() as u64;
        self.commit_known = self.scan;
    }
}

impl Process for MuNode {
    fn resume(&mut self, reply: Reply) -> Step {
        if reply != Reply::Start {
            self.replies.push(reply);
        }
        // Every continuation queues operations; a few rounds at most find one.
        for _ in 0..8 {
            if let Some(op) = self.queue.pop_front() {
                return Step::Op(op);
            }
            let replies = std::mem::take(&mut self.replies);
            let then = std::mem::replace(&mut self.then, Then::Tick);
            self.on(then, replies);
        }
        unreachable!("mu: a continuation queued no operation")
    }

    fn changes_write_access(&self) -> bool {
        true
    }
}
