//! Tests of the `.litmus` parser and validator (`shared/design/litmus-format.md`).

use velos_sim::litmus::ast::{
    Atom, Cond, Decl, DeclKind, Expect, Instr, InstrKind, LitmusTest, LockKind, ParseError, Reg,
    Thread,
};
use velos_sim::litmus::parse::{parse, parse_file, parse_source};

/// The example of the format's specification.
const SPEC_EXAMPLE: &str = "\
# Fig. 6(c): remote RMWs are atomic with respect to each other
litmus fig6c
nodes 3
loc x@2 = 0
loc a@1 = 9
loc b@3 = 9
thread T1@1
  rcas a x 0 1
thread T3@3
  rfaa b x 1
exists a = 0 && x = 1
expect forbidden
";

/// Every instruction once, with comments, tabs, hex and a condition exercising precedence.
const ALL_INSTRUCTIONS: &str = "\
# every instruction once
litmus all.instrs+v1   # a test name may hold . + -
nodes 3
loc x@1 = 0x10
loc y@2
var v = 7
lock lw wlock
lock ls slock
lock ln nlock@3
scloc s@2 = 0 # only `0x` starts a hexadecimal integer
thread T1@1
  store x 1
  load r0 x
  cas r1 x 1 2
  mfence
  put y x w=a
  puti y 5 w=a
  get x y
  rcas x y 0 1 w=b
  rfaa v y 3
  wait a
  wait b
  poll 2
  rfence 2
  gf 3
  gf *
  bcast v {2, 3} w=c
  wait c
  acq lw
  rel lw
  sc_write s 1
  sc_read r2 s
  sc_cas r3 s 1 2
  sc_faa r4 s 1
thread T2@2
\tload r0 y
thread T3@3
exists (x=1 && !T1:r0=0) || v@2=7 && y=0 || s=3
expect allowed
allow stuck
";

fn mem(name: &str, node: Option<u16>, value: u64) -> Cond {
    Cond::Atom(Atom::Mem {
        name: name.into(),
        node,
        value,
    })
}

fn reg(thread: &str, reg: u32, value: u64) -> Cond {
    Cond::Atom(Atom::Reg {
        thread: thread.into(),
        reg: Reg(reg),
        value,
    })
}

fn and(a: Cond, b: Cond) -> Cond {
    Cond::And(Box::new(a), Box::new(b))
}

fn or(a: Cond, b: Cond) -> Cond {
    Cond::Or(Box::new(a), Box::new(b))
}

fn not(a: Cond) -> Cond {
    Cond::Not(Box::new(a))
}

fn parse_ok(text: &str) -> LitmusTest {
    parse(text).unwrap_or_else(|err| panic!("expected a valid test, got {err}\n{text}"))
}

/// Parses `text`, expecting an error on `line` whose message contains `fragment`.
#[track_caller]
fn assert_err(text: &str, line: usize, fragment: &str) {
    match parse(text) {
        Ok(test) => panic!("expected an error at line {line} ({fragment}), got {test:?}\n{text}"),
        Err(ParseError { line: got, message }) => {
            assert_eq!(got, line, "wrong line for `{message}`\n{text}");
            assert!(
                message.contains(fragment),
                "`{message}` does not contain `{fragment}`\n{text}"
            );
        }
    }
}

/// The declarations every `instrs` test starts with: lines 1 to 7.
const HEAD: &str = "\
litmus t
nodes 2
loc x@1
loc y@2
var v
lock l wlock
scloc s@2
";

