//! Deliberately wrong variants of the rules, for tests that show each rule is pinned: a
//! litmus verdict must change when a rule is made weaker or stronger. Never set outside
//! tests and the `velos litmus --mutation` diagnostic.

use serde::Serialize;

/// A rule made weaker (allows more) or stronger (allows less) than the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Mutation {
    /// Rule 1 weaker: an F never blocks the items behind it.
    Rule1Weaker,
    /// Rule 1 stronger: an F leaves the pipe only once `rW` has drained too.
    Rule1Stronger,
    /// Rule 2 weaker: a put's local read ignores pending NIC local writes in `lW`.
    Rule2Weaker,
    /// Rule 2 stronger: a put's local read happens only at the head of the pipe.
    Rule2Stronger,
    /// Rule 3 weaker: a put's remote write may overtake any older item.
    Rule3Weaker,
    /// Rule 3 stronger: a put's remote write is issued only at the head of the pipe.
    Rule3Stronger,
    /// Rule 4 weaker: any entry of `rW` may commit, not only the head.
    Rule4Weaker,
    /// Rule 4 stronger: a put's remote write commits only once the pipe is empty.
    Rule4Stronger,
    /// Rule 5 weaker: an ACK completes from any position of the pipe.
    Rule5Weaker,
    /// Rule 5 stronger: an ACK completes only once its remote write is in memory (`rW` empty).
    Rule5Stronger,
    /// Rule 6 weaker: a get's remote read ignores pending remote writes in `rW`.
    Rule6Weaker,
    /// Rule 6 stronger: a get's remote read happens only at the head of the pipe.
    Rule6Stronger,
    /// Rule 7 weaker: an LW is issued from any position of the pipe.
    Rule7Weaker,
    /// Rule 7 stronger: an LW is issued only once `rW` has drained.
    Rule7Stronger,
    /// Rule 8 weaker: any NIC local write of `lW` may commit, not only the first.
    Rule8Weaker,
    /// Rule 8 stronger: a NIC local write commits only when the pipe is empty.
    Rule8Stronger,
    /// Rules 9–11 weaker: a remote atomic read ignores the atomic lock `L[n]`.
    Rule9Weaker,
    /// Rules 9–11 stronger: a remote atomic read happens only at the head of the pipe.
    Rule9Stronger,
    /// Rule 10 weaker: a succeeding CAS does not take `L[n]`.
    Rule10Weaker,
    /// Rule 11 weaker: an FAA does not take `L[n]`.
    Rule11Weaker,
    /// Rule 12 weaker: the issued atomic write does not keep its place in `rW`'s order: a
    /// later remote write of the queue pair (a put issued after the AW left the pipe) may
    /// commit before it.
    ///
    /// Redefined: it used to be "an atomic write is issued ignoring older items", which is
    /// the model itself. Every item older than an AW is always in `{ACK, G0, LW}` (the A0 it
    /// came from needed that, nothing is ever inserted before it, and such items only turn
    /// into each other or leave the pipe), so rule 12's premise never blocks and that
    /// variant had exactly the model's state graph (checked: same state counts and outcomes
    /// on every file of the litmus suite). The premise being vacuous, the weakening is in
    /// the effect: where the atomic write goes in `rW`.
    Rule12Weaker,
    /// Rule 12 stronger: an atomic write is issued only at the head of the pipe.
    Rule12Stronger,
    /// Rule 13 weaker: `L[n]` is released when the atomic write is issued (rule 12), before
    /// it commits.
    Rule13Weaker,
    /// Rules 9–11 and 6 stronger together: remote reads also wait for every queue pair's
    /// `rW` towards the node (a stronger-than-model responder). Despite its name this is not
    /// a variant of rule 13 (see [`Mutation::Rule13StrongerLock`]).
    Rule13Stronger,
    /// Rule 13 stronger: committing the atomic write does not free `L[n]` while a NIC local
    /// write of some queue pair towards n is still pending (in the pipe or in `lW`), in
    /// particular the RMW's own old value; the lock is freed once the write is in memory and
    /// those local writes have landed. The mirror image of [`Mutation::Rule13Weaker`].
    Rule13StrongerLock,
    /// TSO weaker: `mfence` does not wait for the store buffer to drain (a no-op).
    MfenceNoop,
    /// TSO weaker: a CPU CAS does not wait for the store buffer to drain; it reads and
    /// writes memory with the thread's own older stores still buffered.
    CasNoDrain,
    /// Store buffer weaker: a posted remote operation may leave the store buffer ahead of
    /// the thread's older stores still in it (its queue pair takes it while they wait).
    PostOvertakesStore,
    /// Rule 1 weaker for gets only: a get behind an F may act as if the F were not there
    /// (everything else behind it still waits).
    FenceLetsGetsPass,
    /// Rule 2 weaker: a put's local read may overtake an older put's (the NIC reads the
    /// later put's local word first).
    PutReadOvertakesPutRead,
    /// Rules 9–11 weaker: a remote atomic's read ignores its own queue pair's pending
    /// remote writes in `rW` (it still respects `L[n]`).
    AtomicIgnoresOwnRw,
}

impl Mutation {
    /// Every mutation.
    pub const ALL: [Mutation; 31] = [
        Mutation::Rule1Weaker,
        Mutation::Rule1Stronger,
        Mutation::Rule2Weaker,
        Mutation::Rule2Stronger,
        Mutation::Rule3Weaker,
        Mutation::Rule3Stronger,
        Mutation::Rule4Weaker,
        Mutation::Rule4Stronger,
        Mutation::Rule5Weaker,
        Mutation::Rule5Stronger,
        Mutation::Rule6Weaker,
        Mutation::Rule6Stronger,
        Mutation::Rule7Weaker,
        Mutation::Rule7Stronger,
        Mutation::Rule8Weaker,
        Mutation::Rule8Stronger,
        Mutation::Rule9Weaker,
        Mutation::Rule9Stronger,
        Mutation::Rule10Weaker,
        Mutation::Rule11Weaker,
        Mutation::Rule12Weaker,
        Mutation::Rule12Stronger,
        Mutation::Rule13Weaker,
        Mutation::Rule13Stronger,
        Mutation::Rule13StrongerLock,
        Mutation::MfenceNoop,
        Mutation::CasNoDrain,
        Mutation::PostOvertakesStore,
        Mutation::FenceLetsGetsPass,
        Mutation::PutReadOvertakesPutRead,
        Mutation::AtomicIgnoresOwnRw,
    ];
}
