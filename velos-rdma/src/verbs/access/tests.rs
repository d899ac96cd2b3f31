//! The two routes of Mu's permission switch on the device, each first shown to refuse a
//! peer's write and to let it through again, then timed: the queue pair's access flags
//! (what `Op::SetWriteAccess` does) and the memory region's re-registration
//! (`ibv_rereg_mr` with `IBV_REREG_MR_CHANGE_ACCESS`, or where the device refuses that, a
//! new registration with the access wanted and the old one's deregistration). The timings are printed (run with
//! `--nocapture`), not asserted: `cargo test -p velos-rdma --features verbs --release --lib
//! permission_routes -- --nocapture` on a machine with an RDMA device.
//!
//! Without a device the test prints a skip message and passes, unless
//! `VELOS_REQUIRE_RDMA=1`.

use crate::verbs::{VerbsFabric, VerbsOptions};
use crate::{Endpoint, Layout, Loc, NodeId, Op, RdmaError, Reply, WorkId};
use sideway::ibverbs::memory_region::MemoryRegion;
use std::ffi::{c_int, c_void};
use std::time::Instant;

/// Switches timed per route (each a revoke or a grant).
const SWITCHES: usize = 200;
/// Words of the node whose permission changes: 64 KiB, a Mu log of about 2,700 entries of
/// two value words.
const WORDS: u32 = 8192;

/// `ibv_rereg_mr(mr, flags, pd, addr, length, access)` (verbs.h).
type ReregMr =
    unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void, usize, c_int) -> c_int;
/// verbs.h: `IBV_ACCESS_LOCAL_WRITE`, `_REMOTE_WRITE`, `_REMOTE_READ`, `_REMOTE_ATOMIC`.
const LOCAL_WRITE: c_int = 1;
const REMOTE_WRITE: c_int = 2;
const REMOTE_READ: c_int = 4;
const REMOTE_ATOMIC: c_int = 8;
/// verbs.h: `IBV_REREG_MR_CHANGE_ACCESS`.
const CHANGE_ACCESS: c_int = 4;
/// verbs.h: `IBV_REREG_MR_ERR_CMD`, the device refused the command.
const CMD_REFUSED: c_int = -4;

/// `ibv_rereg_mr` of the libibverbs the process uses.
fn load_rereg() -> libloading::Library {
    // SAFETY: loading libibverbs runs its initialisers, which sideway ran already by
    // loading the same library (the device is open).
    unsafe { libloading::Library::new("libibverbs.so.1") }.expect("libibverbs.so.1")
}