/// A test whose thread `T1@1` (line 8) runs `lines`, the first on line 9.
fn instrs(lines: &[&str]) -> String {
    let mut text = format!("{HEAD}thread T1@1\n");
    for line in lines {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("exists x = 0\nexpect allowed\n");
    text
}

/// A test with condition `cond` on line 10 (after a thread `T1@1` running `load r0 x`).
fn exists(cond: &str) -> String {
    format!("{HEAD}thread T1@1\n  load r0 x\nexists {cond}\nexpect allowed\n")
}

/// The line of the first instruction of [`instrs`].
const FIRST: usize = 9;

#[test]
fn spec_example_parses_to_its_tree() {
    let test = parse_ok(SPEC_EXAMPLE);
    let expected = LitmusTest {
        name: "fig6c".into(),
        nodes: 3,
        decls: vec![
            Decl {
                name: "x".into(),
                kind: DeclKind::Loc { node: 2, init: 0 },
                line: 4,
            },
            Decl {
                name: "a".into(),
                kind: DeclKind::Loc { node: 1, init: 9 },
                line: 5,
            },
            Decl {
                name: "b".into(),
                kind: DeclKind::Loc { node: 3, init: 9 },
                line: 6,
            },
        ],
        threads: vec![
            Thread {
                name: "T1".into(),
                node: 1,
                instrs: vec![Instr {
                    kind: InstrKind::Rcas {
                        local: "a".into(),
                        remote: "x".into(),
                        expected: 0,
                        new: 1,
                        work: None,
                    },
                    line: 8,
                }],
                line: 7,
            },
            Thread {
                name: "T3".into(),
                node: 3,
                instrs: vec![Instr {
                    kind: InstrKind::Rfaa {
                        local: "b".into(),
                        remote: "x".into(),
                        add: 1,
                        work: None,
                    },
                    line: 10,
                }],
                line: 9,
            },
        ],
        exists: and(mem("a", None, 0), mem("x", None, 1)),
        expect: Expect::Forbidden,
        allow_stuck: false,
    };
    assert_eq!(test, expected);
}

#[test]
fn every_instruction_parses() {
    let test = parse_ok(ALL_INSTRUCTIONS);
    assert_eq!(test.name, "all.instrs+v1");
    assert_eq!(test.nodes, 3);
    assert!(test.allow_stuck);
    assert_eq!(test.expect, Expect::Allowed);
    let kinds: Vec<_> = test
        .decls
        .iter()
        .map(|decl| (decl.name.as_str(), decl.kind.clone(), decl.line))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "x",
                DeclKind::Loc {
                    node: 1,
                    init: 0x10
                },
                4
            ),
            ("y", DeclKind::Loc { node: 2, init: 0 }, 5),
            ("v", DeclKind::Var { init: 7 }, 6),
            ("lw", DeclKind::Lock(LockKind::Wlock), 7),
            ("ls", DeclKind::Lock(LockKind::Slock), 8),
            ("ln", DeclKind::Lock(LockKind::Nlock(3)), 9),
            ("s", DeclKind::ScLoc { node: 2, init: 0 }, 10),
        ]
    );
    let s = String::from;
    let w = |name: &str| Some(name.to_owned());
    use InstrKind as I;
    let expected = [
        I::Store {
            loc: s("x"),
            value: 1,
        },
        I::Load {
            reg: Reg(0),
            loc: s("x"),
        },
        I::Cas {
            reg: Reg(1),
            loc: s("x"),
            expected: 1,
            new: 2,
        },
        I::Mfence,
        I::Put {
            remote: s("y"),
            local: s("x"),
            work: w("a"),
        },
        I::PutInline {
            remote: s("y"),
            value: 5,
            work: w("a"),
        },
        I::Get {
            local: s("x"),
            remote: s("y"),
            work: None,
        },
        I::Rcas {
            local: s("x"),
            remote: s("y"),
            expected: 0,
            new: 1,
            work: w("b"),
        },
        I::Rfaa {
            local: s("v"),
            remote: s("y"),
            add: 3,
            work: None,
        },
        I::Wait { work: s("a") },
        I::Wait { work: s("b") },
        I::Poll { node: 2 },
        I::Rfence { node: 2 },
        I::Gf { node: Some(3) },
        I::Gf { node: None },
        I::Bcast {
            var: s("v"),
            nodes: vec![2, 3],
            work: w("c"),
        },
        I::Wait { work: s("c") },
        I::Acq { lock: s("lw") },
        I::Rel { lock: s("lw") },
        I::ScWrite {
            loc: s("s"),
            value: 1,
        },
        I::ScRead {
            reg: Reg(2),
            loc: s("s"),
        },
        I::ScCas {
            reg: Reg(3),
            loc: s("s"),
            expected: 1,
            new: 2,
        },
        I::ScFaa {
            reg: Reg(4),
            loc: s("s"),
            add: 1,
        },
    ];
    let t1 = &test.threads[0];
    assert_eq!((t1.name.as_str(), t1.node, t1.line), ("T1", 1, 11));
    let got: Vec<_> = t1.instrs.iter().map(|instr| instr.kind.clone()).collect();
    assert_eq!(got, expected);
    let lines: Vec<_> = t1.instrs.iter().map(|instr| instr.line).collect();
    assert_eq!(lines, (12..12 + expected.len()).collect::<Vec<_>>());
    // A tab indents as well as spaces; a thread may have no instructions.
    assert_eq!(
        test.threads[1].instrs,
        [Instr {
            kind: I::Load {
                reg: Reg(0),
                loc: s("y")
            },
            line: 36
        }]
    );
    assert!(test.threads[2].instrs.is_empty());
    // `A || B && C || D` is `(A || (B && C)) || D`; `!` binds to its atom only.
    let a = and(mem("x", None, 1), not(reg("T1", 0, 0)));
    assert_eq!(
        test.exists,
        or(
            or(a, and(mem("v", Some(2), 7), mem("y", None, 0))),
            mem("s", None, 3)
        )
    );
}

#[test]
fn uppercase_hex_prefix_is_not_hex() {
    // The format's hexadecimal prefix is `0x` exactly.
    assert_err(
        &HEAD.replace("scloc s@2", "scloc s@2 = 0XFF"),
        7,
        "bad integer `0XFF`",
    );
    let test = parse_ok(&instrs(&[
        "store x 0xFfFfFfFfFfFfFfFf",
        "store x 18446744073709551615",
        "store x 007",
    ]));
    let values: Vec<_> = test.threads[0]
        .instrs
        .iter()
        .map(|instr| instr.kind.clone())
        .collect();
    assert_eq!(
        values,
        [u64::MAX, u64::MAX, 7].map(|value| InstrKind::Store {
            loc: "x".into(),
            value
        }),
    );
}

