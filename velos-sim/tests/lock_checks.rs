//! Exhaustive checks of every lock of `velos_rdma::sync` on the emulator, and the same
//! programs on the in-process backend.
//!
//! Each configuration runs 2–3 [`LockUser`]s (acquire → witness load → critical section →
//! witness load → release, k times) and is explored with [`explore_checked`]:
//! * mutual exclusion on every visited state (for RMA-RW: a writer is never inside with
//!   anyone; and, separately, some state has two readers inside: readers share);
//! * no stuck state (every state can still reach a final state);
//! * every final state has every user finished, and the shared counter that each writer's
//!   critical section increments non-atomically (get, put of value + 1, global fence) equals
//!   the number of write acquisitions;
//! * the explored state count is pinned (stateright style): a change to the model, the
//!   explorer or a lock shows up as a changed number. After an intended change, update the
//!   number in the configuration's table row and say why in the commit.
//!
//! Why witness loads: the explorer's partial-order reduction explores an *invisible* step
//! (a CPU store, a post, a wait, a load of a private word, ...) alone. A user may therefore
//! change what the invariant reads (its "inside" flag) only when it is resumed after a
//! visible step: the flag flips on the reply of a load of a shared (not private) word right
//! after the acquire returns, and again right before the release starts.

use std::time::Instant;
use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::sync::dmcs::{self, Dmcs, Tickets};
use velos_rdma::sync::nlock::{self, NLock};
use velos_rdma::sync::rmarw::{self, RmaRw, RmaRwConfig};
use velos_rdma::sync::wlock::{self, WLock};
use velos_rdma::sync::{Routine, Yield, slock};
use velos_rdma::{
    Layout, LayoutBuilder, Loc, NodeId, Op, Process, RdmaError, Reply, Shared, Step, WorkId,
};
use velos_sim::explore::{Exploration, ExploreError, explore_checked};
use velos_sim::machine::Machine;

/// The harness's own work id (below the libraries' range).
const USER_WORK_ID: WorkId = WorkId(1);

/// The explorer's state budget per configuration.
const BUDGET: usize = 2_000_000;

/// A lock under test, shared by every user.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Lock {
    W(Shared<WLock>),
    /// A strong lock and the number of nodes its release fences.
    S(Shared<WLock>, u16),
    N(Shared<NLock>),
    D(Shared<Dmcs>),
    Rw(Shared<RmaRw>),
    /// No lock at all: acquire and release do nothing. The harness must catch it.
    Nothing,
}

impl Lock {
    fn private_words(&self, slot: usize) -> Vec<Loc> {
        match self {
            Lock::W(l) | Lock::S(l, _) => l.private_words(slot),
            Lock::N(l) => l.private_words(slot),
            Lock::D(l) => l.private_words(slot),
            Lock::Rw(l) => l.private_words(slot),
            Lock::Nothing => Vec::new(),
        }
    }

    fn acquire(&self, slot: usize, role: Role) -> Acquire {
        match (self, role) {
            (Lock::W(l) | Lock::S(l, _), Role::Writer) => Acquire::W(wlock::acquire(l, slot)),
            (Lock::N(l), Role::Writer) => Acquire::N(nlock::acquire(l, slot)),
            (Lock::D(l), Role::Writer) => Acquire::D(dmcs::acquire(l, slot)),
            (Lock::Rw(l), Role::Writer) => Acquire::RwWrite(rmarw::write_lock(l, slot)),
            (Lock::Rw(l), Role::Reader) => Acquire::RwRead(rmarw::read_lock(l, slot)),
            (Lock::Nothing, _) => Acquire::Nothing(Nothing),
            (_, Role::Reader) => panic!("only RMA-RW has readers"),
        }
    }

