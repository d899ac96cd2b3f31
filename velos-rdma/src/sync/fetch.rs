//! Routines that fetch one word: [`FetchAtomic`] (a remote atomic's old value: post, wait,
//! load — how every lock draws a ticket or learns what its CAS found) and, inside the
//! crate, `ReadWord`/`ReadWords` (a word read with a CPU load, or with a get, its wait and
//! a load).

use super::{Routine, Yield, done_of, value_of};
use crate::error::RdmaError;
use crate::ids::{Loc, WorkId};
use crate::op::{Op, Reply, Rmw};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum FetchState {
    Start,
    /// The atomic was posted.
    Posted,
    /// Its wait was issued.
    Waiting,
    /// Its wait returned: the old value is in `local`, and its load was issued.
    Loading,
}

/// A remote atomic whose old value the routine finishes with: post `rmw` on `remote` with
/// its result landing in `local` (a word on the caller's node), wait for `work_id`, load
/// `local`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FetchAtomic {
    local: Loc,
    remote: Loc,
    rmw: Rmw,
    work_id: WorkId,
    state: FetchState,
}

impl FetchAtomic {
    /// `rmw` on `remote`, the old value landing in `local`, tagged `work_id`.
    pub fn new(local: Loc, remote: Loc, rmw: Rmw, work_id: WorkId) -> FetchAtomic {
        FetchAtomic {
            local,
            remote,
            rmw,
            work_id,
            state: FetchState::Start,
        }
    }

    /// The atomic.
    pub fn rmw(&self) -> Rmw {
        self.rmw
    }

    /// Whether the atomic has completed (its wait returned): its effect on `remote` has
    /// taken place, whether or not the old value has been loaded yet.
    pub fn completed(&self) -> bool {
        self.state == FetchState::Loading
    }
}

impl Routine for FetchAtomic {
    type Output = u64;

    fn resume(&mut self, reply: Reply) -> Result<Yield<u64>, RdmaError> {
        let (state, op) = match self.state {
            FetchState::Start => {
                done_of(reply)?;
                let atomic = Op::Atomic {
                    local: self.local,
                    remote: self.remote,
                    rmw: self.rmw,
                    work_id: self.work_id,
                };
                (FetchState::Posted, atomic)
            }
            FetchState::Posted => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: self.work_id,
                };
                (FetchState::Waiting, wait)
            }
            FetchState::Waiting => {
                done_of(reply)?;
                (FetchState::Loading, Op::Load { loc: self.local })
            }
            FetchState::Loading => return Ok(Yield::Done(value_of(reply)?)),
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

/// How a participant reaches a word: a queue member's words, a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// CPU loads and stores: the word is on the participant's node (a queue member that
    /// is the participant itself).
    Cpu,
    /// Gets and inline puts (loopback when local): a word used over time by changing
    /// participants, or on another node.
    Nic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ReadState {
    Start,
    /// `gets` gets were posted.
    Posted {
        gets: u8,
    },
    /// Their wait returned; the first word is loaded next.
    Waited,
    /// Word `index` is being loaded; `first` is word 0's value once loaded.
    Loading {
        index: u8,
        first: u64,
    },
}

/// Reads one or two words: CPU loads, or gets into scratch words, one wait,
/// and loads. Outputs both values (the second is 0 when only one word is read).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ReadWords {
    locs: [Loc; 2],
    /// How many of `locs` are read: 1 or 2.
    count: u8,
    access: Access,
    scratch: [Loc; 2],
    work_id: WorkId,
    state: ReadState,
}

/// Reads one word: a CPU load, or a get into `scratch`, its wait, and a load.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ReadWord(ReadWords);

impl ReadWords {
    /// Reads `locs` (two words) as `access` says, through `scratch` for gets.
    pub(crate) fn pair(
        locs: [Loc; 2],
        access: Access,
        scratch: [Loc; 2],
        work_id: WorkId,
    ) -> ReadWords {
        assert!(
            access == Access::Cpu || scratch[0] != scratch[1],
            "two gets need two scratch words"
        );
        ReadWords {
            locs,
            count: 2,
            access,
            scratch,
            work_id,
            state: ReadState::Start,
        }
    }

