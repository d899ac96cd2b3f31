//! A linearizability checker for the client histories of a replicated key-value service.
//!
//! A history is a list of [`HistoryOp`]s, one per client operation, each with the instant
//! the client invoked it and the instant it saw the answer (or no answer: the operation is
//! pending, and its effect may or may not have happened). Each key is an independent
//! register that starts out missing: a put sets it to its value, and a get returns the value
//! it holds. The history is linearizable when every completed operation can be given one
//! instant between its invoke and its response, and some pending puts an instant after their
//! invoke, so that the operations in the order of those instants form a legal sequential
//! run of the registers. Linearizability is local, so [`check`] checks each key alone.
//!
//! The search is Wing and Gong's, with Lowe's memoisation: a state is the set of operations
//! already ordered and the register's value; the next operation may be any one not yet
//! ordered that was invoked no later than the earliest response among the completed
//! operations not yet ordered. A get that returns the register's current value is ordered
//! at once, without trying the alternatives: doing so never loses a solution, since it leaves
//! the value as it was and only lifts constraints on the rest. Time is in nanoseconds;
//! an operation precedes another only if it responded strictly before the other's invoke.
//!
//! Histories are stored as JSON lines, one [`HistoryOp`] object a line
//! ([`to_json_lines`], [`from_json_lines`]).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The bound on the states [`check`] visits for one key before it gives up.
pub const DEFAULT_MAX_STATES: u64 = 1_000_000;

/// What a client operation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// Write the operation's value under its key.
    Put,
    /// Read the value under the operation's key.
    Get,
}

/// One client operation of a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryOp {
    /// The client that issued the operation.
    pub client: u64,
    /// A put or a get.
    pub kind: OpKind,
    /// The register the operation acts on.
    pub key: String,
    /// The value written (put), or the value the get returned (None: the key was missing).
    pub value: Option<String>,
    /// When the client invoked the operation, in nanoseconds.
    pub invoke_ns: u64,
    /// None: the operation never completed (its effect may or may not have happened).
    pub response_ns: Option<u64>,
}

/// A line of a JSON-lines history that is not a [`HistoryOp`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name}:{line}: {message}")]
pub struct HistoryError {
    /// The name of the history (a file name, say).
    pub name: String,
    /// The line, counted from 1.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// The outcome of checking a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every key's operations have a legal order.
    Linearizable,
    /// Some key's operations have none, or are malformed.
    Violation(Violation),
    /// The search of a key's orders visited more states than allowed, with no verdict.
    Undecided {
        /// The key whose search was cut short.
        key: String,
        /// The states it had visited.
        states: u64,
    },
}

/// Why a key's operations are not linearizable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The key.
    pub key: String,
    /// What went wrong, in a sentence.
    pub explanation: String,
    /// The key's operations in invoke order, for a report.
    pub ops: Vec<HistoryOp>,
}

/// The history as JSON lines: one [`HistoryOp`] object a line, each line ended by `\n`.
pub fn to_json_lines(history: &[HistoryOp]) -> String {
    let mut out = String::new();
    for op in history {
        let line = serde_json::to_string(op)
            .expect("to_json_lines: strings, integers and a unit enum always serialize");
        out.push_str(&line);
        out.push('\n');
    }
    assert_eq!(
        out.lines().count(),
        history.len(),
        "to_json_lines: one line per operation"
    );
    out
}

/// Reads a history written by [`to_json_lines`]; blank lines are skipped. `name` names the
/// history in errors, which read `NAME:LINE: message`.
pub fn from_json_lines(text: &str, name: &str) -> Result<Vec<HistoryOp>, HistoryError> {
    let mut history = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let op = serde_json::from_str::<HistoryOp>(line).map_err(|e| HistoryError {
            name: name.to_string(),
            line: index + 1,
            // A line is one JSON document: serde's "at line 1" would mislead.
            message: e.to_string().replace(" at line 1 column ", " at column "),
        })?;
        history.push(op);
    }
    Ok(history)
}

/// Checks that every operation is well formed: it responded no earlier than it was invoked,
/// and a put has a value. The first malformed operation is reported as a [`Violation`] of its
/// key.
pub fn validate(history: &[HistoryOp]) -> Result<(), Violation> {
    by_key(history)
        .into_iter()
        .try_for_each(|(key, ops)| validate_key(key, &ops))
}