    fn release(&self, slot: usize, role: Role) -> Release {
        match (self, role) {
            (Lock::W(l), _) => Release::W(wlock::release(l, slot)),
            (Lock::S(l, nodes), _) => Release::S(slock::release(l, slot, *nodes)),
            (Lock::N(l), _) => Release::N(nlock::release(l, slot)),
            (Lock::D(l), _) => Release::D(dmcs::release(l, slot)),
            (Lock::Rw(l), Role::Writer) => Release::RwWrite(rmarw::write_unlock(l, slot)),
            (Lock::Rw(l), Role::Reader) => Release::RwRead(rmarw::read_unlock(l, slot)),
            (Lock::Nothing, _) => Release::Nothing(Nothing),
        }
    }
}

/// What one acquisition is: exclusive (every lock) or shared (RMA-RW readers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Writer,
    Reader,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Acquire {
    W(wlock::Acquire),
    N(nlock::Acquire),
    D(dmcs::Acquire),
    RwWrite(rmarw::WriteLock),
    RwRead(rmarw::ReadLock),
    Nothing(Nothing),
}

impl Acquire {
    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        match self {
            Acquire::W(r) => r.resume(reply),
            Acquire::N(r) => r.resume(reply),
            Acquire::D(r) => r.resume(reply),
            Acquire::RwWrite(r) => r.resume(reply),
            Acquire::RwRead(r) => r.resume(reply),
            Acquire::Nothing(r) => r.resume(reply),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Release {
    W(wlock::Release),
    S(slock::Release),
    N(nlock::Release),
    D(dmcs::Release),
    RwWrite(rmarw::WriteUnlock),
    RwRead(rmarw::ReadUnlock),
    Nothing(Nothing),
}

impl Release {
    fn resume(&mut self, reply: Reply) -> Result<Yield<()>, RdmaError> {
        match self {
            Release::W(r) => r.resume(reply),
            Release::S(r) => r.resume(reply),
            Release::N(r) => r.resume(reply),
            Release::D(r) => r.resume(reply),
            Release::RwWrite(r) => r.resume(reply),
            Release::RwRead(r) => r.resume(reply),
            Release::Nothing(r) => r.resume(reply),
        }
    }
}

/// The routine of [`Lock::Nothing`]: finishes at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Nothing;

impl Routine for Nothing {
    type Output = ();

    fn resume(&mut self, _reply: Reply) -> Result<Yield<()>, RdmaError> {
        Ok(Yield::Done(()))
    }
}

/// Where a user is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Acquiring(Acquire),
    /// The acquire returned; the witness load is pending.
    WitnessIn,
    /// Critical section: the get of the shared counter is posted.
    CsGet,
    /// Its wait returned.
    CsWaited,
    /// Its value was loaded.
    CsLoaded,
    /// The put of value + 1 was posted.
    CsPut,
    /// The global fence towards the counter's node returned.
    CsFenced,
    /// The witness load before the release is pending.
    WitnessOut,
    Releasing(Release),
    Finished,
}

/// The most acquisitions of one user.
const MAX_ROUNDS: usize = 3;

/// The test harness: `rounds` acquisitions of `lock`, each a [`Role`], each with a
/// critical section that (if `counter` is set) reads the shared counter and, for writers,
/// writes it back plus one and fences it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct LockUser {
    lock: Lock,
    slot: usize,
    /// The role of each acquisition (a fixed array: the explorer clones users on every
    /// step, and a `Vec` would allocate each time).
    roles: [Role; MAX_ROUNDS],
    /// How many acquisitions.
    rounds: usize,
    /// Acquisitions finished so far.
    round: usize,
    /// A word on the user's node that only it loads, but that is not declared private, so
    /// that its loads are visible steps of the explorer.
    witness: Loc,
    /// The shared counter, if the critical section touches it.
    counter: Option<Loc>,
    /// Where the counter's get lands (private).
    scratch: Loc,
    phase: Phase,
    /// Inside the critical section, and as what.
    inside: Option<Role>,
}

impl LockUser {
    fn role(&self) -> Role {
        self.roles[self.round]
    }

