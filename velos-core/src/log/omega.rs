//! Ω, the leader oracle: every replica bumps a heartbeat counter in its own memory; the
//! others read it over RDMA and suspect a replica whose counter has not changed for the
//! failure timeout. The leader is the lowest id not suspected (Mu's rule, with a timeout in
//! nanoseconds of the node's clock instead of a score; both are configuration).

/// What one replica knows of the others' heartbeats.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Omega {
    me: u16,
    timeout_ns: u64,
    /// Per replica: the last counter value read.
    last: Vec<u64>,
    /// Per replica: when the counter was last seen to change (ns of the local clock).
    changed_at: Vec<u64>,
}

impl Omega {
    /// Replica `me` of `replicas`, suspecting after `timeout_ns` without a change; every
    /// replica counts as seen alive at time `now`.
    pub fn new(me: u16, replicas: u16, timeout_ns: u64, now: u64) -> Omega {
        assert!(me < replicas, "replica {me} of {replicas}");
        assert!(timeout_ns > 0, "a failure timeout");
        Omega {
            me,
            timeout_ns,
            last: vec![0; usize::from(replicas)],
            changed_at: vec![now; usize::from(replicas)],
        }
    }

    /// Replica `peer`'s counter read `counter` at `now`.
    pub fn observe(&mut self, peer: u16, counter: u64, now: u64) {
        let p = usize::from(peer);
        if counter != self.last[p] {
            self.last[p] = counter;
            self.changed_at[p] = self.changed_at[p].max(now);
        }
    }

    /// Whether `peer` is suspected at `now` (never myself).
    pub fn suspects(&self, peer: u16, now: u64) -> bool {
        peer != self.me && now.saturating_sub(self.changed_at[usize::from(peer)]) > self.timeout_ns
    }

    /// The leader at `now`: the lowest id not suspected.
    pub fn leader(&self, now: u64) -> u16 {
        let leader = (0..self.last.len() as u16)
            .find(|&p| !self.suspects(p, now))
            .expect("I never suspect myself");
        assert!(leader <= self.me, "Ω: the leader is me or below me");
        leader
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_live_id_leads_and_a_silent_one_is_suspected_after_the_timeout() {
        let mut omega = Omega::new(2, 3, 100, 0);
        assert_eq!(omega.leader(50), 0);
        omega.observe(0, 1, 60);
        omega.observe(1, 1, 60);
        assert_eq!(omega.leader(150), 0, "0 changed at 60: alive until 160");
        omega.observe(1, 2, 150);
        assert!(omega.suspects(0, 161));
        assert_eq!(omega.leader(161), 1);
        omega.observe(0, 2, 170);
        assert_eq!(
            omega.leader(171),
            0,
            "a counter that moves again restores trust"
        );
        assert!(!omega.suspects(2, 10_000), "never myself");
    }
}