#[test]
fn comments_blanks_and_spacing() {
    let text = "\n\
        # leading comment\n\
        \t\n\
        litmus spacing # trailing comment\n\
        var v=1  # `=` needs no spaces\n\
        loc x @ 2 = 0x2a\n\
        nodes 2       # may follow the declarations that use it\n\
        thread P@2    # comment\n\
        \x20 # an indented comment line is blank\n\
        \x20 bcast v {1,2}\n\
        \x20 bcast v { 1 , 2 } w=k  \n\
        \x20 wait k\n\
        \n\
        exists!(x=0)&&(v@1=1||P:r7=0x0)\n\
        expect forbidden";
    let test = parse_ok(text);
    assert_eq!(test.name, "spacing");
    assert_eq!(test.decls[0].kind, DeclKind::Var { init: 1 });
    assert_eq!(test.decls[1].kind, DeclKind::Loc { node: 2, init: 42 });
    let thread = &test.threads[0];
    assert_eq!(thread.instrs.len(), 3);
    assert_eq!(thread.instrs[0].line, 10);
    assert_eq!(
        thread.instrs[1].kind,
        InstrKind::Bcast {
            var: "v".into(),
            nodes: vec![1, 2],
            work: Some("k".into())
        }
    );
    assert_eq!(
        test.exists,
        and(
            not(mem("x", None, 0)),
            or(mem("v", Some(1), 1), reg("P", 7, 0))
        )
    );
    assert_eq!(test.expect, Expect::Forbidden);
}

#[test]
fn crlf_and_bom_are_accepted() {
    let text = format!("\u{feff}{}", SPEC_EXAMPLE.replace('\n', "\r\n"));
    assert_eq!(parse_ok(&text), parse_ok(SPEC_EXAMPLE));
    assert_err(
        &SPEC_EXAMPLE
            .replace('\n', "\r\n")
            .replace("rfaa b x 1", "rfaa b x"),
        10,
        "rfaa takes 3 operands",
    );
}

#[test]
fn condition_precedence() {
    let a = || mem("x", None, 1);
    let b = || mem("y", None, 2);
    let c = || reg("T1", 0, 3);
    let cases = [
        ("x=1 || y=2 && T1:r0=3", or(a(), and(b(), c()))),
        ("x=1 && y=2 || T1:r0=3", or(and(a(), b()), c())),
        ("x=1 && y=2 && T1:r0=3", and(and(a(), b()), c())),
        ("x=1 || y=2 || T1:r0=3", or(or(a(), b()), c())),
        ("!x=1 && y=2", and(not(a()), b())),
        ("!(x=1 && y=2)", not(and(a(), b()))),
        ("!!x=1", not(not(a()))),
        ("x=1 && (y=2 || T1:r0=3)", and(a(), or(b(), c()))),
        ("((x=1))", a()),
    ];
    for (cond, expected) in cases {
        assert_eq!(parse_ok(&exists(cond)).exists, expected, "{cond}");
    }
}

#[test]
fn var_and_loopback_operands_are_accepted() {
    let text = instrs(&[
        "store v 1",
        "load r0 v",
        "get v y",
        "put y v",
        "rcas v y 0 1",
        "rfaa v x 1",
        "put x x",
        "poll 1",
        "bcast v {1}",
        "sc_write s 1",
        "load r4294967295 x",
        "load r007 x",
    ]);
    let test = parse_ok(&text);
    assert_eq!(
        test.threads[0].instrs[10].kind,
        InstrKind::Load {
            reg: Reg(u32::MAX),
            loc: "x".into()
        }
    );
    assert_eq!(
        test.threads[0].instrs[11].kind,
        InstrKind::Load {
            reg: Reg(7),
            loc: "x".into()
        }
    );
}

#[test]
fn errors_unknown_directive_and_instruction() {
    assert_err("litmus t\nnodes 2\nfoo x\n", 3, "unknown directive `foo`");
    assert_err(
        "litmus t\nnodes 2\n(x\n",
        3,
        "expected a directive, found `(`",
    );
    assert_err(
        &instrs(&["mfence", "frob x"]),
        FIRST + 1,
        "unknown instruction `frob`",
    );
    assert_err(
        &instrs(&["exists x = 0"]),
        FIRST,
        "`exists` is a directive, not an instruction",
    );
    assert_err(&instrs(&["store x 1$"]), FIRST, "unexpected character `$`");
    assert_err(
        &instrs(&["=store x 1"]),
        FIRST,
        "expected an instruction, found `=`",
    );
}