    fn next_round(&mut self) -> Step {
        if self.round == self.rounds {
            self.phase = Phase::Finished;
            return Step::Done;
        }
        let mut acquire = self.lock.acquire(self.slot, self.role());
        match acquire.resume(Reply::Start).expect("the acquire starts") {
            Yield::Op(op) => {
                self.phase = Phase::Acquiring(acquire);
                Step::Op(op)
            }
            Yield::Done(()) => {
                self.phase = Phase::WitnessIn;
                Step::Op(self.witness_load())
            }
        }
    }

    fn start_release(&mut self) -> Step {
        let mut release = self.lock.release(self.slot, self.role());
        match release.resume(Reply::Start).expect("the release starts") {
            Yield::Op(op) => {
                self.phase = Phase::Releasing(release);
                Step::Op(op)
            }
            Yield::Done(()) => self.after_release(),
        }
    }

    fn after_release(&mut self) -> Step {
        self.round += 1;
        self.next_round()
    }

    fn witness_load(&self) -> Op {
        Op::Load { loc: self.witness }
    }
}

impl Process for LockUser {
    fn tests_completions(&self) -> bool {
        false // the locks wait; they never `test` or `wait_any`
    }

    fn resume(&mut self, reply: Reply) -> Step {
        if let Reply::Failed(e) = &reply {
            panic!("user {}: operation failed: {e}", self.slot);
        }
        match &mut self.phase {
            Phase::Idle => self.next_round(),
            Phase::Acquiring(acquire) => match acquire.resume(reply).expect("acquire") {
                Yield::Op(op) => Step::Op(op),
                Yield::Done(()) => {
                    self.phase = Phase::WitnessIn;
                    Step::Op(self.witness_load())
                }
            },
            Phase::WitnessIn => {
                // A visible step: the user is inside from here.
                self.inside = Some(self.role());
                // Readers' critical sections are empty: exclusion is what the flags check,
                // and the counter checks the writers' updates.
                match self.counter.filter(|_| self.role() == Role::Writer) {
                    Some(counter) => {
                        self.phase = Phase::CsGet;
                        Step::Op(Op::Get {
                            local: self.scratch,
                            remote: counter,
                            work_id: USER_WORK_ID,
                        })
                    }
                    None => {
                        self.phase = Phase::WitnessOut;
                        Step::Op(self.witness_load())
                    }
                }
            }
            Phase::CsGet => {
                self.phase = Phase::CsWaited;
                Step::Op(Op::Wait {
                    work_id: USER_WORK_ID,
                })
            }
            Phase::CsWaited => {
                self.phase = Phase::CsLoaded;
                Step::Op(Op::Load { loc: self.scratch })
            }
            Phase::CsLoaded => {
                let Reply::Value(v) = reply else {
                    panic!("a load replies a value")
                };
                let counter = self.counter.expect("a counter");
                self.phase = Phase::CsPut;
                Step::Op(Op::PutInline {
                    remote: counter,
                    value: v + 1,
                    work_id: USER_WORK_ID,
                })
            }
            Phase::CsPut => {
                self.phase = Phase::CsFenced;
                Step::Op(Op::GlobalFence {
                    node: self.counter.expect("a counter").node,
                })
            }
            Phase::CsFenced => {
                self.phase = Phase::WitnessOut;
                Step::Op(self.witness_load())
            }
            Phase::WitnessOut => {
                // A visible step: the user is outside from here.
                self.inside = None;
                self.start_release()
            }
            Phase::Releasing(release) => match release.resume(reply).expect("release") {
                Yield::Op(op) => Step::Op(op),
                Yield::Done(()) => self.after_release(),
            },
            Phase::Finished => unreachable!("a finished user is not resumed"),
        }
    }
}

/// A configuration: the lock, the users' nodes and roles, the counter's home, and words
/// that start non-zero.
struct Config {
    name: &'static str,
    layout: Layout,
    users: Vec<LockUser>,
    nodes: Vec<NodeId>,
    counter: Option<Loc>,
    init: Vec<(Loc, u64)>,
}