    /// The load of word `index`: the word itself, or the scratch word its get filled.
    fn load(&self, index: u8) -> Op {
        let index = usize::from(index);
        let loc = match self.access {
            Access::Cpu => self.locs[index],
            Access::Nic => self.scratch[index],
        };
        Op::Load { loc }
    }

    /// The get of word `index` into its scratch word.
    fn get(&self, index: u8) -> Op {
        let index = usize::from(index);
        Op::Get {
            local: self.scratch[index],
            remote: self.locs[index],
            work_id: self.work_id,
        }
    }
}

impl ReadWord {
    /// Reads `loc` as `access` says, through `scratch` for a get.
    pub(crate) fn new(loc: Loc, access: Access, scratch: Loc, work_id: WorkId) -> ReadWord {
        ReadWord(ReadWords {
            locs: [loc, loc],
            count: 1,
            access,
            scratch: [scratch, scratch],
            work_id,
            state: ReadState::Start,
        })
    }
}

impl Routine for ReadWords {
    type Output = (u64, u64);

    fn resume(&mut self, reply: Reply) -> Result<Yield<(u64, u64)>, RdmaError> {
        let (state, op) = match self.state {
            ReadState::Start => {
                done_of(reply)?;
                match self.access {
                    Access::Cpu => (ReadState::Loading { index: 0, first: 0 }, self.load(0)),
                    Access::Nic => (ReadState::Posted { gets: 1 }, self.get(0)),
                }
            }
            ReadState::Posted { gets } if gets < self.count => {
                done_of(reply)?;
                (ReadState::Posted { gets: gets + 1 }, self.get(gets))
            }
            ReadState::Posted { .. } => {
                done_of(reply)?;
                let wait = Op::Wait {
                    work_id: self.work_id,
                };
                (ReadState::Waited, wait)
            }
            ReadState::Waited => {
                done_of(reply)?;
                (ReadState::Loading { index: 0, first: 0 }, self.load(0))
            }
            ReadState::Loading { index, first } => {
                let value = value_of(reply)?;
                if index + 1 == self.count {
                    let both = if index == 0 {
                        (value, 0)
                    } else {
                        (first, value)
                    };
                    return Ok(Yield::Done(both));
                }
                let state = ReadState::Loading {
                    index: index + 1,
                    first: value,
                };
                (state, self.load(index + 1))
            }
        };
        self.state = state;
        Ok(Yield::Op(op))
    }
}

impl Routine for ReadWord {
    type Output = u64;

    fn resume(&mut self, reply: Reply) -> Result<Yield<u64>, RdmaError> {
        Ok(match self.0.resume(reply)? {
            Yield::Op(op) => Yield::Op(op),
            Yield::Done((value, _)) => Yield::Done(value),
        })
    }
}

#[cfg(all(test, feature = "mem"))]
mod tests {
    use super::*;
    use crate::ids::NodeId;
    use crate::layout_builder::LayoutBuilder;
    use crate::mem::{MemFabric, Mode};
    use crate::sync::run;

    #[test]
    fn fetch_atomic_returns_the_old_value_and_read_words_read() {
        let mut layout = LayoutBuilder::new(2);
        let word = layout.alloc(NodeId(1));
        let other = layout.alloc(NodeId(1));
        let scratch = layout.alloc_many(NodeId(0), 2);
        let fabric = MemFabric::new(layout.build(), Mode::Worker);
        fabric.write(word, 7).expect("word");
        fabric.write(other, 9).expect("word");
        let mut endpoint = fabric.endpoint(NodeId(0));
        let id = WorkId(1);
        let faa = FetchAtomic::new(scratch[0], word, Rmw::Faa { add: 5 }, id);
        assert!(!faa.completed());
        assert_eq!(run(faa, &mut endpoint), Ok(7));
        let cas = Rmw::Cas {
            expected: 12,
            new: 1,
        };
        assert_eq!(
            run(FetchAtomic::new(scratch[0], word, cas, id), &mut endpoint),
            Ok(12)
        );
        assert_eq!(fabric.read(word), Ok(1));
        let pair = ReadWords::pair([word, other], Access::Nic, [scratch[0], scratch[1]], id);
        assert_eq!(run(pair, &mut endpoint), Ok((1, 9)));
        let one = ReadWord::new(other, Access::Nic, scratch[1], id);
        assert_eq!(run(one, &mut endpoint), Ok(9));
    }
}
