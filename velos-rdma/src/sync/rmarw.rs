//! RMA-RW: the topology-aware distributed reader-writer lock of the RMA locks paper
//! (Schmid, Besta, Hoefler, "High-Performance Distributed RMA Locks", §3.2–§3.3), on the
//! programming model. `paper-notes/rma-rw.md` is the specification in our words, with
//! every choice the paper's prose leaves open.
//!
//! Three structures:
//! * **DC**, the distributed counter: one physical counter (words ARRIVE and DEPART, see
//!   `rmarw/counter.rs`) per T_DC participants, at the node of the first of them. A reader
//!   arrives with one remote FAA on its counter, which also tells it the mode (READ or
//!   WRITE), and leaves with one FAA on DEPART.
//! * **DQ**, one distributed queue per element of each level of the machine hierarchy: the
//!   ticket queue of D-MCS ([`super::ticket_queue`]: FAA on TAIL draws a ticket, a SLOT ring
//!   finds the predecessor, the passing member refreshes OPEN) whose STATUS word carries
//!   counts of consecutive acquires and the special values ACQUIRE_PARENT and MODE_CHANGE
//!   (see `rmarw/status.rs`). At the finest level the queue's members are the
//!   participants; at every other level they are the elements of the level below (a cohort
//!   lock: the element's current holder acts for it, and finds the ticket in the member's
//!   TICKET word).
//! * **DT**, the tree of DQs: a writer enters the DQ of its finest element; when the lock
//!   is not passed to it within the element it climbs to the parent level, up to the root,
//!   where writers synchronise with readers through DC.
//!
//! Writer acquire: enter the DQ at the finest level and wait. A grant from the predecessor
//! means the lock is ours (all levels above are held by our cohort). ACQUIRE_PARENT, or no
//! predecessor, means climb one level. At the root, MODE_CHANGE or no predecessor means
//! acquire the lock from the readers: take every physical counter (FAA that makes the phase
//! odd, returning how many readers arrived) and wait until as many have departed.
//! Writer release: at each level from the finest up, pass the lock within the element if
//! there is a successor and T_L,i is not reached; otherwise release the parent level first,
//! then leave the DQ telling any successor ACQUIRE_PARENT. At the root, when T_L,0 is
//! reached or there is no successor, give every counter back to the readers and tell any
//! successor MODE_CHANGE. So at most T_W = ∏ T_L,i writers enter between two READ phases.
//! Reader acquire: FAA ARRIVE. In WRITE mode, wait until the phase changes. In READ mode
//! enter, unless T_R readers have already been admitted at this counter since its budget
//! was reset and a writer is queued at the root: then wait until that writer takes the
//! counter (it waits for us, so we enter before it). If no writer is queued, reset the
//! budget (the paper's "if c(p) = T_R, p resets DC") and enter.
//! Reader release: FAA DEPART.
//!
//! Like [`super::wlock`] and [`super::dmcs`], the lock orders processes: the critical
//! section's remote operations are seen by the next holder only if the holder waits for
//! them (a global fence towards their node) before it releases.

mod config;
mod counter;
mod queue;
mod reader;
mod status;
mod writer;

pub use super::ticket_queue::Tickets;
pub use config::{MAX_PARTICIPANTS, RmaRwConfig, RmaRwConfigError};
pub use reader::{ReadLock, ReadUnlock};
pub use writer::{WriteLock, WriteUnlock};

use super::fetch::{Access, ReadWord};
use super::library_work_id;
use super::ticket_queue::{Member, TicketQueue};
use crate::ids::{Loc, NodeId, WorkId};
use crate::layout_builder::LayoutBuilder;
use crate::shared::Shared;
use std::fmt;

const LIBRARY: u32 = 6;
const WRITE_LOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 1);
const WRITE_UNLOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 2);
const READ_LOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 3);
const READ_UNLOCK_WORK_ID: WorkId = library_work_id(LIBRARY, 4);

/// ∅: the empty rank in NEXT. A queue member's rank is its index + 1.
const EMPTY: u64 = super::ticket_queue::EMPTY;

/// One physical counter of DC.
#[derive(Clone, Copy, Debug)]
struct Counter {
    arrive: Loc,
    depart: Loc,
}

/// The words of one RMA-RW lock and the map from participants to them.
pub struct RmaRw {
    config: RmaRwConfig,
    /// Per participant: its node.
    nodes: Vec<NodeId>,
    /// Per level, per participant: the dense index of its element (the paper's e(p, i)).
    element_of: Vec<Vec<usize>>,
    /// Per level, per element: its DQ, whose TAIL and SLOT ring are at the node of the
    /// element's first participant (the paper's tail_rank[i, j]).
    queues: Vec<Vec<Shared<TicketQueue>>>,
    /// Per level, per member of that level's DQs (participants at the finest level,
    /// elements of the level below elsewhere): its NEXT, STATUS and TICKET words.
    members: Vec<Shared<Vec<Member>>>,
    /// The physical counters.
    counters: Vec<Counter>,
    /// Per participant: the counts it holds while it writes (private).
    held: Vec<Loc>,
    /// Per participant: where remote results land, one word per counter at least
    /// (private).
    scratch: Vec<Vec<Loc>>,
}

