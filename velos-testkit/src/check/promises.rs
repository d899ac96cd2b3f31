//! Promises — lemma (promises): an acceptor never forgets a promise or an accept. Within
//! one lap of a ring position (one log instance, [`velos_core::log::ring`]), an acceptor
//! word's `min_proposal` and `accepted_proposal` never decrease; a word only moves to
//! another lap through a CAS of that lap's instance. A CPU store that resets a word, or a
//! write that is not a CAS on the predicted word, breaks it. The campaign samples every
//! acceptor word as the run goes and feeds the samples here.

use velos_core::word::WordLayout;

/// The last sample of every watched word.
#[derive(Clone, Debug)]
pub struct Promises {
    layout: WordLayout,
    last: Vec<Option<u64>>,
    /// The lines found so far, for a caller that collects them here.
    pub violations: Vec<String>,
}

impl Promises {
    /// Watches `words` acceptor words of `layout`.
    pub fn new(layout: WordLayout, words: usize) -> Promises {
        Promises {
            layout,
            last: vec![None; words],
            violations: Vec::new(),
        }
    }

    /// Words `range` belong to a new process from now on (a replica replaced on blank
    /// memory): they are watched afresh.
    pub fn forget(&mut self, range: std::ops::Range<usize>) {
        self.last[range].fill(None);
    }

    /// Word `i` (named `name` in a failure) reads `word` now: a line if it went back
    /// within its lap since the last sample.
    pub fn observe(&mut self, i: usize, word: u64, name: impl Fn() -> String) -> Option<String> {
        let before = self.last[i].replace(word)?;
        let (was, now) = (self.layout.decode(before), self.layout.decode(word));
        let back = was.tag == now.tag
            && (now.min_proposal < was.min_proposal
                || now.accepted_proposal < was.accepted_proposal);
        assert_eq!(self.last[i], Some(word), "the sample is kept");
        back.then(|| {
            format!(
                "{}: went back from {was:?} to {now:?} (a promise or an accept forgotten)",
                name()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use velos_core::AcceptorState;

    const L: WordLayout = WordLayout::VELOS;

    fn word(tag: u16, min: u64, accepted: u64) -> u64 {
        L.encode(AcceptorState {
            tag,
            min_proposal: min,
            accepted_proposal: accepted,
            accepted_value: u16::from(accepted > 0),
            previous_decision: 0,
        })
        .expect("fits")
    }

    fn run(samples: &[u64]) -> Vec<String> {
        let mut p = Promises::new(L, 1);
        samples
            .iter()
            .filter_map(|&w| p.observe(0, w, || "word 0".into()))
            .collect()
    }

    #[test]
    fn promises_and_accepts_that_grow_or_move_to_another_lap_are_legal() {
        assert!(run(&[word(0, 0, 0), word(0, 3, 0), word(0, 3, 3), word(0, 7, 3)]).is_empty());
        // The next lap's instance starts afresh.
        assert!(run(&[word(0, 7, 7), word(1, 2, 0), word(1, 2, 2)]).is_empty());
    }

    #[test]
    fn a_forgotten_promise_or_accept_is_a_violation() {
        let forgot_promise = run(&[word(1, 5, 0), word(1, 0, 0)]);
        assert_eq!(forgot_promise.len(), 1, "{forgot_promise:?}");
        assert!(forgot_promise[0].starts_with("word 0: went back"));
        let forgot_accept = run(&[word(1, 5, 5), word(1, 5, 0)]);
        assert_eq!(forgot_accept.len(), 1, "{forgot_accept:?}");
    }
}
