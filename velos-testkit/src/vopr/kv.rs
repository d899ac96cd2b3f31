//! The campaign's key-value service: commands as log entries, and the state machine each
//! replica applies them to, with client sessions so that a command proposed again after
//! an unknown outcome takes effect once.

use std::collections::BTreeMap;

/// A value written: the put that wrote it (client, sequence number).
pub type Written = (u8, u32);

/// A client's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvOp {
    /// Write the key: the value is the put's own name.
    Put {
        /// The key.
        key: u8,
    },
    /// Read the key.
    Get {
        /// The key.
        key: u8,
    },
}

impl KvOp {
    /// The key.
    pub fn key(&self) -> u8 {
        match *self {
            KvOp::Put { key } | KvOp::Get { key } => key,
        }
    }
}

/// One proposal of a client's operation: `seq` numbers the client's operations from 1,
/// `attempt` its proposals (each one a distinct log value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvCommand {
    /// The client.
    pub client: u8,
    /// The operation's number.
    pub seq: u32,
    /// The proposal's number for this operation.
    pub attempt: u16,
    /// What it does.
    pub op: KvOp,
}

/// Bytes of an encoded command.
pub const COMMAND_BYTES: usize = 10;

impl KvCommand {
    /// The log value: client, sequence (LE), attempt (LE), kind, key.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(COMMAND_BYTES);
        out.push(self.client);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.attempt.to_le_bytes());
        let (kind, key) = match self.op {
            KvOp::Put { key } => (0, key),
            KvOp::Get { key } => (1, key),
        };
        out.extend_from_slice(&[kind, key, 0xc5]);
        assert_eq!(out.len(), COMMAND_BYTES);
        out
    }

    /// The command a log value holds; `None` for anything else (a no-op, a marker).
    pub fn decode(bytes: &[u8]) -> Option<KvCommand> {
        let b: &[u8; COMMAND_BYTES] = bytes.try_into().ok()?;
        if b[9] != 0xc5 {
            return None;
        }
        let op = match b[7] {
            0 => KvOp::Put { key: b[8] },
            1 => KvOp::Get { key: b[8] },
            _ => return None,
        };
        Some(KvCommand {
            client: b[0],
            seq: u32::from_le_bytes(b[1..5].try_into().expect("4 bytes")),
            attempt: u16::from_le_bytes(b[5..7].try_into().expect("2 bytes")),
            op,
        })
    }
}

/// A replica's key-value state: the keys' values, and per client the last operation
/// applied and what a get among them returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvMachine {
    values: BTreeMap<u8, Written>,
    sessions: BTreeMap<u8, (u32, Option<Written>)>,
}

impl KvMachine {
    /// Applies one log entry — a command, or a batch of them (`Replica::submit`), each
    /// in order; entries that are not commands, and commands of operations applied
    /// before (a proposal again of an unknown outcome), change nothing.
    pub fn apply(&mut self, entry: &[u8]) {
        if entry.len() != COMMAND_BYTES
            && let Ok(batch) = velos_core::batch::decode(entry)
        {
            for command in batch.commands {
                self.apply_command(command);
            }
            return;
        }
        self.apply_command(entry);
    }

    fn apply_command(&mut self, entry: &[u8]) {
        let Some(c) = KvCommand::decode(entry) else {
            return;
        };
        let last = self.sessions.get(&c.client).map_or(0, |s| s.0);
        if c.seq <= last {
            return; // applied already: at most once per operation
        }
        let result = match c.op {
            KvOp::Put { key } => {
                self.values.insert(key, (c.client, c.seq));
                None
            }
            KvOp::Get { key } => self.values.get(&key).copied(),
        };
        self.sessions.insert(c.client, (c.seq, result));
        assert!(self.sessions[&c.client].0 == c.seq, "the session moved on");
    }

    /// The value of `key` now.
    pub fn value(&self, key: u8) -> Option<Written> {
        self.values.get(&key).copied()
    }

    /// The last operation of `client` applied, and a get's result.
    pub fn session(&self, client: u8) -> Option<(u32, Option<Written>)> {
        self.sessions.get(&client).copied()
    }

    /// The state as bytes (values, then sessions), for the log's snapshots.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![self.values.len() as u8, self.sessions.len() as u8];
        for (&key, &(client, seq)) in &self.values {
            out.push(key);
            out.push(client);
            out.extend_from_slice(&seq.to_le_bytes());
        }
        for (&client, &(seq, result)) in &self.sessions {
            out.push(client);
            out.extend_from_slice(&seq.to_le_bytes());
            let (flag, c, s) = result.map_or((0, 0, 0), |(c, s)| (1, c, s));
            out.extend_from_slice(&[flag, c]);
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// The state a snapshot describes; `None` if it does not decode.
    pub fn restore(bytes: &[u8]) -> Option<KvMachine> {
        let (&nv, rest) = bytes.split_first()?;
        let (&ns, mut rest) = rest.split_first()?;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let mut m = KvMachine::default();
        for _ in 0..nv {
            let b = take(6)?;
            m.values.insert(b[0], (b[1], u32_of(&b[2..6])));
        }
        for _ in 0..ns {
            let b = take(11)?;
            let result = (b[5] == 1).then(|| (b[6], u32_of(&b[7..11])));
            m.sessions.insert(b[0], (u32_of(&b[1..5]), result));
        }
        take(0)?;
        Some(m)
    }
}

/// The name of the value put `(client, seq)` wrote, as histories show it.
pub fn value_name((client, seq): Written) -> String {
    format!("c{client}-{seq}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_and_other_entries_are_not_commands() {
        let c = KvCommand {
            client: 3,
            seq: 70_000,
            attempt: 2,
            op: KvOp::Get { key: 5 },
        };
        assert_eq!(KvCommand::decode(&c.encode()), Some(c));
        assert_eq!(KvCommand::decode(&[]), None);
        assert_eq!(KvCommand::decode(&[0; COMMAND_BYTES]), None);
    }

    #[test]
    fn an_operation_takes_effect_once_and_snapshots_round_trip() {
        let put = |client, seq, attempt| {
            KvCommand {
                client,
                seq,
                attempt,
                op: KvOp::Put { key: 1 },
            }
            .encode()
        };
        let get = KvCommand {
            client: 2,
            seq: 1,
            attempt: 0,
            op: KvOp::Get { key: 1 },
        }
        .encode();
        let mut m = KvMachine::default();
        m.apply(&put(0, 1, 0));
        m.apply(&get);
        m.apply(&put(1, 1, 0));
        m.apply(&put(0, 1, 1)); // client 0's first put again: no effect
        assert_eq!(m.session(2), Some((1, Some((0, 1)))));
        let again = KvMachine::restore(&m.snapshot()).expect("decodes");
        assert_eq!(again, m);
        assert_eq!(again.values[&1], (1, 1));
        assert_eq!(KvMachine::restore(&m.snapshot()[..3]), None);
    }
}
