//! The words of one physical counter of the distributed counter DC.
//!
//! ARRIVE (64 bits) packs three fields so that one remote FAA both counts a reader and
//! tells it the lock's mode:
//!
//! | bits    | field | meaning |
//! |---------|-------|---------|
//! | 40..64  | count | readers that arrived at this counter, ever (mod 2^24) |
//! | 16..40  | base  | the count at the last budget reset (T_R counts from here) |
//! | 0..16   | phase | bumped when a writer takes the counter (WRITE mode, odd) and when it gives it back (READ mode, even) |
//!
//! The paper's "one bit of ARRIVE for the mode" is the phase's low bit; the rest of the
//! phase lets a reader that waits notice that a mode change happened even if the mode
//! changed back before it looked. A reader adds [`COUNT_ONE`]; the count is the top field,
//! so its wrap-around falls off the word and never disturbs the fields below. Only the
//! writer that holds the root changes base and phase while the mode is WRITE, and readers
//! change base only with a CAS that fails once the mode is WRITE.
//!
//! DEPART counts readers that left, ever; a writer that took the counter when `count` was
//! `s` waits until DEPART ≡ s (mod 2^24).

/// What a reader adds to ARRIVE on arrival.
pub(super) const COUNT_ONE: u64 = 1 << 40;
/// What a writer adds to ARRIVE to take it (READ → WRITE: the phase goes from even to odd).
pub(super) const TAKE: u64 = 1;

const FIELD: u64 = (1 << 24) - 1;
const PHASE: u64 = 0xFFFF;
const BASE_SHIFT: u32 = 16;
const COUNT_SHIFT: u32 = 40;

/// The largest T_R: budgets are differences of 24-bit counts.
pub(super) const T_R_MAX: u64 = 1 << 22;

/// Arrivals so far (mod 2^24).
pub(super) fn count(arrive: u64) -> u64 {
    arrive >> COUNT_SHIFT
}

/// The count at the last budget reset.
fn base(arrive: u64) -> u64 {
    (arrive >> BASE_SHIFT) & FIELD
}

/// The phase.
pub(super) fn phase(arrive: u64) -> u64 {
    arrive & PHASE
}

/// Whether the counter is in WRITE mode (a writer took it).
pub(super) fn writing(arrive: u64) -> bool {
    phase(arrive) & 1 == 1
}

/// A reader's place in the budget: how many readers arrived since the last reset before it
/// (`arrive` is the value its FAA returned).
pub(super) fn budget_index(arrive: u64) -> u64 {
    count(arrive).wrapping_sub(base(arrive)) & FIELD
}

/// ARRIVE with the budget reset: base := count.
pub(super) fn reset(arrive: u64) -> u64 {
    (arrive & !(FIELD << BASE_SHIFT)) | (count(arrive) << BASE_SHIFT)
}

/// What the writer that gives the counter back adds to ARRIVE, given its value `arrive`
/// (WRITE mode): the phase moves to the next even value (wrapping explicitly, so that no
/// carry leaves the field) and the budget restarts at the current count. Readers may add
/// [`COUNT_ONE`] between the read and the add; the count field is not in the difference.
pub(super) fn give_back(arrive: u64) -> u64 {
    assert!(
        writing(arrive),
        "rma-rw: a counter is given back in WRITE mode"
    );
    let next_phase = (phase(arrive) + 1) & PHASE;
    let target = (arrive & !PHASE) | next_phase;
    reset(target).wrapping_sub(arrive)
}

/// Whether every reader counted in `count_taken` has left, given DEPART.
pub(super) fn drained(depart: u64, count_taken: u64) -> bool {
    depart & FIELD == count_taken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_do_not_disturb_each_other() {
        // Count at its wrap: another arrival falls off the top.
        let full = FIELD << COUNT_SHIFT;
        assert_eq!(full.wrapping_add(COUNT_ONE), 0);
        // Taking and giving back at the phase's wrap leaves count and base alone.
        let a = (5 << COUNT_SHIFT) | (2 << BASE_SHIFT) | 0xFFFE;
        let taken = a + TAKE;
        assert!(writing(taken));
        let arrived = taken + 3 * COUNT_ONE;
        let back = arrived.wrapping_add(give_back(taken));
        assert_eq!(phase(back), 0);
        assert!(!writing(back));
        assert_eq!(count(back), 8);
        assert_eq!(
            budget_index(back),
            3,
            "arrivals during WRITE use the new budget"
        );
        assert_eq!(budget_index(reset(arrived)), 0);
        assert!(drained(5 + (7 << 24), 5));
    }
}
