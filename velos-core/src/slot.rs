//! One slot's proposer: Algorithm 5 of the Velos paper (abortable consensus over remote
//! CAS with predicted acceptor states), sans-IO. The caller posts what [`SlotCommand`]s say
//! and reports completions; the slot decides or aborts. An abort is a normal outcome.

use crate::proposal::{Numbering, ProposerId};
use crate::spare::Spare;
use crate::word::{AcceptorState, WordLayout};
use std::collections::VecDeque;

/// The fixed parameters of a slot proposer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotConfig {
    /// Acceptor word layout.
    pub layout: WordLayout,
    /// Number of acceptors.
    pub acceptors: u16,
    /// The acceptors that vote in this slot (bit a: acceptor a): only they are sent CASes
    /// and counted in majorities ([`crate::log::membership`]). [`SlotConfig::all`] for
    /// every acceptor.
    pub members: u64,
    /// Members whose words do not count here: the process behind them now is not the
    /// incarnation this slot's configuration names (rule (no amnesia),
    /// [`crate::log::configuration`]). They are sent no CAS and counted in no majority,
    /// which stays a majority of `members`.
    pub absent: u64,
    /// Proposal numbering.
    pub numbering: Numbering,
    /// Who I am.
    pub me: ProposerId,
    /// The slot's instance tag (0 without a ring).
    pub tag: u16,
    /// The instance reuses its ring position: a word of the previous lap stands for the
    /// initial state (`crate::log::ring`). A word of any other lap stops the slot
    /// ([`Outcome::Overtaken`]).
    pub recycled: bool,
    /// A deliberately wrong variant of the algorithm, for showing that the checks catch
    /// it; only [`Mutation::None`] exists outside the `mutations` feature.
    pub mutation: Mutation,
}

/// Deliberately wrong variants of Algorithm 5 (the `mutations` feature, for tests only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// The algorithm as it is.
    #[default]
    None,
    /// A majority promised: accept my own value even if a promise showed one accepted.
    #[cfg(feature = "mutations")]
    SkipAdoption,
    /// Decide on the first successful accept CAS, without a majority.
    #[cfg(feature = "mutations")]
    AcceptWithoutMajority,
    /// Retry after an abort with the same proposal number (no bump), counting acceptors
    /// whose predicted word already shows that number as promised or accepted: the
    /// shortcut the brief found unsafe ("a prediction is not a confirmation").
    #[cfg(feature = "mutations")]
    ReuseProposal,
    /// The overflow fallback moves a slot to its next epoch without the value its frozen
    /// majority carries ([`crate::freeze`]): the log's leader proposes freely there.
    #[cfg(feature = "mutations")]
    DropCarry,
    /// The log's leader answers reads from its state whenever it leads, lease or not
    /// ([`crate::log::lease`]).
    #[cfg(feature = "mutations")]
    ReadWithoutLease,
    /// Count an accept as confirmed when its CAS is posted: the optimistic prediction
    /// (Algorithm 5's) taken for the CAS's result.
    #[cfg(feature = "mutations")]
    TrustPrediction,
    /// Reset a replica's own word of a ring position for its next lap with a CPU store
    /// once the previous instance is retired, instead of leaving the old lap's word to
    /// read as ⊥ ([`crate::log::ring`]): the store can land after the new instance's
    /// first CAS and erase its promise or accept.
    #[cfg(feature = "mutations")]
    ResetWithStore,
    /// A follower learns slot k as decided as soon as its own acceptor accepted a value
    /// there: one acceptor's word, not a majority's (nor the previous_decision proof).
    #[cfg(feature = "mutations")]
    LearnFromOne,
    /// No overflow fallback: a proposal number past the threshold wraps around to my
    /// smallest, and the prepare CAS writes it over the predicted word — a one-sided CAS
    /// has no compare() at the acceptor to refuse a lower number.
    #[cfg(feature = "mutations")]
    SkipFallback,
    /// A process started blank in a replica's place rejoins under the replica's old
    /// identity: it takes the incarnation of the process it replaces, and its peers keep
    /// counting the replica at the old one ([`crate::log::configuration`], rule (no
    /// amnesia) broken) — its blank words stand in for the promises and accepts lost.
    #[cfg(feature = "mutations")]
    RejoinBlank,
    /// Count a promise as confirmed when its prepare CAS is posted, and adopt from the
    /// predicted word it was built on: the prepare's optimistic prediction taken for its
    /// result (an independent model of the protocol found agreement broken by this variant
    /// with three proposers, or with two retries).
    #[cfg(feature = "mutations")]
    TrustPromise,
    /// Rule (chosen at prepare) broken: a value read for adoption counts as chosen when
    /// one confirmed promise shows its accepted pair, not a majority's; an accepted but
    /// unchosen value is decided before its accepts are confirmed.
    #[cfg(feature = "mutations")]
    ChosenByOne,
    /// Rule (sticky leader) broken: nobody's heartbeat claims the lead, so Ω moves it to
    /// the lowest able replica — from a working leader to a replacement the moment it
    /// votes (a liveness mutant: a hand-over on every change).
    #[cfg(feature = "mutations")]
    HandOver,
}

