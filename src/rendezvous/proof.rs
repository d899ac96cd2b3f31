//! The rendezvous's proofs: HMAC-SHA-256 under the cluster's secret over every field of
//! the exchange so far — who speaks, to whom, in which role, both nonces, and the
//! connection information it carries — each field length-prefixed, so no two different
//! exchanges give the same bytes. A fresh nonce from each side makes every proof good for
//! one exchange only: a recorded one replayed is refused.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a nonce.
pub(crate) const NONCE_BYTES: usize = 32;

/// What a proof vouches for; each role's proofs differ.
#[derive(Clone, Copy)]
pub(crate) enum Role {
    /// The listener's answer to a hello: it knows the secret.
    ListenerKnows,
    /// The dialer's proof, with its information.
    DialerSends,
    /// The listener's information, after the dialer's proof.
    ListenerSends,
}

impl Role {
    pub(crate) fn label(self) -> &'static [u8] {
        match self {
            Role::ListenerKnows => b"velos-rendezvous listener knows",
            Role::DialerSends => b"velos-rendezvous dialer sends",
            Role::ListenerSends => b"velos-rendezvous listener sends",
        }
    }
}

/// One exchange between a dialer and a listener: what every proof of it covers.
#[derive(Clone, Copy)]
pub(crate) struct Transcript<'a> {
    pub(crate) cluster_id: &'a str,
    pub(crate) dialer: u16,
    pub(crate) listener: u16,
    pub(crate) dialer_nonce: &'a [u8],
    pub(crate) listener_nonce: &'a [u8],
}

impl Transcript<'_> {
    fn mac(&self, secret: &[u8], role: Role, info: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        let fields: [&[u8]; 7] = [
            role.label(),
            self.cluster_id.as_bytes(),
            &self.dialer.to_be_bytes(),
            &self.listener.to_be_bytes(),
            self.dialer_nonce,
            self.listener_nonce,
            info,
        ];
        for field in fields {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac
    }

    /// The proof of `role` carrying `info`.
    pub(crate) fn prove(&self, secret: &[u8], role: Role, info: &[u8]) -> Vec<u8> {
        self.mac(secret, role, info)
            .finalize()
            .into_bytes()
            .to_vec()
    }

    /// Whether `proof` is the proof of `role` carrying `info` (compared in constant time).
    pub(crate) fn verify(&self, secret: &[u8], role: Role, info: &[u8], proof: &[u8]) -> bool {
        self.mac(secret, role, info).verify_slice(proof).is_ok()
    }
}

/// A fresh nonce from the operating system's random source.
pub(crate) fn nonce() -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; NONCE_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_own_exchange_role_and_information_only() {
        let (a, b) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, b, "fresh");
        let t = Transcript {
            cluster_id: "c",
            dialer: 1,
            listener: 0,
            dialer_nonce: &a,
            listener_nonce: &b,
        };
        let secret = b"0123456789abcdef";
        let proof = t.prove(secret, Role::DialerSends, b"info");
        assert!(t.verify(secret, Role::DialerSends, b"info", &proof));
        assert!(!t.verify(b"another secret!!", Role::DialerSends, b"info", &proof));
        assert!(
            !t.verify(secret, Role::ListenerSends, b"info", &proof),
            "role"
        );
        assert!(
            !t.verify(secret, Role::DialerSends, b"infO", &proof),
            "information"
        );
        let replayed = Transcript {
            listener_nonce: &a,
            ..t
        };
        assert!(
            !replayed.verify(secret, Role::DialerSends, b"info", &proof),
            "nonce"
        );
    }
}