#[test]
fn errors_operand_count() {
    assert_err(
        &instrs(&["store x"]),
        FIRST,
        "store takes 2 operands (`store L V`), found 1",
    );
    assert_err(&instrs(&["load r0 x y"]), FIRST, "load takes 2 operands");
    assert_err(&instrs(&["mfence x"]), FIRST, "mfence takes 0 operands");
    assert_err(
        &instrs(&["wait"]),
        FIRST,
        "wait takes 1 operand (`wait W`), found 0",
    );
    assert_err(&instrs(&["gf"]), FIRST, "gf takes 1 operand");
    assert_err(&instrs(&["rcas x y 0 w=a"]), FIRST, "rcas takes 4 operands");
    assert_err(&instrs(&["store x 1 w=a"]), FIRST, "store takes no work id");
    assert_err(&instrs(&["puti y 1 w="]), FIRST, "malformed work id");
    assert_err(&instrs(&["puti y 1 w=a.b"]), FIRST, "bad work id `a.b`");
    assert_err(&instrs(&["puti y w=a 1"]), FIRST, "malformed work id");
    assert_err("litmus\n", 1, "expected a test name");
    assert_err(
        "litmus a b\n",
        1,
        "unexpected `b` at the end of `litmus NAME`",
    );
    assert_err(
        "litmus t\nnodes\n",
        2,
        "expected the number of nodes, found end of line",
    );
    assert_err("litmus t\nnodes 2 3\n", 2, "unexpected `3`");
    assert_err(
        "litmus t\nnodes 2\nloc x\n",
        3,
        "expected `@` after the name",
    );
    assert_err(
        "litmus t\nnodes 2\nloc x@1 = \n",
        3,
        "expected an initial value after `=`",
    );
    assert_err(
        "litmus t\nnodes 2\nvar v 3\n",
        3,
        "unexpected `3` at the end of `var NAME [= INT]`",
    );
    assert_err("litmus t\nnodes 2\nlock m\n", 3, "expected a lock kind");
    assert_err(
        "litmus t\nnodes 2\nlock m xlock\n",
        3,
        "unknown lock kind `xlock`",
    );
    assert_err("litmus t\nnodes 2\nlock m wlock@1\n", 3, "unexpected `@`");
    assert_err(
        "litmus t\nnodes 2\nlock m nlock\n",
        3,
        "expected `@` after nlock",
    );
    assert_err(
        "litmus t\nnodes 2\nthread T1\n",
        3,
        "expected `@` after the thread name",
    );
}

#[test]
fn errors_bad_integers() {
    assert_err(&instrs(&["store x 1a"]), FIRST, "bad integer `1a`");
    assert_err(
        &instrs(&["store x 18446744073709551616"]),
        FIRST,
        "does not fit in 64 bits",
    );
    assert_err(
        &instrs(&["store x 0x1_0"]),
        FIRST,
        "bad hexadecimal integer `0x1_0`",
    );
    assert_err(
        &instrs(&["store x 0x10000000000000000"]),
        FIRST,
        "does not fit in 64 bits",
    );
    assert_err(
        &instrs(&["store x 0xg"]),
        FIRST,
        "bad hexadecimal integer `0xg`",
    );
    assert_err(
        &instrs(&["store x 0x"]),
        FIRST,
        "bad hexadecimal integer `0x`",
    );
    assert_err(&instrs(&["store x -1"]), FIRST, "negative integer -1");
    assert_err(&instrs(&["store x +1"]), FIRST, "bad integer `+1`");
    assert_err(&instrs(&["cas r0 x 1 y"]), FIRST, "bad integer `y`");
    assert_err(
        &instrs(&["store x *"]),
        FIRST,
        "operand 2 of store: expected an integer, found `*`",
    );
    assert_err(
        "litmus t\nnodes 2\nvar v = -0x1\n",
        3,
        "negative integer -0x1",
    );
    assert_err(
        &exists("x = 99999999999999999999"),
        10,
        "does not fit in 64 bits",
    );
}

#[test]
fn errors_bad_names() {
    assert_err("litmus t\nnodes 2\nloc 1x@1\n", 3, "bad location name `1x`");
    assert_err("litmus t\nnodes 2\nvar a.b\n", 3, "bad variable name `a.b`");
    assert_err(
        "litmus t\nnodes 2\nlock a-b wlock\n",
        3,
        "bad lock name `a-b`",
    );
    assert_err("litmus t\nnodes 2\nthread 0@1\n", 3, "bad thread name `0`");
    assert_err("litmus t/1\n", 1, "unexpected character `/`");
    assert_err(
        &instrs(&["store 5 1"]),
        FIRST,
        "expected a location, found `5`",
    );
}

#[test]
fn errors_register_like_names() {
    assert_err(
        "litmus t\nnodes 2\nloc r1@1\n",
        3,
        "r1 cannot name a location: names of the form r0, r1, ... are reserved",
    );
    assert_err("litmus t\nnodes 2\nvar r0\n", 3, "reserved for registers");
    assert_err(
        "litmus t\nnodes 2\nlock r12 slock\n",
        3,
        "reserved for registers",
    );
    assert_err(
        "litmus t\nnodes 2\nthread r2@1\n",
        3,
        "r2 cannot name a thread",
    );
    assert_err(
        &instrs(&["store r1 1"]),
        FIRST,
        "r1 is a register, not a location",
    );
    // `r` alone and `R1` are not registers, so they may name things.
    parse_ok(
        "litmus t\nnodes 1\nloc r@1\nloc R1@1\nthread T@1\n  store r 1\nexists R1=0\nexpect allowed\n",
    );
}

#[test]
fn errors_duplicate_names() {
    assert_err(
        "litmus t\nnodes 2\nloc x@1\nvar x\n",
        4,
        "duplicate name x: already declared as a location at line 3",
    );
    assert_err(
        "litmus t\nnodes 2\nlock m wlock\nscloc m@1\n",
        4,
        "already declared as a lock at line 3",
    );
    assert_err(
        &format!("{HEAD}thread v@1\n"),
        8,
        "duplicate name v: already declared as a variable at line 5",
    );
    assert_err(
        &format!("{HEAD}thread T@1\nthread T@2\n"),
        9,
        "already declared as a thread at line 8",
    );
}