impl Mutation {
    /// Every deliberately wrong variant this build has (none without the `mutations`
    /// feature).
    pub const ALL: &'static [Mutation] = &[
        #[cfg(feature = "mutations")]
        Mutation::SkipAdoption,
        #[cfg(feature = "mutations")]
        Mutation::AcceptWithoutMajority,
        #[cfg(feature = "mutations")]
        Mutation::ReuseProposal,
        #[cfg(feature = "mutations")]
        Mutation::DropCarry,
        #[cfg(feature = "mutations")]
        Mutation::ReadWithoutLease,
        #[cfg(feature = "mutations")]
        Mutation::TrustPrediction,
        #[cfg(feature = "mutations")]
        Mutation::ResetWithStore,
        #[cfg(feature = "mutations")]
        Mutation::LearnFromOne,
        #[cfg(feature = "mutations")]
        Mutation::SkipFallback,
        #[cfg(feature = "mutations")]
        Mutation::RejoinBlank,
        #[cfg(feature = "mutations")]
        Mutation::TrustPromise,
        #[cfg(feature = "mutations")]
        Mutation::ChosenByOne,
        #[cfg(feature = "mutations")]
        Mutation::HandOver,
    ];

    /// The variant's name, in kebab case (`skip-adoption`); `none` for the algorithm.
    pub fn name(&self) -> &'static str {
        match self {
            Mutation::None => "none",
            #[cfg(feature = "mutations")]
            Mutation::SkipAdoption => "skip-adoption",
            #[cfg(feature = "mutations")]
            Mutation::AcceptWithoutMajority => "accept-without-majority",
            #[cfg(feature = "mutations")]
            Mutation::ReuseProposal => "reuse-proposal",
            #[cfg(feature = "mutations")]
            Mutation::DropCarry => "drop-carry",
            #[cfg(feature = "mutations")]
            Mutation::ReadWithoutLease => "read-without-lease",
            #[cfg(feature = "mutations")]
            Mutation::TrustPrediction => "trust-prediction",
            #[cfg(feature = "mutations")]
            Mutation::ResetWithStore => "reset-with-store",
            #[cfg(feature = "mutations")]
            Mutation::LearnFromOne => "learn-from-one",
            #[cfg(feature = "mutations")]
            Mutation::SkipFallback => "skip-fallback",
            #[cfg(feature = "mutations")]
            Mutation::RejoinBlank => "rejoin-blank",
            #[cfg(feature = "mutations")]
            Mutation::TrustPromise => "trust-promise",
            #[cfg(feature = "mutations")]
            Mutation::ChosenByOne => "chosen-by-one",
            #[cfg(feature = "mutations")]
            Mutation::HandOver => "hand-over",
        }
    }

    /// The variant named `name` ([`Mutation::name`]), if this build has it.
    pub fn from_name(name: &str) -> Option<Mutation> {
        std::iter::once(&Mutation::None)
            .chain(Mutation::ALL)
            .find(|m| m.name() == name)
            .copied()
    }
}

impl SlotConfig {
    /// The member mask of acceptors 0 to n − 1.
    pub fn all(n: u16) -> u64 {
        // The mask `log::membership::Members::all` holds, computed here so that a slot
        // knows nothing of the log above it.
        assert!(n <= 64, "at most 64 replicas");
        if n == 64 { u64::MAX } else { (1 << n) - 1 }
    }

    /// Whether acceptor `a` votes in this slot.
    pub fn votes(&self, a: u16) -> bool {
        a < 64 && (self.members & !self.absent) >> a & 1 == 1
    }

    /// Acceptors needed for a majority (of the members).
    pub fn majority(&self) -> usize {
        self.members.count_ones() as usize / 2 + 1
    }

    /// Proposal numbers above this are not used with one-sided CAS: the overflow fallback
    /// takes over (the paper's threshold: 2^31 - |Π| for 31-bit fields).
    pub fn overflow_threshold(&self) -> u64 {
        self.layout.max_proposal() - u64::from(self.numbering.proposers)
    }
}

/// Which content an accept writes into my value buffer before its CAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Content {
    /// My own input for this slot.
    Mine,
    /// The value read by the last [`SlotCommand::ReadValue`] (adopted).
    Adopted,
}

/// An operation the slot wants posted. All operations towards one acceptor must be posted
/// on one queue pair in the order given (the write before its CAS).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlotCommand {
    /// Remote CAS on acceptor `acceptor`'s word of this slot; report its old value with
    /// [`SlotProposer::on_cas`] and this `id`.
    Cas {
        /// Identifies this CAS to the slot.
        id: u64,
        /// The acceptor.
        acceptor: u16,
        /// The predicted word.
        expected: u64,
        /// The word the RPC would leave.
        desired: u64,
    },
    /// Write `content`, stamped with `proposal`, into my value buffer of this slot at
    /// `acceptor` (ahead of the accept CAS on the same queue pair).
    WriteValue {
        /// The acceptor.
        acceptor: u16,
        /// What to write.
        content: Content,
        /// The proposal number the buffer is stamped with.
        proposal: u64,
    },
    /// Read `proposer`'s value buffer of this slot at `acceptor`; its stamp must be at
    /// least `proposal` (see [`SlotProposer::on_value_read`] for why a newer stamp will
    /// do). Report with [`SlotProposer::on_value_read`].
    ReadValue {
        /// The acceptor that holds it.
        acceptor: u16,
        /// Whose buffer.
        proposer: ProposerId,
        /// The stamp expected.
        proposal: u64,
    },
}

impl SlotCommand {
    /// The acceptor the command goes to.
    pub fn acceptor(&self) -> u16 {
        match *self {
            SlotCommand::Cas { acceptor, .. }
            | SlotCommand::WriteValue { acceptor, .. }
            | SlotCommand::ReadValue { acceptor, .. } => acceptor,
        }
    }
}

/// Where a slot stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Nothing started, or a phase is under way.
    Pending,
    /// A majority accepted `proposal` with my buffer's content (`content`): my own
    /// proposal, or, under rule (chosen at prepare), the earlier proposal b' at which a
    /// majority accepted the value I adopted.
    Decided {
        /// The proposal number a majority accepted the value at.
        proposal: u64,
        /// Which content my buffer held.
        content: Content,
    },
    /// The attempt aborted (a nack, or an overwritten value buffer); prepare again to retry.
    Aborted,
    /// The next proposal number would pass the overflow threshold: one-sided CAS must not
    /// be used on this slot any more.
    Overflow,
    /// An acceptor's word belongs to a later lap of the ring position: the instance was
    /// retired (decided, and in a majority's snapshots). Nothing more is posted for it.
    Overtaken,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Posted {
    id: u64,
    attempt: u32,
    accept: bool,
    expected: u64,
    desired: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// Waiting for a majority of successful prepare CASes; `promised[a]` holds the state a
    /// successful prepare CAS confirmed.
    Preparing {
        promised: Vec<Option<AcceptorState>>,
    },
    /// A majority promised and nothing is to be adopted: waiting for a value to propose
    /// (pre-preparation: the accept then costs one CAS round trip).
    Promised,
    /// Waiting for the value to adopt; `chosen`: the proposal b' of the accepted pair
    /// ⟨b', p⟩ read, when a majority's confirmed promises showed it (rule (chosen at
    /// prepare)).
    Reading {
        chosen: Option<u64>,
    },
    /// Waiting for a majority of successful accept CASes.
    Accepting {
        content: Content,
        /// Bit a: acceptor a's accept CAS of this attempt succeeded.
        accepted: u64,
    },
    Done(Outcome),
}

