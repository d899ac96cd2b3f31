//! Tests of the linearizability checker: hand-made histories with known verdicts, and
//! properties over random histories of a real sequential register.

use super::*;
use proptest::prelude::*;

fn op(
    client: u64,
    kind: OpKind,
    key: &str,
    value: Option<&str>,
    invoke_ns: u64,
    response_ns: Option<u64>,
) -> HistoryOp {
    HistoryOp {
        client,
        kind,
        key: key.to_string(),
        value: value.map(str::to_string),
        invoke_ns,
        response_ns,
    }
}

fn put(client: u64, value: &str, invoke: u64, response: u64) -> HistoryOp {
    op(
        client,
        OpKind::Put,
        "k",
        Some(value),
        invoke,
        Some(response),
    )
}

fn pending_put(client: u64, value: &str, invoke: u64) -> HistoryOp {
    op(client, OpKind::Put, "k", Some(value), invoke, None)
}

fn get(client: u64, value: Option<&str>, invoke: u64, response: u64) -> HistoryOp {
    op(client, OpKind::Get, "k", value, invoke, Some(response))
}

fn assert_linearizable(history: &[HistoryOp]) {
    assert_eq!(check(history), Verdict::Linearizable, "{history:#?}");
}

/// Asserts a violation of key `k` whose explanation mentions every one of `needles`.
fn assert_violation(history: &[HistoryOp], needles: &[&str]) {
    match check(history) {
        Verdict::Violation(v) => {
            assert_eq!(v.key, "k");
            assert_eq!(v.ops.len(), history.len(), "the key's operations");
            for needle in needles {
                assert!(v.explanation.contains(needle), "{:?} lacks {needle:?}", v);
            }
        }
        other => panic!("expected a violation, got {other:?}"),
    }
}

#[test]
fn sequential_put_then_get() {
    assert_linearizable(&[put(1, "a", 0, 10), get(2, Some("a"), 20, 30)]);
}

#[test]
fn concurrent_puts_then_get_seeing_either() {
    for seen in ["a", "b"] {
        assert_linearizable(&[
            put(1, "a", 0, 10),
            put(2, "b", 5, 15),
            get(3, Some(seen), 20, 30),
        ]);
    }
}

#[test]
fn get_overlapping_put_sees_old_or_new() {
    for seen in ["a", "b"] {
        assert_linearizable(&[
            put(1, "a", 0, 10),
            put(1, "b", 20, 40),
            get(2, Some(seen), 25, 35),
        ]);
    }
    assert_linearizable(&[put(1, "b", 20, 40), get(2, None, 25, 35)]);
}

#[test]
fn pending_put_seen_later() {
    assert_linearizable(&[
        put(1, "a", 0, 10),
        pending_put(1, "b", 20),
        get(2, Some("b"), 100, 110),
        get(2, Some("b"), 120, 130),
    ]);
}

#[test]
fn pending_put_never_seen() {
    assert_linearizable(&[
        put(1, "a", 0, 10),
        pending_put(1, "b", 20),
        get(2, Some("a"), 100, 110),
        get(2, Some("a"), 120, 130),
    ]);
}

#[test]
fn pending_get_is_ignored() {
    assert_linearizable(&[
        put(1, "a", 0, 10),
        op(2, OpKind::Get, "k", Some("zzz"), 20, None),
    ]);
}

#[test]
fn get_of_missing_key_before_any_put() {
    assert_linearizable(&[get(1, None, 0, 10), put(2, "a", 20, 30)]);
}

#[test]
fn several_keys_interleaved() {
    assert_linearizable(&[
        op(1, OpKind::Put, "x", Some("1"), 0, Some(10)),
        op(2, OpKind::Put, "y", Some("1"), 5, Some(15)),
        op(3, OpKind::Get, "x", Some("1"), 12, Some(20)),
        op(1, OpKind::Put, "x", Some("2"), 14, Some(30)),
        op(2, OpKind::Get, "y", Some("1"), 18, Some(25)),
        op(3, OpKind::Get, "x", Some("2"), 31, Some(40)),
        op(2, OpKind::Get, "z", None, 26, Some(50)),
    ]);
}

#[test]
fn repeated_values_are_allowed() {
    assert_linearizable(&[
        put(1, "a", 0, 10),
        put(1, "b", 20, 30),
        put(1, "a", 40, 50),
        get(2, Some("a"), 60, 70),
    ]);
}

#[test]
fn stale_read_is_a_violation() {
    assert_violation(
        &[
            put(1, "a", 0, 10),
            put(1, "b", 20, 30),
            get(2, Some("a"), 40, 50),
        ],
        &[
            "get by client 2 over [40, 50] ns returning \"a\"",
            "hold only \"b\"",
        ],
    );
}

#[test]
fn value_never_written_is_a_violation() {
    assert_violation(
        &[put(1, "a", 0, 10), get(2, Some("x"), 20, 30)],
        &["returning \"x\"", "no put of this key writes"],
    );
}