#[test]
fn errors_node_out_of_range() {
    let decl = |line: &str| format!("litmus t\nnodes 2\n{line}\n");
    assert_err(
        &decl("loc x@3"),
        3,
        "node 3 is out of range: this test has nodes 1..2",
    );
    assert_err(&decl("loc x@0"), 3, "node 0 is out of range");
    assert_err(&decl("scloc x@65536"), 3, "node 65536 is out of range");
    assert_err(&decl("lock m nlock@3"), 3, "node 3 is out of range");
    assert_err(&decl("thread T@0x3"), 3, "node 0x3 is out of range");
    assert_err(&decl("loc x@-1"), 3, "negative integer -1");
    assert_err(&instrs(&["poll 3"]), FIRST, "node 3 is out of range");
    assert_err(&instrs(&["rfence 0"]), FIRST, "node 0 is out of range");
    assert_err(&instrs(&["gf 3"]), FIRST, "node 3 is out of range");
    assert_err(
        &instrs(&["bcast v {1, 3}"]),
        FIRST,
        "node 3 is out of range",
    );
    assert_err(&exists("v@3 = 0"), 10, "node 3 is out of range");
}

#[test]
fn errors_nodes_line() {
    assert_err(
        "litmus t\nloc x@1\nthread T@1\nnodes 2\n",
        2,
        "missing `nodes N` line",
    );
    assert_err("litmus t\nvar v\n# end\n", 3, "missing `nodes N` line");
    assert_err("litmus t\nnodes 0\n", 2, "nodes must be at least 1");
    assert_err(
        "litmus t\nnodes 65\n",
        2,
        "at most 64 nodes are supported, found 65",
    );
    assert_err("litmus t\nnodes 0x10000\n", 2, "at most 64 nodes");
    assert_err("litmus t\nnodes two\n", 2, "bad integer `two`");
    assert_err(
        "litmus t\nnodes 2\nvar v\nnodes 2\n",
        4,
        "repeated `nodes` line (the first is at line 2)",
    );
    // A bad `nodes` line after a declaration that needs it is reported on its own line.
    assert_err("litmus t\nloc x@1\nnodes 99\n", 3, "at most 64 nodes");
    parse_ok("litmus t\nnodes 64\nthread T@64\nexists T:r0=0\nexpect allowed\n");
}

#[test]
fn errors_declaration_order() {
    let after_thread = format!("{HEAD}thread T1@1\n  mfence\nloc z@1\n");
    assert_err(
        &after_thread,
        10,
        "declaration `loc` after the first thread",
    );
    assert_err(
        &format!("{HEAD}thread T1@1\nnodes 3\n"),
        9,
        "declaration `nodes` after the first thread",
    );
    assert_err(
        &format!("{HEAD}thread T1@1\nexists x=0\nvar w\n"),
        10,
        "declaration `var` after exists/expect",
    );
    assert_err(
        &format!("{HEAD}thread T1@1\nexpect allowed\nthread T2@1\n"),
        10,
        "`thread` after exists/expect",
    );
    assert_err(
        "nodes 2\nlitmus t\n",
        1,
        "the first line must be `litmus NAME`, found `nodes`",
    );
    assert_err(
        "# comment\n\n  litmus t\n",
        3,
        "the first line must be `litmus NAME`",
    );
    assert_err(&format!("{HEAD}litmus u\n"), 8, "repeated `litmus` line");
}

#[test]
fn errors_indentation() {
    assert_err(
        &format!("{HEAD}thread T1@1\nstore x 1\n"),
        9,
        "instruction `store` is not indented",
    );
    assert_err(
        &format!("{HEAD}store x 1\n"),
        8,
        "instruction `store` is not indented",
    );
    assert_err(
        &format!("{HEAD}  store x 1\n"),
        8,
        "indented line before any thread",
    );
    assert_err(
        &format!("{HEAD}\tmfence\n"),
        8,
        "indented line before any thread",
    );
    assert_err(
        &format!("{HEAD}thread T1@1\nexists x=0\n  mfence\n"),
        10,
        "indented line after exists/expect",
    );
}

#[test]
fn errors_unknown_names() {
    assert_err(
        &instrs(&["store zz 1"]),
        FIRST,
        "unknown name zz: it is not declared",
    );
    assert_err(
        &instrs(&["mfence", "put zz x"]),
        FIRST + 1,
        "unknown name zz",
    );
    assert_err(&instrs(&["acq m"]), FIRST, "unknown name m");
    assert_err(&exists("zz = 1"), 10, "unknown name zz");
    assert_err(&exists("x = 0 && zz@1 = 1"), 10, "unknown name zz");
}