/// One slot's proposer state (Algorithm 5).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SlotProposer {
    config: SlotConfig,
    /// Per acceptor: the word expected after every CAS posted on it so far.
    predicted: Vec<u64>,
    /// Per acceptor: CASes posted and not completed, oldest first (queue pairs are FIFO).
    in_flight: Vec<VecDeque<Posted>>,
    proposal: u64,
    attempt: u32,
    next_id: u64,
    phase: Phase,
    /// After the promises, wait for [`SlotProposer::supply`] instead of accepting my value
    /// at once (pre-preparation).
    hold: bool,
    /// The promises of the last prepare, kept for the next (no allocation per attempt).
    spare: Spare<Vec<Option<AcceptorState>>>,
    /// Among equally good promises, adopt from my own acceptor (rule (local adoption)).
    local: bool,
}

impl SlotProposer {
    /// A slot proposer whose predictions start at `predicted` (one word per acceptor; the
    /// initial state ⟨0,0,⊥⟩, or a new leader's local acceptor words).
    pub fn new(config: SlotConfig, predicted: Vec<u64>) -> SlotProposer {
        assert_eq!(
            predicted.len(),
            usize::from(config.acceptors),
            "one prediction per acceptor"
        );
        assert!(
            config.numbering.proposers as u64 <= config.layout.max_proposers(),
            "value field names every proposer"
        );
        let mut proposer = SlotProposer {
            in_flight: Vec::new(),
            config,
            predicted: Vec::new(),
            proposal: 0,
            attempt: 0,
            next_id: 0,
            phase: Phase::Idle,
            hold: false,
            spare: Spare::default(),
            local: false,
        };
        proposer.renew(config, predicted);
        proposer
    }

    /// Makes this proposer what [`SlotProposer::new`] would make of `config` and
    /// `predicted`, reusing its memory (a leader's decided slot becomes its next slot).
    pub fn renew(&mut self, config: SlotConfig, predicted: impl IntoIterator<Item = u64>) {
        self.set_phase(Phase::Idle);
        self.config = config;
        self.predicted.clear();
        self.predicted.extend(predicted);
        let n = usize::from(config.acceptors);
        assert_eq!(self.predicted.len(), n, "one prediction per acceptor");
        self.in_flight.truncate(n);
        self.in_flight.iter_mut().for_each(VecDeque::clear);
        self.in_flight.resize_with(n, VecDeque::new);
        (self.proposal, self.attempt, self.next_id) = (0, 0, 0);
        (self.hold, self.local) = (false, false);
        assert!(
            self.in_flight() == 0 && self.phase == Phase::Idle,
            "a renewed proposer is a new one"
        );
    }

    /// Moves to `next`, keeping the promises' room of a prepare it leaves.
    fn set_phase(&mut self, next: Phase) {
        if let Phase::Preparing { promised } = std::mem::replace(&mut self.phase, next) {
            self.spare.keep(promised);
        }
    }

    /// Makes this proposer, once a majority promised with nothing to adopt, wait for
    /// [`SlotProposer::supply`] (a slot pre-prepared ahead of its value).
    pub fn hold(&mut self) {
        self.hold = true;
    }

    /// The same slot proposer, but one that adopts from my own acceptor among those whose
    /// promises bear the highest accepted proposal (rule (local adoption)).
    pub fn reading_locally(mut self) -> SlotProposer {
        self.read_locally();
        self
    }

    /// Makes this proposer [`SlotProposer::reading_locally`].
    pub fn read_locally(&mut self) {
        self.local = true;
    }

    /// Whether a majority promised and the slot waits for a value ([`SlotProposer::supply`]).
    pub fn is_promised(&self) -> bool {
        matches!(self.phase, Phase::Promised)
    }

    /// Proposes my value in a promised slot: the accept CASes (one round trip).
    /// `previous` as for the accept of [`SlotProposer::on_cas`].
    pub fn supply(&mut self, previous: &[u8], out: &mut Vec<SlotCommand>) {
        self.supply_content(Content::Mine, previous, out);
    }

    /// Proposes `content` in a promised slot: [`Content::Mine`], or [`Content::Adopted`]
    /// for a value the slot must carry from a frozen epoch ([`crate::freeze`]).
    pub fn supply_content(
        &mut self,
        content: Content,
        previous: &[u8],
        out: &mut Vec<SlotCommand>,
    ) {
        assert!(
            self.is_promised(),
            "supply a promised slot, not {:?}",
            self.phase
        );
        self.accept(content, previous, out);
        #[cfg(feature = "mutations")]
        let trusted = self.config.mutation == Mutation::TrustPrediction;
        #[cfg(not(feature = "mutations"))]
        let trusted = false;
        assert!(
            matches!(
                self.phase,
                Phase::Accepting { .. } | Phase::Done(Outcome::Aborted)
            ) || trusted && matches!(self.phase, Phase::Done(Outcome::Decided { .. })),
            "Alg. 5: a supplied slot accepts (or its attempt is hopeless)"
        );
    }

    /// PREPARE with a proposal number above `floor` too (a leader's ballot minus one, so
    /// that its slots share one proposal number while nothing outbids it).
    pub fn prepare_above(&mut self, floor: u64, out: &mut Vec<SlotCommand>) {
        self.proposal = self.proposal.max(floor);
        self.prepare(out);
    }

    /// A fresh slot: every acceptor predicted at ⟨tag, 0, 0, ⊥⟩.
    pub fn fresh(config: SlotConfig) -> SlotProposer {
        let initial = config
            .layout
            .encode(AcceptorState::initial(config.tag))
            .expect("the tag fits the layout");
        SlotProposer::new(config, vec![initial; usize::from(config.acceptors)])
    }

