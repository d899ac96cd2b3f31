//! The rendezvous's sealed information: once both sides proved the secret, each side's
//! connection information (memory keys, queue-pair numbers, addresses) travels encrypted
//! and authenticated, so a passive eavesdropper on the set-up network learns none of it.
//!
//! The key is HKDF-SHA-256 of the cluster's secret, salted with both nonces and bound to
//! the cluster and the two nodes: fresh for every exchange. Each role seals one message
//! per exchange under it (ChaCha20-Poly1305, the role in the nonce and as associated
//! data), so no key and nonce ever seal two messages. A message that does not open — a
//! wrong secret, a replayed exchange (its nonces are not this one's), a changed byte — is
//! refused like a proof that does not verify.

use super::proof::{Role, Transcript};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;

impl Transcript<'_> {
    /// This exchange's sealing key under `secret`.
    fn cipher(&self, secret: &[u8]) -> ChaCha20Poly1305 {
        let salt = [self.dialer_nonce, self.listener_nonce].concat();
        let mut bound = b"velos-rendezvous seal".to_vec();
        for field in [
            self.cluster_id.as_bytes(),
            &self.dialer.to_be_bytes(),
            &self.listener.to_be_bytes(),
        ] {
            bound.extend_from_slice(&(field.len() as u64).to_be_bytes());
            bound.extend_from_slice(field);
        }
        let mut key = Key::default();
        Hkdf::<Sha256>::new(Some(&salt), secret)
            .expand(&bound, &mut key)
            .expect("32 bytes are a valid HKDF-SHA-256 output length");
        ChaCha20Poly1305::new(&key)
    }

    /// `plain` sealed by `role` (the only message that role seals in this exchange).
    pub(crate) fn seal(&self, secret: &[u8], role: Role, plain: &[u8]) -> Vec<u8> {
        let payload = Payload {
            msg: plain,
            aad: role.label(),
        };
        let sealed = self
            .cipher(secret)
            .encrypt(&nonce(role), payload)
            .expect("ChaCha20-Poly1305 seals any message of a frame's size");
        assert_eq!(sealed.len(), plain.len() + 16, "the message and its tag");
        sealed
    }

    /// What `role` sealed into `sealed`, or `None` if it does not open under this
    /// exchange's key (another secret, another exchange, a changed byte).
    pub(crate) fn open(&self, secret: &[u8], role: Role, sealed: &[u8]) -> Option<Vec<u8>> {
        let payload = Payload {
            msg: sealed,
            aad: role.label(),
        };
        self.cipher(secret).decrypt(&nonce(role), payload).ok()
    }

    /// `info` as `role` sends it: sealed, and the proof of `role` carrying it (the proof
    /// covers the information itself, not its sealed bytes).
    pub(crate) fn seal_and_prove(
        &self,
        secret: &[u8],
        role: Role,
        info: &[u8],
    ) -> (Vec<u8>, Vec<u8>) {
        (
            self.seal(secret, role, info),
            self.prove(secret, role, info),
        )
    }

    /// What `role` sent as `sealed` with `proof`: the information if it opens under this
    /// exchange's key and the proof verifies, else `None`.
    pub(crate) fn open_and_verify(
        &self,
        secret: &[u8],
        role: Role,
        sealed: &[u8],
        proof: &[u8],
    ) -> Option<Vec<u8>> {
        self.open(secret, role, sealed)
            .filter(|info| self.verify(secret, role, info, proof))
    }
}

/// The nonce of `role`'s message: its own, since each role seals one message per key.
fn nonce(role: Role) -> Nonce {
    let mut bytes = [0u8; 12];
    bytes[0] = match role {
        Role::ListenerKnows => 1,
        Role::DialerSends => 2,
        Role::ListenerSends => 3,
    };
    Nonce::from(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::proof::nonce as fresh;

    #[test]
    fn information_opens_only_in_its_own_exchange_role_and_secret() {
        let (a, b) = (fresh().unwrap(), fresh().unwrap());
        let t = Transcript {
            cluster_id: "c",
            dialer: 1,
            listener: 0,
            dialer_nonce: &a,
            listener_nonce: &b,
        };
        let secret = b"0123456789abcdef";
        let plain = b"queue pair 4711, rkey 0xbeef";
        let sealed = t.seal(secret, Role::DialerSends, plain);
        assert!(
            !sealed.windows(4).any(|w| w == b"4711"),
            "nothing of it in the clear"
        );
        assert_eq!(
            t.open(secret, Role::DialerSends, &sealed).as_deref(),
            Some(&plain[..])
        );
        assert_eq!(
            t.open(b"another secret!!", Role::DialerSends, &sealed),
            None
        );
        assert_eq!(t.open(secret, Role::ListenerSends, &sealed), None, "role");
        let replayed = Transcript {
            listener_nonce: &a,
            ..t
        };
        assert_eq!(
            replayed.open(secret, Role::DialerSends, &sealed),
            None,
            "nonce"
        );
        let mut changed = sealed.clone();
        changed[0] ^= 1;
        assert_eq!(
            t.open(secret, Role::DialerSends, &changed),
            None,
            "a changed byte"
        );
    }
}
