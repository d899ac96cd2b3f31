//! A connection the target refused (its permission switch revoked this node's writes)
//! taking requests again once the target grants this node write access again, as the
//! model's grant reconnects the refused queue pairs (see `crate::verbs::access`).

use super::{VerbsEndpoint, node_of};

impl VerbsEndpoint<'_> {
    /// Called before a request is posted towards node index `t` on a refused connection:
    /// if the target grants this node again, the requests on the connection complete
    /// first (flushed, in error, reported in their turn) and the connection is cycled, so
    /// that the new request reaches the NIC. Otherwise nothing changes (refused as
    /// broken).
    pub(super) fn regrant(&mut self, t: usize) {
        assert!(self.connections[t].refused(), "only a refused connection");
        let target = node_of(t);
        // The requests kept or waiting for the old queue pair are refused in their turn.
        self.ring(t);
        self.settle(|completions| completions.in_flight(target) == 0, |_| ());
        match self
            .host
            .regrant(self.node, target, &mut self.connections[t])
        {
            Ok(true) => {
                self.drained[t] = false;
                assert!(self.waiting[t].is_empty(), "rule (grant reconnects): idle");
            }
            Ok(false) => {}
            // The connection stays broken: its requests keep failing, typed.
            Err(error) => eprintln!(
                "velos-rdma verbs: reconnecting {} towards {target} after a grant: {error}",
                self.node
            ),
        }
    }
}