    /// Where the slot stands.
    pub fn outcome(&self) -> Outcome {
        match self.phase {
            Phase::Done(outcome) => outcome,
            _ => Outcome::Pending,
        }
    }

    /// The current proposal number (0 before the first prepare).
    pub fn proposal(&self) -> u64 {
        self.proposal
    }

    /// How many times this slot was prepared since it was opened (1: the first attempt).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The state the predicted word of `acceptor` stands for in this instance (a previous
    /// lap's word is ⊥): `None` if it belongs to a later lap.
    pub fn predicted(&self, acceptor: u16) -> Option<AcceptorState> {
        self.state_of(self.predicted[usize::from(acceptor)])
    }

    fn state_of(&self, word: u64) -> Option<AcceptorState> {
        let c = self.config;
        c.layout.state_at(c.tag, c.recycled, word)
    }

    /// Lemma (overtaken, `crate::log::ring`): once any word shows a later lap, the slot
    /// stops for good (a decision already reached stays).
    fn overtaken(&mut self) -> bool {
        let later = (0..self.predicted.len()).any(|a| self.predicted(a as u16).is_none());
        if later && !matches!(self.phase, Phase::Done(Outcome::Decided { .. })) {
            self.set_phase(Phase::Done(Outcome::Overtaken));
        }
        later
    }

    /// The predicted word of `acceptor` (what a CAS posted now would expect).
    pub fn predicted_word(&self, acceptor: u16) -> u64 {
        self.predicted[usize::from(acceptor)]
    }