#[test]
fn errors_wrong_kind() {
    assert_err(&instrs(&["acq x"]), FIRST, "x is a location, not a lock");
    assert_err(&instrs(&["rel v"]), FIRST, "v is a variable, not a lock");
    assert_err(
        &instrs(&["store l 1"]),
        FIRST,
        "l is a lock, not a location",
    );
    assert_err(
        &instrs(&["load r0 T1"]),
        FIRST,
        "T1 is a thread, not a location",
    );
    assert_err(
        &instrs(&["bcast x {1}"]),
        FIRST,
        "x is a location, not a variable",
    );
    assert_err(
        &instrs(&["bcast s {1}"]),
        FIRST,
        "s is an SC location, not a variable",
    );
    assert_err(
        &instrs(&["sc_write x 1"]),
        FIRST,
        "x is a location, not an SC location",
    );
    assert_err(
        &instrs(&["sc_read r0 v"]),
        FIRST,
        "v is a variable, not an SC location",
    );
    assert_err(
        &instrs(&["sc_cas r0 l 0 1"]),
        FIRST,
        "l is a lock, not an SC location",
    );
    assert_err(
        &instrs(&["sc_faa r0 y 1"]),
        FIRST,
        "y is a location, not an SC location",
    );
    assert_err(&instrs(&["get x l"]), FIRST, "l is a lock, not a location");
    assert_err(
        &instrs(&["rfaa l y 1"]),
        FIRST,
        "l is a lock, not a location",
    );
}

#[test]
fn errors_wait_without_work_id() {
    let message = "wait for work id a that no earlier operation of this thread carries";
    assert_err(&instrs(&["wait a"]), FIRST, message);
    assert_err(&instrs(&["wait a", "puti y 1 w=a"]), FIRST, message);
    assert_err(&instrs(&["puti y 1 w=b", "wait a"]), FIRST + 1, message);
    // Work ids are per thread.
    let other_thread = format!(
        "{HEAD}thread T2@2\n  puti x 1 w=a\nthread T1@1\n  wait a\nexists x=0\nexpect allowed\n"
    );
    assert_err(&other_thread, 11, message);
    assert_err(&instrs(&["wait a.b"]), FIRST, "expected a work id");
    parse_ok(&instrs(&[
        "get x y w=1",
        "bcast v {2} w=1",
        "wait 1",
        "wait 1",
    ]));
}

#[test]
fn errors_cpu_access_to_another_node() {
    let message = "CPU access to y, which is on node 2, from thread T1 on node 1";
    assert_err(&instrs(&["store y 1"]), FIRST, message);
    assert_err(&instrs(&["mfence", "load r0 y"]), FIRST + 1, message);
    assert_err(&instrs(&["cas r0 y 0 1"]), FIRST, message);
    assert_err(
        &instrs(&["load r0 s"]),
        FIRST,
        "CPU access to s, which is on node 2, from thread T1 on node 1",
    );
}

#[test]
fn errors_local_operand_on_another_node() {
    let on_2 = "y, which is on node 2, from thread T1 on node 1";
    assert_err(
        &instrs(&["get y x"]),
        FIRST,
        &format!("get with local operand {on_2}"),
    );
    assert_err(
        &instrs(&["put x y"]),
        FIRST,
        &format!("put with local operand {on_2}"),
    );
    assert_err(
        &instrs(&["rcas y x 0 1"]),
        FIRST,
        &format!("rcas with local operand {on_2}"),
    );
    assert_err(
        &instrs(&["rfaa y x 1 w=a"]),
        FIRST,
        &format!("rfaa with local operand {on_2}"),
    );
}

#[test]
fn errors_remote_operand_is_a_variable() {
    let message = "v is a variable: the remote operand of";
    assert_err(
        &instrs(&["put v x"]),
        FIRST,
        &format!("{message} put must be a location"),
    );
    assert_err(&instrs(&["puti v 1"]), FIRST, &format!("{message} puti"));
    assert_err(&instrs(&["get x v"]), FIRST, &format!("{message} get"));
    assert_err(
        &instrs(&["rcas x v 0 1"]),
        FIRST,
        &format!("{message} rcas"),
    );
    assert_err(&instrs(&["rfaa x v 1"]), FIRST, &format!("{message} rfaa"));
}

#[test]
fn errors_registers() {
    assert_err(
        &instrs(&["load x x"]),
        FIRST,
        "expected a register (r0, r1, ...), found `x`",
    );
    assert_err(
        &instrs(&["load r x"]),
        FIRST,
        "expected a register (r0, r1, ...), found `r`",
    );
    assert_err(&instrs(&["cas R1 x 0 1"]), FIRST, "found `R1`");
    assert_err(&instrs(&["sc_read r-1 s"]), FIRST, "found `r-1`");
    assert_err(
        &instrs(&["load r4294967296 x"]),
        FIRST,
        "register number of r4294967296 does not fit in 32 bits",
    );
    assert_err(
        &exists("T1:r99999999999 = 0"),
        10,
        "does not fit in 32 bits",
    );
}