#[test]
fn missing_after_completed_put_is_a_violation() {
    assert_violation(
        &[put(1, "a", 0, 10), get(2, None, 20, 30)],
        &["returning missing", "hold only \"a\""],
    );
}

#[test]
fn new_then_old_is_a_violation() {
    // The put of "b" overlaps both gets, which cannot see "b" and then "a" again.
    assert_violation(
        &[
            put(1, "a", 0, 10),
            put(1, "b", 20, 100),
            get(2, Some("b"), 30, 40),
            get(2, Some("a"), 50, 60),
        ],
        &["over [50, 60] ns returning \"a\"", "hold only \"b\""],
    );
}

#[test]
fn pending_put_seen_then_unseen_is_a_violation() {
    assert_violation(
        &[
            put(1, "a", 0, 10),
            pending_put(1, "b", 20),
            get(2, Some("b"), 30, 40),
            get(2, Some("a"), 50, 60),
        ],
        &["over [50, 60] ns returning \"a\""],
    );
}

#[test]
fn response_before_invoke_is_malformed() {
    let history = [put(1, "a", 10, 5)];
    assert!(validate(&history).is_err());
    assert_violation(&history, &["malformed", "responded before it was invoked"]);
    let no_value = [op(1, OpKind::Put, "k", None, 0, Some(1))];
    assert_violation(&no_value, &["malformed", "no value"]);
}

#[test]
fn violation_wins_over_undecided_and_limit_gives_undecided() {
    // Six concurrent puts of distinct values: hundreds of states, far beyond ten.
    let wide: Vec<HistoryOp> = (0..6)
        .map(|c| op(c, OpKind::Put, "a", Some(&c.to_string()), 0, Some(100)))
        .collect();
    assert!(matches!(
        check_with_limit(&wide, 10),
        Verdict::Undecided { ref key, states } if key == "a" && states > 10
    ));
    // Key "k" (after "a") is refuted within a few states.
    let mut both = wide.clone();
    both.extend([put(1, "a", 0, 10), get(2, None, 20, 30)]);
    assert!(matches!(
        check_with_limit(&both, 10),
        Verdict::Violation(Violation { ref key, .. }) if key == "k"
    ));
    assert_eq!(check(&wide), Verdict::Linearizable);
}

/// A long single-key history of five clients, each issuing its operations one after another,
/// against a real register, with repeated values and a pending put per client.
#[test]
fn long_history_of_five_clients_is_fast_and_linearizable() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % n
    };
    let mut register: Option<String> = None;
    let mut free_at = [0u64; 5];
    let mut history = Vec::new();
    for i in 0..400u64 {
        let at = 10 * i + 5;
        let client = next(5);
        let start = at.saturating_sub(next(40)).max(free_at[client as usize]);
        if start > at {
            continue; // This client is still busy: skip the step.
        }
        let end = at + next(40);
        let pending = i % 80 == 79;
        free_at[client as usize] = if pending { u64::MAX } else { end + 1 };
        let (kind, value) = if next(2) == 0 {
            let v = format!("v{}", next(4));
            if !pending || next(2) == 0 {
                register = Some(v.clone());
            }
            (OpKind::Put, Some(v))
        } else {
            (OpKind::Get, register.clone())
        };
        history.push(op(
            client,
            kind,
            "k",
            value.as_deref(),
            start,
            (!pending).then_some(end),
        ));
    }
    assert!(history.len() > 150, "{} operations", history.len());
    assert_eq!(check(&history), Verdict::Linearizable);
}