    /// CASes posted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight.iter().map(VecDeque::len).sum()
    }

    fn cas(
        &mut self,
        acceptor: usize,
        desired: AcceptorState,
        accept: bool,
        out: &mut Vec<SlotCommand>,
    ) {
        let expected = self.predicted[acceptor];
        let desired = self
            .config
            .layout
            .encode(desired)
            .expect("proposal numbers stay below the overflow threshold");
        self.next_id += 1;
        let id = self.next_id;
        self.in_flight[acceptor].push_back(Posted {
            id,
            attempt: self.attempt,
            accept,
            expected,
            desired,
        });
        // The optimistic update: predict that the CAS succeeds (Algorithm 5).
        self.predicted[acceptor] = desired;
        out.push(SlotCommand::Cas {
            id,
            acceptor: acceptor as u16,
            expected,
            desired,
        });
    }

    /// PREPARE: raise the proposal number above every predicted `min_proposal` and post one
    /// CAS per acceptor. Also the retry after an abort.
    pub fn prepare(&mut self, out: &mut Vec<SlotCommand>) {
        assert!(
            matches!(self.phase, Phase::Idle | Phase::Done(Outcome::Aborted)),
            "prepare from idle or after an abort, not {:?}",
            self.phase
        );
        if self.overtaken() {
            return; // no CAS is ever built on a later lap's word
        }
        let highest = (0..self.predicted.len())
            .filter_map(|a| self.predicted(a as u16))
            .map(|s| s.min_proposal)
            .max()
            .unwrap_or(0);
        let proposal = self
            .config
            .numbering
            .next_above(self.config.me, highest.max(self.proposal));
        #[cfg(feature = "mutations")]
        let proposal = if self.config.mutation == Mutation::ReuseProposal && self.proposal > 0 {
            self.proposal
        } else {
            proposal
        };
        #[cfg(feature = "mutations")]
        let wrapped = self.config.mutation == Mutation::SkipFallback
            && proposal > self.config.overflow_threshold();
        #[cfg(feature = "mutations")]
        let proposal = if wrapped {
            self.config.numbering.next_above(self.config.me, 0)
        } else {
            proposal
        };
        #[cfg(not(feature = "mutations"))]
        let wrapped = false;
        if proposal > self.config.overflow_threshold() {
            self.set_phase(Phase::Done(Outcome::Overflow));
            return;
        }
        self.proposal = proposal;
        self.attempt += 1;
        let mut promised = self.spare.take().unwrap_or_default();
        promised.clear();
        promised.resize(self.predicted.len(), None);
        let mut posted = 0u64;
        for (a, promise) in promised.iter_mut().enumerate() {
            if !self.config.votes(a as u16) {
                continue; // not a member in this slot: never asked, never counted
            }
            let state = self.predicted(a as u16).expect("checked: no later lap");
            #[cfg(feature = "mutations")]
            if self.config.mutation == Mutation::ReuseProposal && state.min_proposal >= proposal {
                // The shortcut that only fresh numbers make safe: a prediction showing my
                // number counts as my promise.
                if state.min_proposal == proposal {
                    *promise = Some(state);
                }
                continue;
            }
            // compare(PREPARE(n), state) = n > min_proposal, true after the bump.
            assert!(
                wrapped || proposal > state.min_proposal && promise.is_none(),
                "the bump puts the proposal above every prediction"
            );
            self.cas(
                a,
                AcceptorState {
                    min_proposal: proposal,
                    ..state
                },
                false,
                out,
            );
            posted |= 1 << a;
            #[cfg(feature = "mutations")]
            if self.config.mutation == Mutation::TrustPromise {
                *promise = Some(state); // "a prediction is not a confirmation", broken
            }
        }
        let counted = promised.iter().flatten().count();
        // The attempt is new: its CASes in flight are those just posted.
        let hopes = promised
            .iter()
            .enumerate()
            .filter(|&(a, p)| p.is_some() || posted >> a & 1 == 1)
            .count();
        self.set_phase(Phase::Preparing { promised });
        debug_assert_eq!(hopes, self.hopes(false), "rule (hopeless attempt)");
        if counted >= self.config.majority() {
            self.prepared(&[], out);
        } else if hopes < self.config.majority() {
            // Rule (hopeless attempt), at its start: too few voters (rule (no amnesia)).
            self.set_phase(Phase::Done(Outcome::Aborted));
            return;
        }
        assert!(
            counted > 0
                || self.in_flight()
                    >= (self.config.members & !self.config.absent).count_ones() as usize,
            "one prepare CAS per voting member in flight"
        );
    }

    /// Reports the old value of CAS `id` (on `acceptor`). Completions of one acceptor
    /// arrive in posting order.
    pub fn on_cas(
        &mut self,
        acceptor: u16,
        id: u64,
        actual: u64,
        previous: &[u8],
        out: &mut Vec<SlotCommand>,
    ) {
        let a = usize::from(acceptor);
        let posted = self.in_flight[a]
            .pop_front()
            .expect("a completion for a posted CAS");
        assert_eq!(
            posted.id, id,
            "completions of one acceptor arrive in posting order"
        );
        let success = actual == posted.expected;
        if self.in_flight[a].is_empty() {
            // Nothing newer in flight: the prediction is now a fact.
            self.predicted[a] = if success { posted.desired } else { actual };
        }
        if !success && self.state_of(actual).is_none() {
            self.predicted[a] = actual; // what the word is, even behind CASes in flight
            self.overtaken();
            return;
        }
        if posted.attempt != self.attempt {
            return; // an earlier attempt's CAS: it only corrects the prediction
        }
        match &mut self.phase {
            Phase::Preparing { promised } if !posted.accept => {
                if !success {
                    self.set_phase(Phase::Done(Outcome::Aborted)); // the paper: abort on a nack
                    return;
                }
                // The word was exactly `expected`: a confirmed state, safe to adopt from
                // (a previous lap's word confirms ⊥, lemma (recycling)).
                let c = self.config;
                let state = c.layout.state_at(c.tag, c.recycled, posted.expected);
                promised[a] = Some(state.expect("a CAS is built on this instance's words only"));
                if promised.iter().flatten().count() >= self.config.majority() {
                    self.prepared(previous, out);
                }
            }
            Phase::Accepting { content, accepted } if posted.accept => {
                if !success {
                    self.set_phase(Phase::Done(Outcome::Aborted));
                    return;
                }
                // Only a successful CAS counts, never a prediction that equals the desired
                // word ("a prediction is not a confirmation").
                *accepted |= 1 << a;
                #[cfg(feature = "mutations")]
                let needed = if self.config.mutation == Mutation::AcceptWithoutMajority {
                    1
                } else {
                    self.config.majority()
                };
                #[cfg(not(feature = "mutations"))]
                let needed = self.config.majority();
                if accepted.count_ones() as usize >= needed {
                    let content = *content;
                    self.set_phase(Phase::Done(Outcome::Decided {
                        proposal: self.proposal,
                        content,
                    }));
                }
            }
            // A late completion of this attempt after the phase moved on: nothing to count.
            _ => {}
        }
    }

    /// A majority promised: adopt the value with the highest accepted proposal among the
    /// confirmed states, or propose my own.
    ///
    /// Rule (local adoption): among the acceptors whose confirmed state bears that highest
    /// proposal b', my own is read from when it is one of them. A proposal number is one
    /// proposer's (the numbering splits them), and a proposer writes one value per
    /// proposal, so every such acceptor names the same ⟨b', p⟩ and p's buffer at any of
    /// them serves the adoption alike (the stamps are checked the same way, lemma
    /// (adoption from a newer stamp)); mine is read with CPU loads instead of three round
    /// trips (end stamp, content, begin stamp). A new leader usually accepted the old
    /// leader's last values itself, and its adoptions of them are what stands between the
    /// takeover and its first decision.
    ///
    /// Rule (chosen at prepare): when a majority's confirmed promises show that very pair
    /// ⟨b', p⟩, a majority accepted p's value at b', so it is chosen (Paxos); once read, it
    /// is decided at once — a new leader's first decision costs its prepare round only, not
    /// prepare and accept. The accepts of the adopted value at my proposal go out all the
    /// same: learners learn from them (lemma (learning) reads my buffer at my ballot, which
    /// holds the chosen value whether those accepts succeed or not).
    fn prepared(&mut self, previous: &[u8], out: &mut Vec<SlotCommand>) {
        let Phase::Preparing { promised } = &self.phase else {
            unreachable!("prepared from preparing")
        };
        let me = usize::from(self.config.me.0);
        let local = self.local;
        let adopt = promised
            .iter()
            .enumerate()
            .filter_map(|(a, s)| s.map(|s| (a, s)))
            .filter(|(_, s)| s.has_accepted())
            .max_by_key(|&(a, s)| (s.accepted_proposal, local && a == me));
        assert!(
            adopt.is_none_or(|(_, chosen)| promised.iter().flatten().all(|s| {
                !s.has_accepted()
                    || s.accepted_proposal < chosen.accepted_proposal
                    || (s.accepted_proposal == chosen.accepted_proposal
                        && s.accepted_value == chosen.accepted_value)
            })),
            "rule (local adoption): the highest accepted proposal, one proposer's value"
        );
        #[cfg(feature = "mutations")]
        let adopt = adopt.filter(|_| self.config.mutation != Mutation::SkipAdoption);
        match adopt {
            Some((a, state)) => {
                let proposer = ProposerId::from_value_tag(state.accepted_value)
                    .expect("an accepted value names a proposer");
                let pair = (state.accepted_proposal, state.accepted_value);
                let showing = promised
                    .iter()
                    .flatten()
                    .filter(|s| s.has_accepted() && (s.accepted_proposal, s.accepted_value) == pair)
                    .count();
                #[cfg(feature = "mutations")]
                let needed = if self.config.mutation == Mutation::ChosenByOne {
                    1
                } else {
                    self.config.majority()
                };
                #[cfg(not(feature = "mutations"))]
                let needed = self.config.majority();
                let chosen = (showing >= needed).then_some(state.accepted_proposal);
                self.set_phase(Phase::Reading { chosen });
                out.push(SlotCommand::ReadValue {
                    acceptor: a as u16,
                    proposer,
                    proposal: state.accepted_proposal,
                });
            }
            None if self.hold => self.set_phase(Phase::Promised),
            None => self.accept(Content::Mine, previous, out),
        }
    }

    /// Reports the value read for adoption: `stamped_ok` says whether the buffer bore a
    /// stamp at least the accepted proposal b' it was read for (else the read failed:
    /// abort and retry).
    ///
    /// Lemma (adoption from a newer stamp): a proposer writes its buffer stamped b'' only
    /// with a value safe at b'' (nothing else chosen, or ever choosable, below b''); so
    /// when the promises' highest accepted pair is ⟨b', p⟩ and p's buffer there already
    /// holds p's value of a later b'' > b', that value is safe at my proposal n as well:
    /// below b'' by its own safety, and in [b'', n) nothing is chosen because my majority
    /// accepted nothing above b'. Requiring the exact stamp instead livelocks: p's write
    /// lands ahead of an accept CAS that fails, and the word still names ⟨b', p⟩.
    pub fn on_value_read(&mut self, stamped_ok: bool, previous: &[u8], out: &mut Vec<SlotCommand>) {
        let Phase::Reading { chosen } = self.phase else {
            panic!("a value read while reading, not {:?}", self.phase)
        };
        if stamped_ok {
            self.accept(Content::Adopted, previous, out);
            if let (Some(proposal), Phase::Accepting { .. }) = (chosen, &self.phase) {
                // Rule (chosen at prepare): a majority accepted the pair read, so its value
                // is chosen at its proposal b' (what the outcome names); the accepts just
                // posted carry it on at mine (what learners and lemma (learning) read), and
                // need not be waited for.
                self.set_phase(Phase::Done(Outcome::Decided {
                    proposal,
                    content: Content::Adopted,
                }));
            }
        } else {
            self.set_phase(Phase::Done(Outcome::Aborted));
        }
    }

    /// ACCEPT: write the value into my buffer at every acceptor that may accept, then CAS
    /// the word to ⟨prop, prop, me⟩ there. `previous[a]` is the previous-decision count to
    /// write at acceptor a.
    fn accept(&mut self, content: Content, previous: &[u8], out: &mut Vec<SlotCommand>) {
        let proposal = self.proposal;
        #[cfg_attr(not(feature = "mutations"), allow(unused_mut))]
        let mut accepted_now = 0u64;
        let mut posted = 0u64;
        for a in 0..self.predicted.len() {
            if !self.config.votes(a as u16) {
                continue; // not a member in this slot
            }
            let Some(state) = self.predicted(a as u16) else {
                continue; // a later lap's word: never CASed (lemma (overtaken))
            };
            // compare(ACCEPT(n), state) = n >= min_proposal; elsewhere the CAS would break a
            // promise to a higher proposal, so it is not posted at all.
            if proposal < state.min_proposal {
                continue;
            }
            out.push(SlotCommand::WriteValue {
                acceptor: a as u16,
                content,
                proposal,
            });
            let desired = AcceptorState {
                min_proposal: proposal,
                accepted_proposal: proposal,
                accepted_value: self.config.me.value_tag(),
                previous_decision: previous
                    .get(a)
                    .map_or(0, |&p| p.min(self.config.layout.max_previous() as u8)),
                ..state
            };
            #[cfg(feature = "mutations")]
            if self.config.mutation == Mutation::ReuseProposal
                && self.predicted[a] == self.config.layout.encode(desired).expect("fits")
            {
                // "A prediction is not a confirmation", broken on purpose.
                accepted_now |= 1 << a;
                continue;
            }
            self.cas(a, desired, true, out);
            posted |= 1 << a;
            #[cfg(feature = "mutations")]
            if self.config.mutation == Mutation::TrustPrediction {
                accepted_now |= 1 << a; // "a prediction is not a confirmation", broken on purpose
            }
        }
        let counted = accepted_now.count_ones() as usize;
        self.set_phase(Phase::Accepting {
            content,
            accepted: accepted_now,
        });
        // Accepts are posted once an attempt: its accept CASes in flight are those just
        // posted.
        let hopes = (accepted_now | posted).count_ones() as usize;
        debug_assert_eq!(hopes, self.hopes(true), "rule (hopeless attempt)");
        if counted >= self.config.majority() {
            self.set_phase(Phase::Done(Outcome::Decided { proposal, content }));
        } else if hopes < self.config.majority() {
            // Rule (hopeless attempt), at its start: acceptors promised higher or absent
            // (rule (no amnesia)) left too few to post to; no completion would ever come.
            self.set_phase(Phase::Done(Outcome::Aborted));
        }
    }

    /// The acceptors that confirmed this attempt's phase (`accept`: the accept phase, else
    /// the prepare phase) or have a CAS of it in flight.
    fn hopes(&self, accept: bool) -> usize {
        let attempt = self.attempt;
        let hoping = |a: usize| {
            self.in_flight[a]
                .iter()
                .any(|p| p.attempt == attempt && p.accept == accept)
        };
        match &self.phase {
            Phase::Preparing { promised } if !accept => (0..promised.len())
                .filter(|&a| promised[a].is_some() || hoping(a))
                .count(),
            Phase::Accepting { accepted, .. } if accept => (0..self.predicted.len())
                .filter(|&a| accepted >> a & 1 == 1 || hoping(a))
                .count(),
            _ => usize::MAX, // the phase moved on: nothing to hope for in this one
        }
    }
}