/// `mr`'s remote access with or without remote writes, by re-registration.
fn rereg(library: &libloading::Library, mr: &MemoryRegion, write: bool) -> Result<(), c_int> {
    let access = LOCAL_WRITE | REMOTE_READ | REMOTE_ATOMIC | if write { REMOTE_WRITE } else { 0 };
    // SAFETY: the symbol is libibverbs's `ibv_rereg_mr`, whose C signature `ReregMr`
    // spells; `mr` is a live registration borrowed from the fabric, which outlives the
    // call; with `IBV_REREG_MR_CHANGE_ACCESS` alone the pages and the protection domain are
    // kept, so the null pointers and the zero length are not read.
    let rc = unsafe {
        let call: libloading::Symbol<'_, ReregMr> = library
            .get(b"ibv_rereg_mr\0")
            .expect("ibv_rereg_mr in libibverbs");
        call(
            mr.mr().as_ptr().cast(),
            CHANGE_ACCESS,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            access,
        )
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}

fn put(endpoint: &mut impl Endpoint, remote: Loc, value: u64) -> Reply {
    let work_id = WorkId(1);
    let posted = endpoint.execute(&Op::PutInline {
        remote,
        value,
        work_id,
    });
    assert_eq!(posted, Reply::Done);
    endpoint.execute(&Op::Wait { work_id })
}

fn refused(reply: &Reply) -> bool {
    matches!(reply, Reply::Failed(RdmaError::WorkFailed { cause, .. })
        if matches!(**cause, RdmaError::RemoteAccess { .. }))
}

/// Median and 99th percentile (µs) of `ns`.
fn summary(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1_000.0;
    (at(0.5), at(0.99))
}

#[test]
fn permission_routes_refuse_writes_and_are_timed() {
    let layout = Layout::uniform(2, WORDS);
    let fabric = match VerbsFabric::with_options(layout, VerbsOptions::from_env()) {
        Ok(fabric) => fabric,
        Err(error)
            if error.is_no_device()
                && std::env::var("VELOS_REQUIRE_RDMA").map_or(true, |v| v != "1") =>
        {
            println!("skipped: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            return;
        }
        Err(error) => panic!("no usable RDMA device: {error}"),
    };
    let (mut owner, mut peer) = (
        fabric.endpoint(NodeId(0)).unwrap(),
        fabric.endpoint(NodeId(1)).unwrap(),
    );
    let word = Loc::word(NodeId(0), WORDS - 1);
    let only_owner = Op::SetWriteAccess { writers: 0b01 };
    let both = Op::SetWriteAccess { writers: 0b11 };

    // The queue pair's flags: refused, then through again.
    assert_eq!(owner.execute(&only_owner), Reply::Done);
    assert!(refused(&put(&mut peer, word, 1)), "the revoke took effect");
    assert_eq!(owner.execute(&both), Reply::Done);
    assert_eq!(
        put(&mut peer, word, 2),
        Reply::Done,
        "the grant took effect"
    );
    let mut by_flags = Vec::with_capacity(SWITCHES);
    for k in 0..SWITCHES {
        let op = if k % 2 == 0 { &only_owner } else { &both };
        let start = Instant::now();
        assert_eq!(owner.execute(op), Reply::Done);
        by_flags.push(start.elapsed().as_nanos() as u64);
    }
    assert_eq!(owner.execute(&both), Reply::Done);

    // The region's registration: refused, then through again, its key unchanged.
    let (memory, device) = fabric.parts();
    let mr = memory.registration(NodeId(0));
    let rkey = mr.rkey();
    let library = load_rereg();
    let mut by_region = Vec::with_capacity(SWITCHES);
    let how = match rereg(&library, mr, false) {
        Ok(()) => {
            assert!(
                refused(&put(&mut peer, word, 3)),
                "the re-registration took effect"
            );
            rereg(&library, mr, true).expect("ibv_rereg_mr with remote write");
            assert_eq!(mr.rkey(), rkey, "a peer's key stays valid");
            // Node 0 grants node 1 (its queue pair's flags): the refused connection is
            // cycled.
            assert_eq!(put(&mut peer, word, 4), Reply::Done, "writable again");
            assert_eq!(fabric.read(word), Ok(4));
            for k in 0..SWITCHES {
                let start = Instant::now();
                rereg(&library, mr, k % 2 == 1).expect("ibv_rereg_mr");
                by_region.push(start.elapsed().as_nanos() as u64);
            }
            rereg(&library, mr, true).expect("ibv_rereg_mr with remote write");
            "re-registration in place"
        }
        // The device does not change a region's access in place: a region switch then
        // registers the words anew with the access wanted (and hands peers the new key,
        // not counted here) and deregisters the old registration. A region registered
        // without remote write refuses writes: `tests/verbs_privilege.rs`.
        Err(CMD_REFUSED) => {
            for k in 0..SWITCHES {
                let access = super::super::connection::responder_access(k % 2 == 1);
                let start = Instant::now();
                // SAFETY: the words are the fabric's node 0 region, alive and never moved
                // while the fabric is; this second registration is dropped (deregistered)
                // at once, before the fabric.
                let fresh = unsafe { device.pd.reg_mr(mr.get_ptr(), mr.region_len(), access) }
                    .expect("ibv_reg_mr");
                drop(fresh);
                by_region.push(start.elapsed().as_nanos() as u64);
            }
            "ibv_rereg_mr refused by the device (IBV_REREG_MR_ERR_CMD): ibv_reg_mr + ibv_dereg_mr"
        }
        Err(rc) => panic!("ibv_rereg_mr without remote write: {rc}"),
    };

    let ((flags_p50, flags_p99), (region_p50, region_p99)) =
        (summary(by_flags), summary(by_region));
    println!(
        "permission switch on {}, {SWITCHES} switches each: queue-pair access flags p50 \
         {flags_p50:.1} µs p99 {flags_p99:.1} µs; memory region ({how}, {} KiB) p50 \
         {region_p50:.1} µs p99 {region_p99:.1} µs; region / flags at p50 {:.2}x",
        fabric.device_name(),
        WORDS / 128,
        region_p50 / flags_p50.max(0.001)
    );
}