/// Checks the history with at most [`DEFAULT_MAX_STATES`] states visited per key.
pub fn check(history: &[HistoryOp]) -> Verdict {
    check_with_limit(history, DEFAULT_MAX_STATES)
}

/// Checks the history, visiting at most `max_states` states of each key's search. A
/// violation of any key is the verdict; otherwise the first key whose search exceeded the
/// bound makes it [`Verdict::Undecided`].
pub fn check_with_limit(history: &[HistoryOp], max_states: u64) -> Verdict {
    let mut undecided = None;
    for (key, ops) in by_key(history) {
        if let Err(violation) = validate_key(key, &ops) {
            return Verdict::Violation(violation);
        }
        match KeySearch::new(key, &ops).run(max_states) {
            Ok(()) => {}
            Err(Stop::Violation(violation)) => return Verdict::Violation(violation),
            Err(Stop::Exceeded(states)) => {
                undecided.get_or_insert((key.to_string(), states));
            }
        }
    }
    match undecided {
        Some((key, states)) => Verdict::Undecided { key, states },
        None => Verdict::Linearizable,
    }
}

/// The operations of each key, in key order, each key's sorted by invoke (then response,
/// pending last); the sort is stable, so ties keep the history's order.
fn by_key(history: &[HistoryOp]) -> BTreeMap<&str, Vec<HistoryOp>> {
    let mut keys: BTreeMap<&str, Vec<HistoryOp>> = BTreeMap::new();
    for op in history {
        keys.entry(op.key.as_str()).or_default().push(op.clone());
    }
    for ops in keys.values_mut() {
        ops.sort_by_key(|op| (op.invoke_ns, op.response_ns.unwrap_or(u64::MAX)));
    }
    assert_eq!(
        keys.values().map(Vec::len).sum::<usize>(),
        history.len(),
        "by_key: every operation in exactly one key"
    );
    keys
}

fn validate_key(key: &str, ops: &[HistoryOp]) -> Result<(), Violation> {
    let bad = |op: &HistoryOp, why: &str| Violation {
        key: key.to_string(),
        explanation: format!("malformed operation: the {} {why}", describe(op)),
        ops: ops.to_vec(),
    };
    for op in ops {
        if op.response_ns.is_some_and(|r| r < op.invoke_ns) {
            return Err(bad(op, "responded before it was invoked"));
        }
        if op.kind == OpKind::Put && op.value.is_none() {
            return Err(bad(op, "has no value to write"));
        }
    }
    Ok(())
}

/// An operation for humans: `get by client 2 over [100, 150] ns returning "a"`.
fn describe(op: &HistoryOp) -> String {
    let interval = match op.response_ns {
        Some(r) => format!("over [{}, {r}] ns", op.invoke_ns),
        None => format!("invoked at {} ns and never answered", op.invoke_ns),
    };
    match op.kind {
        OpKind::Put => format!(
            "put of {} by client {} {interval}",
            show(op.value.as_deref()),
            op.client
        ),
        OpKind::Get => format!(
            "get by client {} {interval} returning {}",
            op.client,
            show(op.value.as_deref())
        ),
    }
}

/// A register value for humans: `"a"`, or `missing`.
fn show(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{v:?}"),
        None => "missing".to_string(),
    }
}

/// A register value in the search: an index into [`KeySearch::names`], or None (missing).
type Value = Option<u32>;

/// A search state: the operations ordered so far (a bitset over [`KeySearch::ops`]) and
/// the register's value after them.
type State = (Box<[u64]>, Value);

/// An operation as the search sees it.
#[derive(Clone, Copy, Debug)]
struct Op {
    kind: OpKind,
    value: Value,
    invoke: u64,
    response: Option<u64>,
}

/// Why a key's search stopped without a linearization.
enum Stop {
    Violation(Violation),
    Exceeded(u64),
}