#[test]
fn errors_condition_syntax() {
    assert_err(&exists("(x = 0"), 10, "missing `)` in the condition");
    assert_err(&exists("((x = 0) && y = 0"), 10, "missing `)`");
    assert_err(&exists("x = 0)"), 10, "unmatched `)` in the condition");
    assert_err(
        &exists("(x = 0 y = 1)"),
        10,
        "expected `)`, && or || in the condition, found `y`",
    );
    assert_err(
        &exists("x 0"),
        10,
        "expected `=` after x in the condition, found `0`",
    );
    assert_err(
        &exists("T1:r0 0"),
        10,
        "expected `=` after T1:r0 in the condition",
    );
    assert_err(
        &exists("x ="),
        10,
        "expected an integer after `=`, found end of line",
    );
    assert_err(
        &exists("x = 0 y = 1"),
        10,
        "unexpected `y` after a complete condition",
    );
    assert_err(&exists("x = 0 &&"), 10, "expected a condition");
    assert_err(&exists("&& x = 0"), 10, "expected a condition");
    assert_err(&exists("()"), 10, "expected a condition");
    assert_err(&exists("x = 0 & y = 0"), 10, "single `&`: write `&&`");
    assert_err(&exists("x = 0 | y = 0"), 10, "single `|`: write `||`");
    assert_err(
        &exists("x == 0"),
        10,
        "expected an integer after `=`, found `=`",
    );
    assert_err(&exists(""), 10, "`exists` needs a condition");
    assert_err(&exists("v@ = 0"), 10, "expected a node number after `@`");
    let deep = format!("{}x = 0{}", "(".repeat(1000), ")".repeat(1000));
    assert_err(&exists(&deep), 10, "condition nested more than");
    parse_ok(&exists(&format!(
        "{}x = 0{}",
        "(".repeat(100),
        ")".repeat(100)
    )));
}

#[test]
fn errors_condition_names() {
    assert_err(&exists("T9:r0 = 0"), 10, "unknown thread T9");
    assert_err(&exists("x:r0 = 0"), 10, "x is a location, not a thread");
    assert_err(
        &exists("T1:x = 0"),
        10,
        "expected a register (r0, r1, ...), found `x`",
    );
    assert_err(
        &exists("x@1 = 0"),
        10,
        "x@1: only variables have per-node copies, and x is a location",
    );
    assert_err(&exists("s@2 = 0"), 10, "and s is an SC location");
    assert_err(
        &exists("v = 0"),
        10,
        "v is a variable, with one copy per node: write v@NODE = INT",
    );
    assert_err(&exists("l = 0"), 10, "l is a lock, not a location");
    assert_err(&exists("T1 = 0"), 10, "T1 is a thread: write T1:rN = INT");
    assert_err(&exists("r0 = 0"), 10, "r0 is a register, not a location");
}

#[test]
fn errors_tail_lines() {
    let body = format!("{HEAD}thread T1@1\n  mfence\n");
    assert_err(
        &format!("{body}exists x=0\nexpect maybe\n"),
        11,
        "expect must be `allowed` or `forbidden`, found `maybe`",
    );
    assert_err(
        &format!("{body}exists x=0\nexpect\n"),
        11,
        "found end of line",
    );
    assert_err(
        &format!("{body}exists x=0\nexpect allowed forbidden\n"),
        11,
        "unexpected `forbidden`",
    );
    assert_err(
        &format!("{body}exists x=0\nexpect allowed\nallow deadlock\n"),
        12,
        "`allow` must be followed by `stuck`",
    );
    assert_err(
        &format!("{body}exists x=0\nexpect allowed\nallow stuck now\n"),
        12,
        "unexpected `now`",
    );
    assert_err(
        &format!("{body}exists x=0\nexists x=1\n"),
        11,
        "repeated `exists` line (the first is at line 10)",
    );
    assert_err(
        &format!("{body}expect allowed\nexists x=0\nexpect forbidden\n"),
        12,
        "repeated `expect` line",
    );
    assert_err(
        &format!("{body}allow stuck\nallow stuck\n"),
        11,
        "repeated `allow` line",
    );
    // exists, expect and allow may come in any order after the threads.
    let test = parse_ok(&format!(
        "{body}allow stuck\nexpect forbidden\nexists x=0\n"
    ));
    assert!(test.allow_stuck);
}

#[test]
fn errors_missing_lines() {
    assert_err("", 1, "missing `litmus NAME` line");
    assert_err("\n\n", 2, "missing `litmus NAME` line");
    assert_err("# only\n# comments\n", 2, "missing `litmus NAME` line");
    assert_err("litmus t\nnodes 2\n", 2, "the test has no threads");
    assert_err(
        "litmus t\nnodes 2\nloc x@1\nexists x=0\nexpect allowed\n",
        4,
        "`exists` before any thread",
    );
    assert_err(
        "litmus t\nnodes 2\nexpect allowed\n",
        3,
        "`expect` before any thread",
    );
    let body = format!("{HEAD}thread T1@1\n  mfence\n");
    assert_err(
        &format!("{body}expect allowed\n"),
        10,
        "missing `exists COND` line",
    );
    assert_err(
        &format!("{body}exists x=0\n# trailing comment\n\n"),
        12,
        "missing `expect allowed|forbidden` line",
    );
    assert_err(&format!("{body}exists x=0"), 10, "missing `expect");
    // A thread without instructions is fine.
    parse_ok("litmus t\nnodes 1\nthread T@1\nexists T:r0=0\nexpect allowed\n");
}