impl RmaRw {
    /// Allocates an RMA-RW lock laid out as `config` says, for participants on `nodes`
    /// (participant `slot` runs on `nodes[slot]`). Zeroed memory is the free lock, in READ
    /// mode.
    ///
    /// # Panics
    /// If `config` is bad for `nodes.len()` participants (see [`RmaRwConfig::check`]):
    /// building a lock is program setup, not an operation that can fail at run time.
    pub fn new(
        layout: &mut LayoutBuilder,
        config: &RmaRwConfig,
        nodes: &[NodeId],
    ) -> Shared<RmaRw> {
        RmaRw::with_tickets(layout, config, nodes, Tickets::default())
    }

    /// Like [`RmaRw::new`], with the DQs' tickets numbered as `tickets` says: small ticket
    /// spaces let the exhaustive checks reach the tickets' wrap in a few acquisitions.
    ///
    /// # Panics
    /// As [`RmaRw::new`]; and if an element's queue has too many members for `tickets.bits`
    /// (N + 1 < 2^bits is needed).
    pub fn with_tickets(
        layout: &mut LayoutBuilder,
        config: &RmaRwConfig,
        nodes: &[NodeId],
        tickets: Tickets,
    ) -> Shared<RmaRw> {
        if let Err(e) = config.check(nodes.len()) {
            panic!("rma-rw: bad configuration: {e}");
        }
        let participants = nodes.len();
        let levels = config.levels.len();
        // Dense element indices per level, in order of first appearance, so that element
        // 0 of every level holds participant 0 and the root is element 0.
        let element_of: Vec<Vec<usize>> = config
            .levels
            .iter()
            .map(|ids| {
                let mut seen: Vec<u32> = Vec::new();
                ids.iter()
                    .map(|id| match seen.iter().position(|s| s == id) {
                        Some(i) => i,
                        None => {
                            seen.push(*id);
                            seen.len() - 1
                        }
                    })
                    .collect()
            })
            .collect();
        let first_of = |level: usize, element: usize| -> usize {
            element_of[level]
                .iter()
                .position(|&e| e == element)
                .expect("every element has a participant")
        };
        let elements = |level: usize| element_of[level].iter().max().map_or(0, |m| m + 1);
        // The member of level `level` that participant `p` acts for.
        let unit_of = |level: usize, p: usize| {
            if level + 1 == levels {
                p
            } else {
                element_of[level + 1][p]
            }
        };
        let members: Vec<Shared<Vec<Member>>> = (0..levels)
            .map(|level| {
                let words = if level + 1 == levels {
                    nodes
                        .iter()
                        .map(|&n| Member::new(layout, n, Access::Cpu))
                        .collect()
                } else {
                    (0..elements(level + 1))
                        .map(|e| Member::new(layout, nodes[first_of(level + 1, e)], Access::Nic))
                        .collect()
                };
                Shared::new(words)
            })
            .collect();
        let queues = (0..levels)
            .map(|level| {
                (0..elements(level))
                    .map(|e| {
                        // N: the members of the element's queue.
                        let mut inside: Vec<usize> = (0..participants)
                            .filter(|&p| element_of[level][p] == e)
                            .map(|p| unit_of(level, p))
                            .collect();
                        inside.sort_unstable();
                        inside.dedup();
                        // With slack, so that readers can tell an empty root queue from
                        // TAIL alone (Lemma 5 of the ticket queue).
                        let queue = TicketQueue::new(
                            layout,
                            nodes[first_of(level, e)],
                            &members[level],
                            inside.len(),
                            status::WAITING,
                            tickets,
                            true,
                        );
                        Shared::new(queue)
                    })
                    .collect()
            })
            .collect();
        let counter_count = participants.div_ceil(config.t_dc);
        let counters = (0..counter_count)
            .map(|k| {
                let home = nodes[k * config.t_dc];
                Counter {
                    arrive: layout.alloc(home),
                    depart: layout.alloc(home),
                }
            })
            .collect();
        let held = nodes.iter().map(|&n| layout.alloc(n)).collect();
        // At least two: reading a NIC member's NEXT and TICKET takes two gets.
        let scratch = nodes
            .iter()
            .map(|&n| layout.alloc_many(n, counter_count.max(2) as u32))
            .collect();
        let lock = RmaRw {
            config: config.clone(),
            nodes: nodes.to_vec(),
            element_of,
            queues,
            members,
            counters,
            held,
            scratch,
        };
        // Postconditions: the root is one queue; every level has a member per element of
        // the level below.
        assert_eq!(lock.queues[0].len(), 1, "rma-rw: the root is a single DQ");
        assert_eq!(lock.members[levels - 1].len(), participants);
        Shared::new(lock)
    }