/// The search for a linearization of one key's well-formed operations.
struct KeySearch<'a> {
    key: &'a str,
    /// All the key's operations in invoke order, for reports.
    all: &'a [HistoryOp],
    /// The operations searched: all but pending gets, in invoke order.
    ops: Vec<Op>,
    /// For each of `ops`, its index in `all`.
    origin: Vec<usize>,
    /// The values written or read, by index.
    names: Vec<&'a str>,
    /// The completed operations of `ops`, as a bitset.
    completed: Box<[u64]>,
}

impl<'a> KeySearch<'a> {
    fn new(key: &'a str, all: &'a [HistoryOp]) -> Self {
        assert!(
            all.windows(2).all(|w| w[0].invoke_ns <= w[1].invoke_ns),
            "KeySearch::new: operations in invoke order"
        );
        let mut names: Vec<&'a str> = Vec::new();
        let mut index: HashMap<&'a str, u32> = HashMap::new();
        let mut ops = Vec::new();
        let mut origin = Vec::new();
        for (i, op) in all.iter().enumerate() {
            if op.kind == OpKind::Get && op.response_ns.is_none() {
                continue; // A pending get tells nothing.
            }
            let value = op.value.as_deref().map(|v| {
                *index.entry(v).or_insert_with(|| {
                    names.push(v);
                    u32::try_from(names.len() - 1).unwrap_or(u32::MAX)
                })
            });
            ops.push(Op {
                kind: op.kind,
                value,
                invoke: op.invoke_ns,
                response: op.response_ns,
            });
            origin.push(i);
        }
        let mut completed = vec![0u64; ops.len().div_ceil(64)].into_boxed_slice();
        for (i, op) in ops.iter().enumerate() {
            if op.response.is_some() {
                completed[i / 64] |= 1 << (i % 64);
            }
        }
        let search = KeySearch {
            key,
            all,
            ops,
            origin,
            names,
            completed,
        };
        assert!(
            search.ops.len() == search.origin.len() && search.ops.len() <= all.len(),
            "KeySearch::new: each searched operation has its origin"
        );
        search
    }

    /// Ok when the operations have a linearization.
    fn run(&self, max_states: u64) -> Result<(), Stop> {
        assert!(
            self.ops
                .iter()
                .all(|op| op.response.is_none_or(|r| op.invoke <= r)),
            "run: well-formed operations only (validate_key ran)"
        );
        if let Some(violation) = self.unwritten_read() {
            return Err(Stop::Violation(violation));
        }
        let start: State = (vec![0u64; self.completed.len()].into_boxed_slice(), None);
        let mut visited: HashSet<State> = HashSet::new();
        visited.insert(start.clone());
        let mut stack = vec![start];
        // The stuck states that had ordered the most completed operations, and that many.
        let mut deepest: (usize, Vec<State>) = (0, Vec::new());
        while let Some((bits, value)) = stack.pop() {
            if covers(&bits, &self.completed) {
                return Ok(());
            }
            let candidates = self.candidates(&bits);
            let matching_get = candidates
                .iter()
                .copied()
                .find(|&i| self.ops[i].kind == OpKind::Get && self.ops[i].value == value);
            let next: Vec<usize> = match matching_get {
                Some(get) => vec![get],
                None => candidates
                    .into_iter()
                    .filter(|&i| self.ops[i].kind == OpKind::Put)
                    .collect(),
            };
            if next.is_empty() {
                let depth = count(&bits, &self.completed);
                if depth > deepest.0 || deepest.1.is_empty() {
                    deepest = (depth, Vec::new());
                }
                if depth == deepest.0 {
                    deepest.1.push((bits, value));
                }
                continue;
            }
            // Pushed in reverse so the earliest-invoked candidate is tried first.
            for &i in next.iter().rev() {
                let mut after = bits.clone();
                after[i / 64] |= 1 << (i % 64);
                let value = match self.ops[i].kind {
                    OpKind::Put => self.ops[i].value,
                    OpKind::Get => value,
                };
                let state = (after, value);
                if !visited.contains(&state) {
                    visited.insert(state.clone());
                    stack.push(state);
                    if visited.len() as u64 > max_states {
                        return Err(Stop::Exceeded(visited.len() as u64));
                    }
                }
            }
        }
        let violation = self.explain(deepest.0, &deepest.1);
        assert!(
            !violation.explanation.is_empty() && violation.key == self.key,
            "run: a violation explains itself"
        );
        Err(Stop::Violation(violation))
    }