#[test]
fn errors_bcast_node_sets() {
    assert_err(
        &instrs(&["bcast v {1 2}"]),
        FIRST,
        "expected `,` or `}` in `{...}`, found `2`",
    );
    assert_err(
        &instrs(&["bcast v {1,}"]),
        FIRST,
        "expected a node number in `{...}`, found `}`",
    );
    assert_err(&instrs(&["bcast v {1"]), FIRST, "found end of line");
    assert_err(
        &instrs(&["bcast v {}"]),
        FIRST,
        "bcast needs at least one node",
    );
    assert_err(&instrs(&["bcast v {2,2}"]), FIRST, "node 2 is listed twice");
    assert_err(
        &instrs(&["bcast v 1"]),
        FIRST,
        "operand 2 of bcast: expected a node set `{N1,N2,..}`, found `1`",
    );
    assert_err(
        &instrs(&["bcast {1} v"]),
        FIRST,
        "operand 1 of bcast: expected a name, found a node set",
    );
    assert_err(
        &instrs(&["poll *"]),
        FIRST,
        "operand 1 of poll: expected a node number, found `*`",
    );
    assert_err(
        &instrs(&["store x @"]),
        FIRST,
        "unexpected `@` in an instruction",
    );
}

#[test]
fn parse_file_formats_errors_with_the_path() {
    let dir = std::env::temp_dir().join(format!("velos-litmus-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let good = dir.join("good.litmus");
    let bad = dir.join("bad.litmus");
    std::fs::write(&good, SPEC_EXAMPLE).expect("write");
    std::fs::write(&bad, SPEC_EXAMPLE.replace("rfaa b x 1", "rfaa b x 1 2")).expect("write");
    assert_eq!(parse_file(&good), Ok(parse_ok(SPEC_EXAMPLE)));
    let err = parse_file(&bad).expect_err("bad file");
    assert_eq!(
        err,
        format!(
            "{}:10: rfaa takes 3 operands (`rfaa Llocal Lremote K [w=W]`), found 4",
            bad.display()
        )
    );
    let missing = dir.join("missing.litmus");
    let err = parse_file(&missing).expect_err("missing file");
    assert!(
        err.starts_with(&format!("{}: ", missing.display())),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn parse_source_names_the_file_and_the_line_even_for_bytes_that_are_not_utf8() {
    assert_eq!(
        parse_source(SPEC_EXAMPLE.as_bytes(), "t.litmus"),
        Ok(parse_ok(SPEC_EXAMPLE))
    );
    assert_eq!(
        parse_source(b"litmus t\nnodes 1\nloc x@1 = \xff\n", "t.litmus"),
        Err("t.litmus:3: the file is not UTF-8 text".to_owned())
    );
    assert_eq!(
        parse_source(b"", "t.litmus"),
        Err("t.litmus:1: missing `litmus NAME` line".to_owned())
    );
}

/// A tiny deterministic generator (xorshift64*), so the mutation test needs no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % bound as u64).expect("fits")
    }
}

/// Parses `text` (which must not panic) and checks an error names a real line.
fn check_no_panic(text: &str) {
    if let Err(err) = parse(text) {
        let last = text.lines().count().max(1);
        assert!(
            (1..=last).contains(&err.line),
            "line {} outside 1..={last}: {}\n{text}",
            err.line,
            err.message
        );
        assert!(!err.message.is_empty());
    }
}

#[test]
fn mutated_files_never_panic() {
    let base = ALL_INSTRUCTIONS;
    let lines: Vec<&str> = base.lines().collect();
    let join = |lines: &[&str]| lines.join("\n");
    let mut variants = 0;
    // Delete, duplicate, and swap lines.
    for i in 0..lines.len() {
        let mut deleted = lines.clone();
        deleted.remove(i);
        check_no_panic(&join(&deleted));
        let mut duplicated = lines.clone();
        duplicated.insert(i, lines[i]);
        check_no_panic(&join(&duplicated));
        for j in i + 1..lines.len() {
            let mut swapped = lines.clone();
            swapped.swap(i, j);
            check_no_panic(&join(&swapped));
            variants += 1;
        }
        variants += 2;
    }
    // Truncate at every character boundary, in a file with multi-byte characters too.
    let unicode = format!("{base}# é ü → ✓\n");
    for text in [base, unicode.as_str()] {
        for (offset, _) in text.char_indices() {
            check_no_panic(&text[..offset]);
            variants += 1;
        }
    }
    // Replace, insert and delete characters at random places.
    let alphabet: Vec<char> = "()!&|=@:{},*# \t\nrx019aAT_.-+é→".chars().collect();
    let mut rng = Rng(0x5eed_1e55_f00d_cafe);
    for _ in 0..2000 {
        let mut chars: Vec<char> = base.chars().collect();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(chars.len());
            let c = alphabet[rng.below(alphabet.len())];
            match rng.below(3) {
                0 => chars[at] = c,
                1 => chars.insert(at, c),
                _ => {
                    chars.remove(at);
                }
            }
        }
        check_no_panic(&chars.into_iter().collect::<String>());
        variants += 1;
    }
    assert!(variants > 1000, "{variants}");
}

#[test]
fn errors_pathological_sizes() {
    assert_err(
        &instrs(&["store x -18446744073709551616"]),
        FIRST,
        "negative integer",
    );
    assert_err(&instrs(&["store x --1"]), FIRST, "bad integer `--1`");
    let dashes = format!("store x {}1", "-".repeat(100_000));
    assert_err(&instrs(&[&dashes]), FIRST, "bad integer");
    let long = vec!["x = 0"; 1001].join(" && ");
    assert_err(&exists(&long), 10, "condition has more than 1000 atoms");
    parse_ok(&exists(&vec!["x = 0"; 1000].join(" || ")));
}