#[test]
fn error_names_file_and_line() {
    let good = to_json_lines(&[put(1, "a", 0, 10)]);
    let text = format!("{good}\n{{\"client\": 1}}\n");
    let e = from_json_lines(&text, "h.jsonl").unwrap_err();
    assert_eq!(e.line, 3);
    assert_eq!(
        e.to_string(),
        "h.jsonl:3: missing field `kind` at column 13"
    );
    let line = good.trim_end();
    assert_eq!(
        line,
        r#"{"client":1,"kind":"put","key":"k","value":"a","invoke_ns":0,"response_ns":10}"#
    );
    let pending = to_json_lines(&[op(2, OpKind::Get, "k", None, 5, None)]);
    assert!(pending.contains(r#""value":null"#) && pending.contains(r#""response_ns":null"#));
}

/// A random history of one real sequential register per key: operation `i` takes effect at
/// `10 * i + 5` inside an interval drawn around it; some are left pending, and a pending put
/// may or may not take effect.
fn register_history() -> impl Strategy<Value = Vec<HistoryOp>> {
    // (client, is_put, key, value, before, after, pending, pending put takes effect)
    let step = (0u64..5, any::<bool>(), 0u8..3, 0u8..4, 0u64..40, 0u64..40);
    let fate = (0u8..10, any::<bool>());
    prop::collection::vec((step, fate), 0..120).prop_map(|steps| {
        let mut registers: HashMap<String, Option<String>> = HashMap::new();
        let mut history = Vec::new();
        for (i, ((client, is_put, key, value, before, after), (pending, effective))) in
            steps.into_iter().enumerate()
        {
            let key = format!("k{key}");
            let at = 10 * i as u64 + 5;
            let pending = pending == 0;
            let current = registers.entry(key.clone()).or_default();
            let value = if is_put {
                let v = format!("v{value}");
                if !pending || effective {
                    *current = Some(v.clone());
                }
                Some(v)
            } else {
                current.clone()
            };
            history.push(HistoryOp {
                client,
                kind: if is_put { OpKind::Put } else { OpKind::Get },
                key,
                value,
                invoke_ns: at.saturating_sub(before),
                response_ns: (!pending).then_some(at + after),
            });
        }
        history
    })
}

proptest! {
    #[test]
    fn real_register_histories_are_linearizable(history in register_history()) {
        prop_assert_eq!(check(&history), Verdict::Linearizable);
    }

    #[test]
    fn json_lines_round_trip(history in register_history(), odd in "\\PC*") {
        let mut history = history;
        if let Some(first) = history.first_mut() {
            first.key = odd.clone();
            first.value = Some(format!("{odd}\n\"\\"));
        }
        let text = to_json_lines(&history);
        prop_assert_eq!(text.lines().count(), history.len());
        prop_assert_eq!(from_json_lines(&text, "h").unwrap(), history);
    }

    #[test]
    fn garbage_line_is_reported_not_panicked(
        history in register_history(),
        garbage in "[^\n\r]*",
        at in any::<prop::sample::Index>(),
    ) {
        prop_assume!(!garbage.trim().is_empty());
        prop_assume!(serde_json::from_str::<HistoryOp>(&garbage).is_err());
        let mut lines: Vec<String> = to_json_lines(&history).lines().map(str::to_string).collect();
        let at = at.index(lines.len() + 1);
        lines.insert(at, garbage);
        let e = from_json_lines(&lines.join("\n"), "g.jsonl").unwrap_err();
        prop_assert_eq!(e.line, at + 1);
        let prefix = format!("g.jsonl:{}: ", at + 1);
        prop_assert!(e.to_string().starts_with(&prefix));
    }

    #[test]
    fn any_text_never_panics(text in "\\PC*(\n\\PC*){0,4}") {
        let _ = from_json_lines(&text, "any");
    }
}

/// Whether some order of the completed operations and some of the pending puts respects
/// real time and the register: by trying every permutation (for a handful of operations).
fn brute_force(ops: &[HistoryOp]) -> bool {
    fn extend(ops: &[HistoryOp], order: &mut Vec<usize>, used: &mut Vec<bool>) -> bool {
        let done = (0..ops.len()).all(|i| used[i] || ops[i].response_ns.is_none());
        if done && legal(ops, order) {
            return true;
        }
        for i in 0..ops.len() {
            let pending_get = ops[i].kind == OpKind::Get && ops[i].response_ns.is_none();
            if used[i] || pending_get {
                continue;
            }
            used[i] = true;
            order.push(i);
            let found = extend(ops, order, used);
            order.pop();
            used[i] = false;
            if found {
                return true;
            }
        }
        false
    }
    fn legal(ops: &[HistoryOp], order: &[usize]) -> bool {
        let mut register: Option<&String> = None;
        for (n, &i) in order.iter().enumerate() {
            // No later operation may have responded before this one was invoked.
            if order[n + 1..]
                .iter()
                .any(|&j| ops[j].response_ns.is_some_and(|r| r < ops[i].invoke_ns))
            {
                return false;
            }
            match ops[i].kind {
                OpKind::Put => register = ops[i].value.as_ref(),
                OpKind::Get if ops[i].value.as_ref() != register => return false,
                OpKind::Get => {}
            }
        }
        // Operations left out (pending puts) must not be required before any ordered one:
        // a pending operation never precedes another in real time, so nothing to check.
        true
    }
    extend(ops, &mut Vec::new(), &mut vec![false; ops.len()])
}

proptest! {
    #[test]
    fn agrees_with_brute_force(
        raw in prop::collection::vec(
            (any::<bool>(), 0u8..3, 0u64..30, 0u64..15, 0u8..6),
            0..7,
        )
    ) {
        let ops: Vec<HistoryOp> = raw
            .into_iter()
            .enumerate()
            .map(|(c, (is_put, v, invoke, length, fate))| {
                let value = if is_put || v > 0 { Some(format!("v{v}")) } else { None };
                let kind = if is_put { OpKind::Put } else { OpKind::Get };
                let response = (fate > 0).then_some(invoke + length);
                let mut o = op(c as u64, kind, "k", None, invoke, response);
                o.value = value;
                o
            })
            .collect();
        let expected = brute_force(&ops);
        match check(&ops) {
            Verdict::Linearizable => prop_assert!(expected, "{:#?}", ops),
            Verdict::Violation(v) => prop_assert!(!expected, "{:#?} {:?}", ops, v),
            other => prop_assert!(false, "{:?}", other),
        }
    }
}
