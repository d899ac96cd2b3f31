//! The paper's reference pattern: one process posts the same remote operation to 3 nodes
//! (its own among them, as a Velos leader does with its own acceptor) and waits for a
//! majority of completions. Measured with remote CASes, it is the round trip a Velos
//! decision is compared with; with inline WRITEs, Mu's.

use serde::Serialize;
use velos_rdma::{Layout, Loc, NodeId, Op, Process, Reply, Rmw, Step, WorkId};
use velos_sim::latency::LatencyModel;
use velos_sim::machine::Machine;
use velos_sim::simulate::{SimConfig, Simulator, Stop};

/// The operation of a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RoundKind {
    /// A remote CAS that succeeds (round i swaps i for i + 1).
    Cas,
    /// An inline put of one word (a 1-byte value).
    Write,
}

/// The words of every node: the CAS's target, the put's target, then three result words
/// (used on the poster's node).
const CAS_WORD: u32 = 0;
const PUT_WORD: u32 = 1;
const RESULT_WORD: u32 = 2;
const WORDS: u32 = 5;

/// Node 0's process: `rounds` rounds towards nodes 0, 1, 2, each timed from a clock read
/// before the first post to one after the second completion; after a round it waits for
/// the third completion and pauses `gap_ns`, so that rounds do not overlap.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MajorityRound {
    kind: RoundKind,
    rounds: u64,
    gap_ns: u64,
    round: u64,
    /// Position in the round: 0 clock, 1..=3 posts, 4..=5 waits for any, 6 clock,
    /// 7 wait for the rest, 8 pause.
    pc: u8,
    started: u64,
    /// Bits of the work ids (0, 1, 2) not yet seen complete.
    outstanding: u64,
    /// Every round's latency (virtual ns).
    pub latencies: Vec<u64>,
    /// Why the rounds stopped early: an operation failed (never in a fault-free run).
    pub error: Option<String>,
}

impl MajorityRound {
    /// `rounds` rounds of `kind`, `gap_ns` apart.
    pub fn new(kind: RoundKind, rounds: u64, gap_ns: u64) -> MajorityRound {
        MajorityRound {
            kind,
            rounds,
            gap_ns,
            round: 0,
            pc: 0,
            started: 0,
            outstanding: 0,
            latencies: Vec::new(),
            error: None,
        }
    }

    fn post(&self, node: u16) -> Op {
        let work_id = WorkId(u32::from(node));
        match self.kind {
            RoundKind::Cas => Op::Atomic {
                local: Loc::word(NodeId(0), RESULT_WORD + u32::from(node)),
                remote: Loc::word(NodeId(node), CAS_WORD),
                rmw: Rmw::Cas {
                    expected: self.round,
                    new: self.round + 1,
                },
                work_id,
            },
            RoundKind::Write => Op::PutInline {
                remote: Loc::word(NodeId(node), PUT_WORD),
                value: self.round + 1,
                work_id,
            },
        }
    }
}

impl Process for MajorityRound {
    fn resume(&mut self, reply: Reply) -> Step {
        if let Reply::Failed(e) = &reply {
            self.error = Some(format!("round {}: {e}", self.round));
            return Step::Done;
        }
        let value = match reply {
            Reply::Value(v) => v,
            _ => 0,
        };
        if self.round == self.rounds {
            return Step::Done;
        }
        let pc = self.pc;
        self.pc += 1;
        let op = match pc {
            0 => Op::Now,
            1..=3 => {
                if pc == 1 {
                    self.started = value;
                    self.outstanding = 0b111;
                }
                self.post(u16::from(pc - 1))
            }
            4 => Op::WaitAny {
                base: WorkId(0),
                mask: self.outstanding,
            },
            5 => {
                self.outstanding &= !(1 << value);
                Op::WaitAny {
                    base: WorkId(0),
                    mask: self.outstanding,
                }
            }
            6 => {
                self.outstanding &= !(1 << value);
                Op::Now
            }
            7 => {
                assert!(value >= self.started, "the clock never goes back");
                self.latencies.push(value - self.started);
                assert_eq!(self.outstanding.count_ones(), 1, "a majority of 3 seen");
                Op::Wait {
                    work_id: WorkId(self.outstanding.trailing_zeros()),
                }
            }
            _ => {
                self.pc = 0;
                self.round += 1;
                if self.round == self.rounds {
                    return Step::Done;
                }
                Op::Pause { ns: self.gap_ns }
            }
        };
        Step::Op(op)
    }

    fn puts_from_memory(&self) -> bool {
        false
    }
}

/// Runs `rounds` rounds of `kind` under `latency` (seeded by `seed`), with the three
/// target words in NIC device memory or not; every round's latency (virtual ns).
pub fn measure(
    kind: RoundKind,
    latency: &LatencyModel,
    device_memory: bool,
    rounds: u64,
    seed: u64,
) -> anyhow::Result<Vec<u64>> {
    let mut machine = Machine::new(&Layout::uniform(3, WORDS));
    if device_memory {
        for n in 0..3 {
            machine.set_device_memory(NodeId(n), CAS_WORD..PUT_WORD + 1)?;
        }
    }
    machine.spawn(NodeId(0), MajorityRound::new(kind, rounds, 2_000));
    let mut sim = Simulator::new(machine, SimConfig::new(seed, latency.clone()));
    let stop = sim.run(u64::MAX, u64::MAX);
    anyhow::ensure!(stop == Stop::Complete, "the rounds ended with {stop:?}");
    let process = &sim.machine().threads[0].process;
    if let Some(e) = &process.error {
        anyhow::bail!("the {kind:?} rounds failed: {e}");
    }
    let latencies = process.latencies.clone();
    assert_eq!(latencies.len() as u64, rounds, "every round timed");
    Ok(latencies)
}
