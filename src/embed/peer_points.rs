//! A [`Node`](super::Node)'s view of its peers' disks: each replica stores how far its
//! disk holds the log in a word of its registered memory that every peer may read
//! (velos-core's `ClusterShape::durable_point`), and a node reads its peers' words
//! one-sidedly while one of its durable waits is under way — never per heartbeat, so a
//! log nobody waits on pays nothing. (A [`Cluster`](super::Cluster) sees every replica's
//! disk thread in its own process and needs none of this.)
//!
//! The word holds the durable point in its low 62 bits, and whether the disk stopped in
//! the top two (bit 63: stopped; bit 62: because it is full).

use super::persist::DiskWatch;
use super::shown::Shown;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use velos_core::cluster::ClusterShape;
use velos_core::log::durable_read_id;
use velos_rdma::{Endpoint, Op, Reply};
use velos_store::writer::Stopped;

const STOPPED_BIT: u64 = 1 << 63;
const FULL_BIT: u64 = 1 << 62;
const POINT_MASK: u64 = FULL_BIT - 1;

/// A replica's durable word: its disk's durable point and whether it stopped.
pub(crate) fn encode(point: u64, stopped: Option<&Stopped>) -> u64 {
    assert!(point <= POINT_MASK, "a durable point below 2^62: {point}");
    match stopped {
        None => point,
        Some(Stopped::Full) => point | STOPPED_BIT | FULL_BIT,
        Some(Stopped::Io(_)) => point | STOPPED_BIT,
    }
}

/// What a peer's durable word says: its point, and why its disk stopped.
pub(crate) fn decode(word: u64, peer: u16) -> (u64, Option<Stopped>) {
    let stopped = (word & STOPPED_BIT != 0).then(|| {
        if word & FULL_BIT != 0 {
            Stopped::Full
        } else {
            Stopped::Io(format!(
                "replica {peer}'s disk failed (its durable word says)"
            ))
        }
    });
    (word & POINT_MASK, stopped)
}

/// One node's side: its own word kept up to date, its peers' words read on request.
pub(crate) struct PeerPoints {
    me: u16,
    shape: ClusterShape,
    /// Every replica's view; the peers' `durable` and `disk_stopped` are written here.
    shown: Arc<[Arc<Shown>]>,
    /// This node's durable waits: reads go out while one is under way, and it is told
    /// when a peer's point moved.
    watch: Arc<DiskWatch>,
    /// The word last stored in this node's durable point (`None`: not yet).
    stored: Option<u64>,
    /// Peers whose read is posted and not yet complete (bit p).
    reading: u64,
}

impl PeerPoints {
    pub(crate) fn new(
        me: u16,
        shape: ClusterShape,
        shown: Arc<[Arc<Shown>]>,
        watch: Arc<DiskWatch>,
    ) -> PeerPoints {
        assert_eq!(shown.len(), usize::from(shape.nodes), "a view per replica");
        PeerPoints {
            me,
            shape,
            shown,
            watch,
            stored: None,
            reading: 0,
        }
    }

    /// Whether reads are out or wanted: the replica's idle pauses stay short meanwhile.
    pub(crate) fn busy(&self) -> bool {
        self.reading != 0 || self.watch.wanted()
    }

    /// A turn's part, between two of the engine's operations: this node's word stored if
    /// its disk moved; the reads that completed taken in; new ones posted to every peer
    /// while a durable wait is under way and none is out.
    pub(crate) fn turn<E: Endpoint>(&mut self, endpoint: &mut E) {
        let me = &self.shown[usize::from(self.me)];
        let word = {
            let stopped = me.disk_stopped.lock().unwrap_or_else(|e| e.into_inner());
            encode(me.durable.load(Ordering::SeqCst), stopped.as_ref())
        };
        if self.stored != Some(word) {
            let loc = self.shape.durable_point(self.me);
            let reply = endpoint.execute(&Op::Store { loc, value: word });
            assert_eq!(reply, Reply::Done, "a store to the node's own word");
            self.stored = Some(word);
        }
        if self.reading != 0 {
            self.take_in(endpoint);
        }
        if self.reading == 0 && self.watch.wanted() {
            self.post(endpoint);
        }
    }

    fn peers(&self) -> impl Iterator<Item = u16> + use<> {
        let me = self.me;
        (0..self.shape.nodes).filter(move |&p| p != me)
    }

    fn post<E: Endpoint>(&mut self, endpoint: &mut E) {
        assert_eq!(self.reading, 0, "one read per peer at a time");
        for p in self.peers() {
            let get = Op::Get {
                local: self.shape.durable_landing(self.me, p),
                remote: self.shape.durable_point(p),
                work_id: durable_read_id(p),
            };
            // A peer that cannot be reached fails the read: its point stays as last read.
            if endpoint.execute(&get) == Reply::Done {
                self.reading |= 1 << p;
            }
        }
    }

    fn take_in<E: Endpoint>(&mut self, endpoint: &mut E) {
        let mut moved = false;
        let out = self.reading;
        for p in self.peers().filter(|&p| out & (1 << p) != 0) {
            let test = Op::Test {
                work_id: durable_read_id(p),
            };
            match endpoint.execute(&test) {
                Reply::Value(0) => continue,
                Reply::Value(_) => {
                    let loc = self.shape.durable_landing(self.me, p);
                    let Reply::Value(word) = endpoint.execute(&Op::Load { loc }) else {
                        panic!("a load of the node's own landing word");
                    };
                    moved |= self.show(p, word);
                }
                // Unreachable (crashed, or replaced): its point stays as last read.
                _ => {}
            }
            self.reading &= !(1 << p);
        }
        if moved {
            self.watch.bump();
        }
    }

    /// Shows peer `p`'s word; whether anything changed.
    fn show(&self, p: u16, word: u64) -> bool {
        let (point, stopped) = decode(word, p);
        let peer = &self.shown[usize::from(p)];
        let before = peer.durable.swap(point, Ordering::SeqCst);
        let mut shown = peer.disk_stopped.lock().unwrap_or_else(|e| e.into_inner());
        let changed = before != point || shown.is_some() != stopped.is_some();
        *shown = stopped;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_gives_back_its_point_and_why_the_disk_stopped() {
        for point in [0, 1, 77, POINT_MASK] {
            assert_eq!(decode(encode(point, None), 2), (point, None));
            let full = decode(encode(point, Some(&Stopped::Full)), 2);
            assert_eq!(full, (point, Some(Stopped::Full)));
            let io = decode(encode(point, Some(&Stopped::Io("x".into()))), 2);
            assert!(matches!(io, (p, Some(Stopped::Io(_))) if p == point));
        }
    }
}