impl SlotProposer {
    /// Whether acceptor `a` is sent CASes and counted in this slot.
    pub fn counts(&self, a: u16) -> bool {
        self.config.votes(a)
    }

    /// Acceptor `a`'s memory now belongs to a process started blank in its place (rule (no
    /// amnesia)): from now on it is sent no CAS and counts in no majority of this slot. Its
    /// CASes in flight are reported lost by the caller ([`SlotProposer::on_cas_lost`]);
    /// what it confirmed before counts still (its earlier incarnation did answer so).
    pub fn acceptor_replaced(&mut self, a: u16) {
        assert!(a < 64, "an acceptor of a slot");
        self.config.absent |= 1 << a;
        assert!(
            !self.config.votes(a),
            "rule (no amnesia): it votes no more here"
        );
    }
}

impl SlotProposer {
    /// Reports that CAS `id` on `acceptor` will never answer (the operation failed: the
    /// acceptor crashed or its queue pair broke). It counts neither way; the prediction of
    /// that acceptor becomes unknown, so it is reset to what the slot last confirmed there.
    ///
    /// Rule (hopeless attempt): if the acceptors that confirmed this attempt's phase, and
    /// those with a CAS of it still in flight, are fewer than a majority, the attempt
    /// aborts (and is prepared again by its owner): nothing else would ever move it.
    pub fn on_cas_lost(&mut self, acceptor: u16, id: u64) {
        let a = usize::from(acceptor);
        let posted = self.in_flight[a]
            .pop_front()
            .expect("a loss for a posted CAS");
        assert_eq!(
            posted.id, id,
            "losses of one acceptor arrive in posting order"
        );
        if self.in_flight[a].is_empty() {
            self.predicted[a] = posted.expected;
        }
        if posted.attempt != self.attempt {
            return;
        }
        // (usize::MAX: the phase moved on, the lost CAS counted for nothing now.)
        let hopes = self.hopes(posted.accept);
        if hopes < self.config.majority() {
            self.set_phase(Phase::Done(Outcome::Aborted));
        }
        assert!(
            hopes >= self.config.majority() || self.outcome() == Outcome::Aborted,
            "rule (hopeless attempt)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: WordLayout = WordLayout::PAPER;

    fn config(me: u16) -> SlotConfig {
        SlotConfig {
            layout: LAYOUT,
            acceptors: 3,
            members: SlotConfig::all(3),
            absent: 0,
            numbering: Numbering { proposers: 2 },
            me: ProposerId(me),
            tag: 0,
            recycled: false,
            mutation: Mutation::None,
        }
    }

    fn word(min: u64, accepted: u64, value: u16) -> u64 {
        LAYOUT
            .encode(AcceptorState {
                min_proposal: min,
                accepted_proposal: accepted,
                accepted_value: value,
                ..AcceptorState::default()
            })
            .unwrap()
    }

    fn cas(id: u64, acceptor: u16, expected: u64, desired: u64) -> SlotCommand {
        SlotCommand::Cas {
            id,
            acceptor,
            expected,
            desired,
        }
    }

    fn write(acceptor: u16, content: Content, proposal: u64) -> SlotCommand {
        SlotCommand::WriteValue {
            acceptor,
            content,
            proposal,
        }
    }

    /// A slot of proposer 0 that has posted its prepare CASes.
    fn preparing() -> (SlotProposer, Vec<SlotCommand>) {
        let mut slot = SlotProposer::fresh(config(0));
        let mut out = Vec::new();
        slot.prepare(&mut out);
        (slot, out)
    }

    /// A slot of proposer 0, reading locally, whose first prepare found acceptors 0 (mine)
    /// and 1 holding ⟨2, p1⟩ and acceptor 2 blank (nacks), and whose second prepare
    /// (proposal 5, ids 4 to 6) is out.
    fn preparing_over_two_accepts() -> SlotProposer {
        let mut slot = SlotProposer::fresh(config(0)).reading_locally();
        let mut out = Vec::new();
        slot.prepare(&mut out);
        slot.on_cas(0, 1, word(4, 2, 2), &[], &mut out);
        slot.on_cas(1, 2, word(4, 2, 2), &[], &mut out);
        slot.on_cas(2, 3, word(0, 0, 0), &[], &mut out);
        slot.prepare(&mut out);
        slot
    }

    #[test]
    fn prepare_posts_one_cas_per_acceptor_with_the_first_proposal_number() {
        let (slot, out) = preparing();
        assert_eq!(
            out,
            vec![
                cas(1, 0, word(0, 0, 0), word(1, 0, 0)),
                cas(2, 1, word(0, 0, 0), word(1, 0, 0)),
                cas(3, 2, word(0, 0, 0), word(1, 0, 0))
            ]
        );
        assert_eq!(slot.proposal(), 1);
        assert_eq!(slot.outcome(), Outcome::Pending);
    }

    #[test]
    fn a_majority_of_promises_with_nothing_accepted_accepts_my_value_everywhere() {
        let (mut slot, _) = preparing();
        let mut out = Vec::new();
        slot.on_cas(0, 1, word(0, 0, 0), &[], &mut out);
        assert!(out.is_empty(), "one promise is not a majority");
        slot.on_cas(1, 2, word(0, 0, 0), &[], &mut out);
        // Acceptor 2's prepare is still in flight: its accept is chained on the optimistic
        // prediction, on the same queue pair.
        assert_eq!(
            out,
            vec![
                write(0, Content::Mine, 1),
                cas(4, 0, word(1, 0, 0), word(1, 1, 1)),
                write(1, Content::Mine, 1),
                cas(5, 1, word(1, 0, 0), word(1, 1, 1)),
                write(2, Content::Mine, 1),
                cas(6, 2, word(1, 0, 0), word(1, 1, 1)),
            ]
        );
    }

    #[test]
    fn a_majority_of_successful_accepts_decides() {
        let (mut slot, _) = preparing();
        let mut out = Vec::new();
        slot.on_cas(0, 1, word(0, 0, 0), &[], &mut out);
        slot.on_cas(1, 2, word(0, 0, 0), &[], &mut out);
        slot.on_cas(0, 4, word(1, 0, 0), &[], &mut out);
        assert_eq!(slot.outcome(), Outcome::Pending);
        slot.on_cas(1, 5, word(1, 0, 0), &[], &mut out);
        assert_eq!(
            slot.outcome(),
            Outcome::Decided {
                proposal: 1,
                content: Content::Mine
            }
        );
    }

    #[test]
    fn a_nack_aborts_and_the_retry_bumps_above_the_actual_min_proposal() {
        let (mut slot, _) = preparing();
        let mut out = Vec::new();
        // Acceptor 0 had promised proposal 4 (proposer 1's second number).
        slot.on_cas(0, 1, word(4, 0, 0), &[], &mut out);
        assert_eq!(slot.outcome(), Outcome::Aborted);
        assert_eq!(
            slot.predicted(0).unwrap().min_proposal,
            4,
            "a failed CAS teaches the actual word"
        );
        out.clear();
        slot.prepare(&mut out);
        assert_eq!(
            slot.proposal(),
            5,
            "the smallest of proposer 0's numbers above 4"
        );
        assert_eq!(out[0], cas(4, 0, word(4, 0, 0), word(5, 0, 0)));
        // Acceptors 1 and 2 still have attempt 1's prepare in flight: chained on it.
        assert_eq!(out[1], cas(5, 1, word(1, 0, 0), word(5, 0, 0)));
    }

    #[test]
    fn prepare_adopts_the_confirmed_value_with_the_highest_accepted_proposal() {
        let (mut slot, _) = preparing();
        let mut out = Vec::new();
        slot.on_cas(0, 1, word(4, 2, 2), &[], &mut out); // nack: proposer 1 accepted at 2
        out.clear();
        slot.prepare(&mut out); // proposal 5
        slot.on_cas(1, 2, word(0, 0, 0), &[], &mut out); // attempt 1's prepare: ignored
        slot.on_cas(2, 3, word(0, 0, 0), &[], &mut out);
        out.clear();
        slot.on_cas(0, 4, word(4, 2, 2), &[], &mut out); // promise, confirms ⟨4,2,p1⟩
        assert!(out.is_empty());
        slot.on_cas(1, 5, word(1, 0, 0), &[], &mut out);
        assert_eq!(
            out,
            vec![SlotCommand::ReadValue {
                acceptor: 0,
                proposer: ProposerId(1),
                proposal: 2
            }]
        );
        out.clear();
        slot.on_value_read(true, &[], &mut out);
        assert_eq!(out[0], write(0, Content::Adopted, 5));
        assert_eq!(out[1], cas(7, 0, word(5, 2, 2), word(5, 5, 1)));
        assert_eq!(
            slot.outcome(),
            Outcome::Pending,
            "one promise showed ⟨2, p1⟩: not chosen, the accepts must confirm"
        );
    }

    /// Rule (chosen at prepare): when a majority's confirmed promises show the pair read,
    /// its value is decided at the read; the accepts carrying it at my proposal are
    /// posted all the same, and their completions count for nothing.
    #[test]
    fn a_pair_a_majority_shows_is_decided_at_its_read() {
        let mut slot = preparing_over_two_accepts();
        let mut out = Vec::new();
        slot.on_cas(0, 4, word(4, 2, 2), &[], &mut out);
        slot.on_cas(1, 5, word(4, 2, 2), &[], &mut out);
        assert_eq!(
            slot.outcome(),
            Outcome::Pending,
            "the value is not read yet"
        );
        out.clear();
        slot.on_value_read(true, &[], &mut out);
        // Decided at the proposal the majority accepted (2), not at mine (5): a later
        // majority carries a pair at least ⟨2, p1⟩, not necessarily one at 5.
        let decided = Outcome::Decided {
            proposal: 2,
            content: Content::Adopted,
        };
        assert_eq!(slot.outcome(), decided);
        let accepts = out.iter().filter(|c| matches!(c, SlotCommand::Cas { .. }));
        assert_eq!(accepts.count(), 3, "the accepts still go out: {out:?}");
        out.clear();
        slot.on_cas(2, 6, word(5, 0, 0), &[], &mut out);
        slot.on_cas(0, 7, word(5, 2, 2), &[], &mut out);
        assert_eq!(slot.outcome(), decided, "completions change nothing");
        // A stale buffer is no value: the read fails and the attempt aborts as before.
        let mut torn = preparing_over_two_accepts();
        torn.on_cas(0, 4, word(4, 2, 2), &[], &mut out);
        torn.on_cas(1, 5, word(4, 2, 2), &[], &mut out);
        torn.on_value_read(false, &[], &mut out);
        assert_eq!(torn.outcome(), Outcome::Aborted);
    }

    #[test]
    fn adoption_reads_my_own_acceptor_among_those_with_the_highest_accepted_proposal() {
        let mut slot = preparing_over_two_accepts();
        let mut out = Vec::new();
        slot.on_cas(0, 4, word(4, 2, 2), &[], &mut out);
        assert!(out.is_empty());
        slot.on_cas(1, 5, word(4, 2, 2), &[], &mut out);
        assert_eq!(
            out,
            vec![SlotCommand::ReadValue {
                acceptor: 0,
                proposer: ProposerId(1),
                proposal: 2
            }],
            "rule (local adoption): my own acceptor's copy, not acceptor 1's"
        );
    }

    #[test]
    fn an_overwritten_value_buffer_aborts_the_adoption() {
        let (mut slot, _) = preparing();
        let mut out = Vec::new();
        slot.on_cas(0, 1, word(0, 2, 2), &[], &mut out);
        slot.prepare(&mut out);
        slot.on_cas(1, 2, word(0, 0, 0), &[], &mut out);
        slot.on_cas(2, 3, word(0, 0, 0), &[], &mut out);
        slot.on_cas(0, 4, word(0, 2, 2), &[], &mut out);
        slot.on_cas(1, 5, word(1, 0, 0), &[], &mut out);
        out.clear();
        slot.on_value_read(false, &[], &mut out);
        assert!(out.is_empty());
        assert_eq!(slot.outcome(), Outcome::Aborted);
    }

    #[test]
    fn a_prediction_is_not_a_confirmation() {
        // The brief's scenario: accept CASes in flight, an abort, a retry; predictions
        // already equal the desired words, but only CAS successes may count.
        let (mut slot, _) = preparing();
        let mut out = Vec::new();
        slot.on_cas(0, 1, word(0, 0, 0), &[], &mut out);
        slot.on_cas(1, 2, word(0, 0, 0), &[], &mut out); // accepts 4, 5, 6 posted
        slot.on_cas(2, 3, word(3, 0, 0), &[], &mut out); // a late nack of attempt 1's prepare
        slot.on_cas(0, 4, word(3, 0, 0), &[], &mut out); // accept nack at 0: abort
        assert_eq!(slot.outcome(), Outcome::Aborted);
        out.clear();
        slot.prepare(&mut out);
        // Attempt 1's accept on acceptor 1 now succeeds: it must not count for attempt 2.
        slot.on_cas(1, 5, word(1, 0, 0), &[], &mut out);
        assert_eq!(slot.outcome(), Outcome::Pending);
    }

    #[test]
    fn no_cas_past_the_overflow_threshold() {
        let mut slot = SlotProposer::new(config(0), vec![word(LAYOUT.max_proposal() - 1, 0, 0); 3]);
        let mut out = Vec::new();
        slot.prepare(&mut out);
        assert!(out.is_empty());
        assert_eq!(slot.outcome(), Outcome::Overflow);
    }
}