/// Builds users of the lock `make` returns, one per `(node, roles)`.
fn config(
    name: &'static str,
    node_count: u16,
    users: &[(u16, &[Role])],
    with_counter: bool,
    make: impl FnOnce(&mut LayoutBuilder, &[NodeId]) -> Lock,
) -> Config {
    let mut layout = LayoutBuilder::new(node_count);
    let nodes: Vec<NodeId> = users.iter().map(|&(n, _)| NodeId(n)).collect();
    let lock = make(&mut layout, &nodes);
    let counter = with_counter.then(|| layout.alloc(NodeId(node_count - 1)));
    let users = users
        .iter()
        .enumerate()
        .map(|(slot, &(n, roles))| LockUser {
            lock: lock.clone(),
            slot,
            roles: {
                assert!(
                    roles.len() <= MAX_ROUNDS,
                    "at most {MAX_ROUNDS} acquisitions"
                );
                std::array::from_fn(|i| roles.get(i).copied().unwrap_or(Role::Writer))
            },
            rounds: roles.len(),
            round: 0,
            witness: layout.alloc(NodeId(n)),
            counter,
            scratch: layout.alloc(NodeId(n)),
            phase: Phase::Idle,
            inside: None,
        })
        .collect();
    Config {
        name,
        layout: layout.build(),
        users,
        nodes,
        counter,
        init: Vec::new(),
    }
}

impl Config {
    fn machine(&self) -> Machine<LockUser> {
        let mut machine = Machine::new(&self.layout);
        for &(loc, value) in &self.init {
            machine
                .init(loc, value)
                .expect("an initial word in the layout");
        }
        for (slot, user) in self.users.iter().enumerate() {
            let t = machine.spawn(self.nodes[slot], user.clone());
            machine.set_private(user.scratch, t);
            for w in user.lock.private_words(slot) {
                machine.set_private(w, t);
            }
        }
        machine
    }

    fn writes(&self) -> u64 {
        self.users
            .iter()
            .flat_map(|u| &u.roles[..u.rounds])
            .filter(|r| **r == Role::Writer)
            .count() as u64
    }
}

/// A writer is never inside with anyone.
fn exclusion(m: &Machine<LockUser>) -> Option<String> {
    let inside: Vec<Role> = m.threads.iter().filter_map(|t| t.process.inside).collect();
    let writers = inside.iter().filter(|r| **r == Role::Writer).count();
    (writers > 1 || (writers == 1 && inside.len() > 1))
        .then(|| format!("inside together: {inside:?}"))
}

