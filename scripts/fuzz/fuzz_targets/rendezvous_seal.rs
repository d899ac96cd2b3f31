//! The rendezvous's sealed information (`rendezvous::seal`) on any bytes: a message that
//! was not sealed under the exchange's key never opens and never panics, and what is
//! sealed opens to itself only under its own exchange, role and secret.
#![no_main]

// The root package's own source, compiled in: it needs hmac, sha2, getrandom, hkdf and
// chacha20poly1305.
#[path = "../../../src/rendezvous/proof.rs"]
#[allow(dead_code)]
mod proof;
#[path = "../../../src/rendezvous/seal.rs"]
#[allow(dead_code)]
mod seal;

use libfuzzer_sys::fuzz_target;
use proof::{Role, Transcript};

fuzz_target!(|data: &[u8]| {
    // The input: a secret of 16 bytes, two nonces of 32, then a message.
    if data.len() < 80 {
        return;
    }
    let (secret, rest) = data.split_at(16);
    let (dialer_nonce, rest) = rest.split_at(32);
    let (listener_nonce, message) = rest.split_at(32);
    let t = Transcript {
        cluster_id: "fuzz",
        dialer: 1,
        listener: 0,
        dialer_nonce,
        listener_nonce,
    };
    // Not sealed by anyone: opening it is an answer, not a panic (a forgery opens only by
    // breaking Poly1305).
    assert!(t.open(secret, Role::DialerSends, message).is_none(), "a forgery opened");
    let sealed = t.seal(secret, Role::DialerSends, message);
    assert_eq!(t.open(secret, Role::DialerSends, &sealed).as_deref(), Some(message));
    assert!(t.open(secret, Role::ListenerSends, &sealed).is_none());
});