    /// The words only participant `slot` ever touches: its scratch words, the word
    /// holding its counts while it writes, and the TICKET of its finest-level member
    /// (itself). Other queue words are not private (neighbours write NEXT and STATUS, and
    /// an element's TICKET is read by whoever acts for it), nor are the counters.
    pub fn private_words(&self, slot: usize) -> Vec<Loc> {
        let mut words = self.scratch[slot].clone();
        words.push(self.held[slot]);
        words.push(self.member(self.levels() - 1, slot).ticket);
        words
    }

    /// Number of participants.
    pub fn participants(&self) -> usize {
        self.nodes.len()
    }

    /// Every DQ's TAIL, the root's first. Zero is an empty queue, and so is any
    /// `(x << 32) | x`, which lets a test start the queues near the tickets' raw wrap.
    pub fn tails(&self) -> Vec<Loc> {
        self.queues.iter().flatten().map(|q| q.tail()).collect()
    }

    /// The configuration.
    pub fn config(&self) -> &RmaRwConfig {
        &self.config
    }

    /// Number of physical counters of DC: ⌈participants / T_DC⌉.
    pub fn counters(&self) -> usize {
        self.counters.len()
    }

    /// Number of levels of the tree.
    fn levels(&self) -> usize {
        self.config.levels.len()
    }

    /// The physical counter of participant `slot`: the paper's c(p).
    fn counter_of(&self, slot: usize) -> Counter {
        self.counters[slot / self.config.t_dc]
    }

    /// The member of level `level`'s DQs that participant `slot` acts for: itself at the
    /// finest level, its element of the level below elsewhere.
    fn unit_of(&self, level: usize, slot: usize) -> usize {
        if level + 1 == self.levels() {
            slot
        } else {
            self.element_of[level + 1][slot]
        }
    }

    /// The words of member `unit` of level `level`.
    fn member(&self, level: usize, unit: usize) -> Member {
        self.members[level][unit]
    }

    /// The DQ participant `slot` enters at `level`.
    fn queue_of(&self, level: usize, slot: usize) -> &Shared<TicketQueue> {
        &self.queues[level][self.element_of[level][slot]]
    }

    /// The root's DQ.
    fn root_queue(&self) -> &Shared<TicketQueue> {
        &self.queues[0][0]
    }

    /// Participant `slot` reads `loc` (a counter word): with a CPU load if it is on the
    /// participant's node, with a get into its first scratch word otherwise.
    fn read_word(&self, slot: usize, loc: Loc, work_id: WorkId) -> ReadWord {
        let access = if loc.node == self.nodes[slot] {
            Access::Cpu
        } else {
            Access::Nic
        };
        ReadWord::new(loc, access, self.scratch[slot][0], work_id)
    }
}

/// Short: routine states print their lock, and every word of it would drown a trace.
impl fmt::Debug for RmaRw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RmaRw")
            .field("participants", &self.participants())
            .field("levels", &self.levels())
            .field("counters", &self.counters.len())
            .field("t_l", &self.config.t_l)
            .field("t_r", &self.config.t_r)
            .finish_non_exhaustive()
    }
}

/// Participant `slot` acquires `lock` for reading.
pub fn read_lock(lock: &Shared<RmaRw>, slot: usize) -> ReadLock {
    assert!(
        slot < lock.participants(),
        "rma-rw: unknown participant {slot}"
    );
    ReadLock::new(lock, slot)
}

/// Participant `slot` releases its read lock on `lock`.
pub fn read_unlock(lock: &Shared<RmaRw>, slot: usize) -> ReadUnlock {
    assert!(
        slot < lock.participants(),
        "rma-rw: unknown participant {slot}"
    );
    ReadUnlock::new(lock, slot)
}

/// Participant `slot` acquires `lock` for writing.
pub fn write_lock(lock: &Shared<RmaRw>, slot: usize) -> WriteLock {
    assert!(
        slot < lock.participants(),
        "rma-rw: unknown participant {slot}"
    );
    WriteLock::new(lock, slot)
}

/// Participant `slot` releases its write lock on `lock`.
pub fn write_unlock(lock: &Shared<RmaRw>, slot: usize) -> WriteUnlock {
    assert!(
        slot < lock.participants(),
        "rma-rw: unknown participant {slot}"
    );
    WriteUnlock::new(lock, slot)
}
