//! The bank: a table of accounts (little-endian `u64` balances in one byte array, 4 MiB by
//! default, so that every snapshot is that large) and the commands that move money
//! between them. Each command names its client and that client's sequence number; the
//! state counts, per client, the last one applied, so a command applied twice (or one
//! skipped) shows in the state itself, whatever the log's sessions do.

use velos::embed::{Position, RestoreError, StateMachine};

/// Clients the bank counts commands of.
pub const CLIENTS: usize = 4;

/// Every account's balance at the start.
pub const OPENING_BALANCE: u64 = 1_000;

/// A transfer: `amount` from account `from` to account `to`, the `seq`-th command of
/// client `client` (from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The client (below [`CLIENTS`]).
    pub client: u8,
    /// The client's sequence number of the command, from 1.
    pub seq: u64,
    /// The account debited.
    pub from: u32,
    /// The account credited.
    pub to: u32,
    /// How much.
    pub amount: u64,
}

/// A transfer's encoded size: client, sequence, from, to, amount.
const COMMAND_BYTES: usize = 1 + 8 + 4 + 4 + 8;

impl Transfer {
    /// The command's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(COMMAND_BYTES);
        out.push(self.client);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.from.to_le_bytes());
        out.extend_from_slice(&self.to.to_le_bytes());
        out.extend_from_slice(&self.amount.to_le_bytes());
        debug_assert_eq!(out.len(), COMMAND_BYTES);
        out
    }

    /// The transfer `bytes` encode, if they are one.
    pub fn decode(bytes: &[u8]) -> Option<Transfer> {
        if bytes.len() != COMMAND_BYTES {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8"));
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4"));
        Some(Transfer {
            client: bytes[0],
            seq: u64_at(1),
            from: u32_at(9),
            to: u32_at(13),
            amount: u64_at(17),
        })
    }
}

/// What a transfer answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done: the two balances after it, and how many commands of the client the bank has
    /// applied, this one included.
    Moved {
        /// The debited account's balance after.
        from: u64,
        /// The credited account's balance after.
        to: u64,
        /// The client's commands applied so far.
        applied: u64,
    },
    /// Refused for lack of funds: the debited account's balance, the client's count.
    Refused {
        /// The debited account's balance.
        from: u64,
        /// The client's commands applied so far.
        applied: u64,
    },
    /// Not a transfer this bank can apply (bad bytes, client or account).
    Invalid,
}

/// The replicated bank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bank {
    /// Balances, 8 bytes each, little-endian.
    balances: Vec<u8>,
    /// Per client: the highest sequence number applied.
    last_seq: [u64; CLIENTS],
    /// Per client: commands applied.
    applied: [u64; CLIENTS],
    /// Commands whose sequence number was not above their client's last: applied again.
    pub duplicates: u64,
    /// Commands whose sequence number skipped one: a command lost before them.
    pub skipped: u64,
}

/// The snapshot's header: `last_seq`, `applied`, `duplicates`, `skipped`, as `u64`s.
const HEADER_WORDS: usize = 2 * CLIENTS + 2;

impl Bank {
    /// A bank of `bytes / 8` accounts, each holding [`OPENING_BALANCE`].
    pub fn new(bytes: usize) -> Bank {
        assert!(bytes >= 8 * CLIENTS * 2 && bytes % 8 == 0, "whole accounts");
        let balances = OPENING_BALANCE.to_le_bytes().repeat(bytes / 8);
        Bank {
            balances,
            last_seq: [0; CLIENTS],
            applied: [0; CLIENTS],
            duplicates: 0,
            skipped: 0,
        }
    }

    /// Accounts in the bank.
    pub fn accounts(&self) -> u32 {
        u32::try_from(self.balances.len() / 8).expect("fewer than 2^32 accounts")
    }

    /// Account `a`'s balance.
    pub fn balance(&self, a: u32) -> u64 {
        let i = a as usize * 8;
        u64::from_le_bytes(self.balances[i..i + 8].try_into().expect("8 bytes"))
    }

    fn set(&mut self, a: u32, value: u64) {
        let i = a as usize * 8;
        self.balances[i..i + 8].copy_from_slice(&value.to_le_bytes());
    }

    /// The sum of every balance (conserved by every transfer).
    pub fn total(&self) -> u128 {
        (0..self.accounts())
            .map(|a| u128::from(self.balance(a)))
            .sum()
    }

    /// Commands of `client` applied.
    pub fn applied(&self, client: usize) -> u64 {
        self.applied[client]
    }

    /// Applies `t`: the reply a sequential bank gives.
    pub fn transfer(&mut self, t: &Transfer) -> Reply {
        let c = usize::from(t.client);
        let n = self.accounts();
        if c >= CLIENTS || t.from >= n || t.to >= n || t.from == t.to {
            return Reply::Invalid;
        }
        if t.seq <= self.last_seq[c] {
            self.duplicates += 1;
        } else if t.seq > self.last_seq[c] + 1 {
            self.skipped += 1;
        }
        self.last_seq[c] = self.last_seq[c].max(t.seq);
        self.applied[c] += 1;
        let applied = self.applied[c];
        let (from, to) = (self.balance(t.from), self.balance(t.to));
        if from < t.amount {
            return Reply::Refused { from, applied };
        }
        let (from, to) = (from - t.amount, to + t.amount);
        self.set(t.from, from);
        self.set(t.to, to);
        Reply::Moved { from, to, applied }
    }
}

impl StateMachine for Bank {
    type Response = Reply;

    fn apply(&mut self, _: Position, command: &[u8]) -> Reply {
        match Transfer::decode(command) {
            Some(t) => self.transfer(&t),
            None => Reply::Invalid,
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_WORDS * 8 + self.balances.len());
        let header = self.last_seq.iter().chain(&self.applied);
        for w in header.chain([&self.duplicates, &self.skipped]) {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.balances);
        out
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let want = HEADER_WORDS * 8 + self.balances.len();
        if bytes.len() != want {
            return Err(RestoreError(format!("{} bytes, not {want}", bytes.len())));
        }
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8"));
        self.last_seq = std::array::from_fn(word);
        self.applied = std::array::from_fn(|c| word(CLIENTS + c));
        self.duplicates = word(2 * CLIENTS);
        self.skipped = word(2 * CLIENTS + 1);
        self.balances.copy_from_slice(&bytes[HEADER_WORDS * 8..]);
        Ok(())
    }
}