    /// The operations that may be ordered next: those not yet ordered that were invoked no
    /// later than the earliest response among the completed operations not yet ordered.
    fn candidates(&self, bits: &[u64]) -> Vec<usize> {
        let frontier = (0..self.ops.len())
            .filter(|&i| !is_set(bits, i))
            .filter_map(|i| self.ops[i].response)
            .min();
        let Some(frontier) = frontier else {
            return Vec::new();
        };
        let candidates: Vec<usize> = (0..self.ops.len())
            .filter(|&i| !is_set(bits, i))
            .take_while(|&i| self.ops[i].invoke <= frontier)
            .collect();
        assert!(
            candidates
                .iter()
                .any(|&i| self.ops[i].response == Some(frontier)),
            "candidates: the operation responding first is always among them"
        );
        candidates
    }

    /// A completed get that returned a value no put of the key writes.
    fn unwritten_read(&self) -> Option<Violation> {
        let written: HashSet<Value> = self
            .ops
            .iter()
            .filter(|op| op.kind == OpKind::Put)
            .map(|op| op.value)
            .collect();
        let i = (0..self.ops.len()).find(|&i| {
            let op = &self.ops[i];
            op.kind == OpKind::Get && op.value.is_some() && !written.contains(&op.value)
        })?;
        Some(Violation {
            key: self.key.to_string(),
            explanation: format!(
                "key {:?}: the {}, a value no put of this key writes",
                self.key,
                describe(&self.all[self.origin[i]])
            ),
            ops: self.all.to_vec(),
        })
    }

    /// The violation, from the stuck states that had ordered `depth` completed operations:
    /// the completed operation responding first among those not ordered is the get that
    /// could not be ordered next.
    fn explain(&self, depth: usize, stuck: &[State]) -> Violation {
        assert!(
            !stuck.is_empty(),
            "explain: the search ends stuck when it finds no linearization"
        );
        let blocked = |bits: &[u64]| {
            (0..self.ops.len())
                .filter(|&i| !is_set(bits, i))
                .filter_map(|i| self.ops[i].response.map(|r| (r, i)))
                .min()
                .map(|(_, i)| i)
        };
        let get = blocked(&stuck[0].0).unwrap_or(0);
        let possible: BTreeSet<Option<&str>> = stuck
            .iter()
            .filter(|(bits, _)| blocked(bits) == Some(get))
            .map(|(_, value)| value.map(|v| self.names[v as usize]))
            .collect();
        let possible: Vec<String> = possible.into_iter().map(show).collect();
        let op = &self.all[self.origin[get]];
        let writers: Vec<String> = self
            .all
            .iter()
            .filter(|w| w.kind == OpKind::Put && w.value == op.value)
            .take(3)
            .map(describe)
            .collect();
        let writers = match (op.value.is_some(), writers.is_empty()) {
            (false, _) => "the key is missing only before every put".to_string(),
            (true, true) => "no put writes that value".to_string(),
            (true, false) => format!("written by: {}", writers.join("; ")),
        };
        let total = count(&self.completed, &self.completed);
        let violation = Violation {
            key: self.key.to_string(),
            explanation: format!(
                "key {:?} is not linearizable: with {depth} of its {total} completed operations \
                 ordered, the {} must take effect next, but the register could then hold only \
                 {} ({writers})",
                self.key,
                describe(op),
                possible.join(" or ")
            ),
            ops: self.all.to_vec(),
        };
        assert!(
            op.kind == OpKind::Get && op.response_ns.is_some(),
            "explain: only a completed get can be stuck"
        );
        violation
    }
}

fn is_set(bits: &[u64], i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

/// Whether `bits` holds every member of `of`.
fn covers(bits: &[u64], of: &[u64]) -> bool {
    bits.iter().zip(of).all(|(b, o)| b & o == *o)
}

/// How many members of `of` are in `bits`.
fn count(bits: &[u64], of: &[u64]) -> usize {
    bits.iter()
        .zip(of)
        .map(|(b, o)| (b & o).count_ones() as usize)
        .sum()
}

#[cfg(test)]
mod tests;
