//! Ports for a cluster on one machine (tests, demos, a first try of `velos node`): free
//! ports of 127.0.0.1 that stay free until the nodes bind them.
//!
//! Picking a port by binding port 0 and releasing it races: the kernel hands the same
//! number to the next outgoing connection of any process (its *ephemeral* range, 32768 to
//! 60999 on Linux by default) or to the next bind to port 0, and the node that binds it a
//! moment later fails with "address in use". [`free_ports`] draws below that range, never
//! hands a port twice within a process, and starts each process at its own offset, so
//! only a process binding the very same number on purpose can take one.

use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};

/// The first port handed out.
const FIRST: u32 = 10_000;
/// One past the last: the start of Linux's default ephemeral range.
const END: u32 = 32_768;
/// How many ports of the process's sequence were drawn so far.
static DRAWN: AtomicU32 = AtomicU32::new(0);

/// `n` distinct ports of 127.0.0.1 that were free when drawn and that no outgoing
/// connection will take (see the module doc); an error when fewer are free.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let span = END - FIRST;
    // Each process its own stretch of the range (its id spread by an odd stride).
    let offset = std::process::id().wrapping_mul(7_919) % span;
    let ports = bindable(n, span, || {
        let drawn = DRAWN.fetch_add(1, Ordering::Relaxed);
        u16::try_from(FIRST + (offset + drawn) % span).expect("below 32768")
    })?;
    debug_assert!(ports.iter().all(|&p| (FIRST..END).contains(&u32::from(p))));
    Ok(ports)
}

/// The first `n` ports of `candidates` that bind on 127.0.0.1, trying at most `tries`.
fn bindable(
    n: usize,
    tries: u32,
    mut candidates: impl FnMut() -> u16,
) -> std::io::Result<Vec<u16>> {
    let mut ports = Vec::with_capacity(n);
    for _ in 0..tries {
        if ports.len() == n {
            break;
        }
        let port = candidates();
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            ports.push(port);
        }
    }
    if ports.len() < n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("only {} of {n} ports tried were free", ports.len()),
        ));
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_below_the_ephemeral_range_and_bindable() {
        let a = free_ports(40).unwrap();
        let b = free_ports(40).unwrap();
        let all: std::collections::BTreeSet<u16> = a.iter().chain(&b).copied().collect();
        assert_eq!(all.len(), 80, "no port handed out twice");
        assert!(all.iter().all(|&p| (FIRST..END).contains(&u32::from(p))));
        // Each one binds (the premise of the whole module).
        let held: Vec<TcpListener> = a
            .iter()
            .map(|&p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).unwrap())
            .collect();
        assert_eq!(held.len(), 40);
    }

    #[test]
    fn a_port_in_use_is_skipped_and_too_few_free_ones_are_an_error() {
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let busy = held.local_addr().unwrap().port();
        let free = free_ports(1).unwrap()[0];
        let mut candidates = [busy, free].into_iter().cycle();
        assert_eq!(
            bindable(1, 2, || candidates.next().unwrap()).unwrap(),
            [free]
        );
        let e = bindable(1, 3, || busy).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrNotAvailable);
        assert!(e.to_string().contains("only 0 of 1"), "{e}");
    }
}