/// Explores `config` with the exclusion invariant; checks stuck states and final states;
/// returns the exploration.
fn check(config: &Config) -> Exploration<(bool, Option<u64>)> {
    let started = Instant::now();
    let counter = config.counter;
    let exploration = explore_checked(
        config.machine(),
        BUDGET,
        |m| {
            let finished = m
                .threads
                .iter()
                .all(|t| t.process.phase == Phase::Finished && t.process.inside.is_none());
            (finished, counter.map(|c| m.read(c).expect("the counter")))
        },
        exclusion,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", config.name));
    eprintln!(
        "{}: {} states, {} transitions, {} finals, {:?}",
        config.name,
        exploration.states,
        exploration.transitions,
        exploration.finals,
        started.elapsed()
    );
    assert_eq!(exploration.stuck, 0, "{}: stuck states", config.name);
    let expected = (true, counter.map(|_| config.writes()));
    assert_eq!(
        exploration.outcomes.iter().collect::<Vec<_>>(),
        vec![&expected],
        "{}: every final state has every user finished and the counter at the number of \
         write acquisitions",
        config.name
    );
    exploration
}

/// Runs `config` `runs` times on the in-process backend with NIC worker threads and seeded
/// jitter; the counter must equal the number of write acquisitions after each run.
fn check_mem(config: &Config, runs: u64) {
    let counter = config.counter.expect("mem runs check the counter");
    for seed in 0..runs {
        let fabric = MemFabric::with_options(
            config.layout.clone(),
            MemOptions {
                mode: Mode::Worker,
                jitter: Some(seed),
            },
        );
        for &(loc, value) in &config.init {
            fabric
                .write(loc, value)
                .expect("an initial word in the layout");
        }
        let procs = config
            .nodes
            .iter()
            .copied()
            .zip(config.users.iter().cloned())
            .collect();
        let finished = fabric.run(procs);
        assert!(
            finished.iter().all(|u| u.phase == Phase::Finished),
            "{} seed {seed}: every user finishes",
            config.name
        );
        assert_eq!(
            fabric.read(counter),
            Ok(config.writes()),
            "{} seed {seed}: lost update in a critical section",
            config.name
        );
    }
}

const W: Role = Role::Writer;
const R: Role = Role::Reader;

/// In-process runs per configuration.
const MEM_RUNS: u64 = 100;

/// Explores `config`, checks its pinned state count, then runs it on the in-process
/// backend.
fn check_pinned(config: &Config, states: usize) {
    let exploration = check(config);
    assert_eq!(
        exploration.states, states,
        "{}: explored state count changed (pinned)",
        config.name
    );
    check_mem(config, MEM_RUNS);
}

fn rmarw_config(
    name: &'static str,
    users: &[(u16, &[Role])],
    nodes: u16,
    t_dc: usize,
    (t_l_node, t_l_root): (u64, u64),
    t_r: u64,
) -> Config {
    config(name, nodes, users, true, |layout, n| {
        let c = RmaRwConfig::two_level(n, t_dc, t_l_node, t_l_root, t_r);
        Lock::Rw(RmaRw::new(layout, &c, n))
    })
}

/// wlock (rdma-rmw §4.2): three users on two nodes, one acquisition each. (On three
/// nodes it is 278 000 states: every release broadcasts to every node.)
#[test]
fn wlock_three_users_two_nodes() {
    let c = config(
        "wlock",
        2,
        &[(0, &[W]), (1, &[W]), (1, &[W])],
        true,
        |l, n| Lock::W(WLock::new(l, NodeId(0), n)),
    );
    check_pinned(&c, 31_093);
}

/// wlock: two users on two nodes, two acquisitions each (tickets and release variables
/// are reused).
#[test]
fn wlock_two_users_twice() {
    let c = config(
        "wlock-2x2",
        2,
        &[(0, &[W, W]), (1, &[W, W])],
        true,
        |l, n| Lock::W(WLock::new(l, NodeId(0), n)),
    );
    check_pinned(&c, 11_427);
}

/// slock (rdma-rmw §4.3): three users on two nodes, one acquisition each.
#[test]
fn slock_three_users_two_nodes() {
    let c = config(
        "slock",
        2,
        &[(0, &[W]), (1, &[W]), (1, &[W])],
        true,
        |l, n| Lock::S(WLock::new(l, NodeId(0), n), 2),
    );
    check_pinned(&c, 32_251);
}

/// nlock (rdma-rmw §4.4) on node 0: three users on three nodes, one acquisition each.
#[test]
fn nlock_three_users_three_nodes() {
    let c = config(
        "nlock",
        3,
        &[(0, &[W]), (1, &[W]), (2, &[W])],
        true,
        |l, n| Lock::N(NLock::new(l, NodeId(0), n)),
    );
    check_pinned(&c, 73_134);
}

/// D-MCS: three users on three nodes, one acquisition each (TAIL on node 0).
#[test]
fn dmcs_three_users_three_nodes() {
    let c = config(
        "dmcs-3x1",
        3,
        &[(0, &[W]), (1, &[W]), (2, &[W])],
        true,
        |l, n| Lock::D(Dmcs::new(l, NodeId(0), n)),
    );
    check_pinned(&c, 509_561);
}

/// D-MCS: two users on two nodes, two acquisitions each (the queue is reused).
#[test]
fn dmcs_two_users_twice() {
    let c = config(
        "dmcs-2x2",
        2,
        &[(0, &[W, W]), (1, &[W, W])],
        true,
        |l, n| Lock::D(Dmcs::new(l, NodeId(1), n)),
    );
    check_pinned(&c, 49_234);
}

/// D-MCS with 2-bit tickets (M = 4) across the raw 2³² wrap: TAIL starts as the free
/// lock (2³² − 2, 2³² − 2); A acquires three times, B twice, so the five tickets cross
/// the wrap and, when the lock is passed back and forth, A's third ticket is ≡ the
/// first one's OPEN mod 4. The refresh keeps OPEN within reach.
fn dmcs_wrap_config(name: &'static str, refresh: bool) -> Config {
    let mut c = config(name, 2, &[(0, &[W, W, W]), (1, &[W, W])], true, |l, n| {
        let tickets = Tickets { bits: 2, refresh };
        Lock::D(Dmcs::with_tickets(l, NodeId(0), n, tickets))
    });
    let Lock::D(lock) = &c.users[0].lock else {
        unreachable!("a D-MCS configuration")
    };
    let start = u64::from(u32::MAX - 1);
    c.init.push((lock.tail(), (start << 32) | start));
    c
}

/// D-MCS across the wrap with the OPEN refresh: exclusion, no stuck state, counter 5.
#[test]
fn dmcs_ticket_wrap() {
    check_pinned(&dmcs_wrap_config("dmcs-wrap", true), 139_201);
}

/// The same without the refresh: the explorer finds two holders (A's third ticket,
/// t0 + 4 ≡ t0 = OPEN, enters while B holds t0 + 3). This shows the test above can fail.
#[test]
fn dmcs_ticket_wrap_without_refresh_breaks_exclusion() {
    let c = dmcs_wrap_config("dmcs-wrap-no-refresh", false);
    let found = explore_checked(c.machine(), BUDGET, |_| (), exclusion);
    match found {
        Err(ExploreError::Invariant { message, states }) => {
            eprintln!("{}: {message} after {states} states", c.name);
            assert!(message.starts_with("inside together"), "{message}");
        }
        other => panic!("without the refresh, exclusion holds?! {other:?}"),
    }
}

/// RMA-RW, writers only, on two nodes: the root passes the lock between the nodes
/// (T_L,root = 2) and then to the readers' side.
#[test]
fn rmarw_writers_two_nodes() {
    let c = rmarw_config("rmarw-writers-2n", &[(0, &[W]), (1, &[W])], 2, 1, (1, 2), 1);
    check_pinned(&c, 122_769);
}

/// RMA-RW, writers only, on one node, twice each: the node's DQ passes the lock within
/// the cohort (T_L,node = 2), then the cohort climbs again.
#[test]
fn rmarw_writers_cohort() {
    let c = rmarw_config(
        "rmarw-writers-cohort",
        &[(0, &[W, W]), (0, &[W, W])],
        1,
        2,
        (2, 1),
        1,
    );
    check_pinned(&c, 203_624);
}

/// RMA-RW, readers only: three readers on two nodes, one counter, T_R = 1, so the
/// budget runs out at the second arrival and readers reset it.
#[test]
fn rmarw_readers_only() {
    let c = rmarw_config(
        "rmarw-readers",
        &[(0, &[R]), (1, &[R]), (1, &[R])],
        2,
        3,
        (1, 1),
        1,
    );
    check_pinned(&c, 108_591);
}

/// RMA-RW, mixed: a writer and a reader that reads twice (T_R = 1: the second read is over
/// the budget and meets the writer at the root).
#[test]
fn rmarw_mixed_budget() {
    let c = rmarw_config(
        "rmarw-mixed-budget",
        &[(0, &[W]), (1, &[R, R])],
        2,
        2,
        (1, 1),
        1,
    );
    check_pinned(&c, 12_563);
}

/// RMA-RW, mixed: one writer and two readers on two nodes, one counter, T_R = 2 (both
/// readers are within the budget; the budget's paths are covered above, and T_R = 1 here
/// would take 460 000 states).
#[test]
fn rmarw_mixed_three() {
    let c = rmarw_config(
        "rmarw-mixed-3",
        &[(0, &[W]), (1, &[R]), (1, &[R])],
        2,
        3,
        (1, 1),
        2,
    );
    check_pinned(&c, 369_358);
}

/// RMA-RW with a one-level tree (the root's members are the participants themselves):
/// two users on two nodes, one writes then reads, the other writes; T_L,root = 2.
#[test]
fn rmarw_flat() {
    let users: &[(u16, &[Role])] = &[(0, &[W, R]), (1, &[W])];
    let c = config("rmarw-flat", 2, users, true, |layout, n| {
        let c = RmaRwConfig {
            levels: vec![vec![0; n.len()]],
            t_dc: 3,
            t_l: vec![2],
            t_r: 1,
        };
        Lock::Rw(RmaRw::new(layout, &c, n))
    });
    check_pinned(&c, 12_037);
}

/// RMA-RW with an element that spans two nodes (one node-level element for writers on
/// nodes 0 and 1, T_L,node = 2): the element's member in the root's DQ lives on node 0, so
/// a writer from node 1 that climbs enters it from afar (its FAA lands in scratch and a
/// put copies it to TICKET), and the lock passed within the element makes one writer
/// leave the root for a ticket the other drew (custody, Lemma 6 of the ticket queue).
#[test]
fn rmarw_element_across_nodes() {
    let users: &[(u16, &[Role])] = &[(0, &[W]), (1, &[W])];
    let c = config("rmarw-across", 2, users, true, |layout, n| {
        let c = RmaRwConfig {
            levels: vec![vec![0; n.len()], vec![7; n.len()]],
            t_dc: 2,
            t_l: vec![1, 2],
            t_r: 1,
        };
        Lock::Rw(RmaRw::new(layout, &c, n))
    });
    check_pinned(&c, 16_239);
}

/// RMA-RW's DQs with 2-bit tickets across the raw 2³² wrap: every TAIL starts as an empty
/// queue at (2³² − 2, 2³² − 2); A (node 0) writes twice, B (node 1) once, T_L,root = 2.
/// The root's DQ passes between the two node elements with stale snapshots, so the
/// refresh (by whichever participant acts for the element) and the leave's retry after
/// a refreshed OPEN both run.
#[test]
fn rmarw_ticket_wrap() {
    let users: &[(u16, &[Role])] = &[(0, &[W, W]), (1, &[W])];
    let mut c = config("rmarw-wrap", 2, users, true, |layout, n| {
        let c = RmaRwConfig::two_level(n, 2, 1, 2, 1);
        let tickets = rmarw::Tickets {
            bits: 2,
            refresh: true,
        };
        Lock::Rw(RmaRw::with_tickets(layout, &c, n, tickets))
    });
    let Lock::Rw(lock) = &c.users[0].lock else {
        unreachable!("an RMA-RW configuration")
    };
    let start = u64::from(u32::MAX - 1);
    let tails = lock.tails();
    c.init
        .extend(tails.into_iter().map(|t| (t, (start << 32) | start)));
    check_pinned(&c, 153_092);
}

/// RMA-RW readers share: exhaustively, some reachable state has both readers inside
/// (found as a violation of "at most one reader inside").
#[test]
fn rmarw_readers_share() {
    let c = rmarw_config("rmarw-share", &[(0, &[R]), (1, &[R])], 2, 1, (1, 1), 1);
    let found = explore_checked(
        c.machine(),
        BUDGET,
        |_| (),
        |m| {
            let readers = m
                .threads
                .iter()
                .filter(|t| t.process.inside == Some(Role::Reader))
                .count();
            (readers == 2).then(|| "two readers inside".to_string())
        },
    );
    match found {
        Err(ExploreError::Invariant { message, .. }) => assert_eq!(message, "two readers inside"),
        other => panic!("two readers are never inside together: {other:?}"),
    }
}

/// The harness has teeth: without a lock, the explorer finds two writers inside.
#[test]
fn harness_catches_no_lock() {
    let c = config("nothing", 2, &[(0, &[W]), (1, &[W])], true, |_, _| {
        Lock::Nothing
    });
    let found = explore_checked(c.machine(), BUDGET, |_| (), exclusion);
    assert!(
        matches!(found, Err(ExploreError::Invariant { .. })),
        "no lock, yet no violation: {found:?}"
    );
}
