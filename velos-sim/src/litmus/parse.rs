//! Parser and validator for `.litmus` files (grammar: `shared/design/litmus-format.md`).
//!
//! The file is read line by line. Each line is tokenized ([`super::lex`]), parsed into its
//! piece of the syntax tree, and checked at once against the names declared above it
//! ([`super::validate`]), so the error reported is always the one on the earliest bad line
//! and carries that line's number. The one look-ahead is the node count: a scan before the
//! walk finds the `nodes` line, which may stand anywhere among the declarations.

use std::path::Path;

use super::ast::{
    Atom, Cond, Decl, DeclKind, Expect, Instr, InstrKind, LitmusTest, LockKind, ParseError, Reg,
    Thread,
};
use super::lex::{
    Cursor, Tok, describe, error, is_blank, is_work_name, parse_int, parse_reg, tokenize,
};
use super::validate::{MAX_NODES, NodeCount, Scope, Sym};

/// Parses and validates one `.litmus` file's text.
///
/// # Errors
/// The first problem of the file, with its 1-based line. Whole-file problems (a missing
/// `litmus`, `nodes`, `exists` or `expect` line, no thread) are reported on the last line.
pub fn parse(text: &str) -> Result<LitmusTest, ParseError> {
    let lines = source_lines(text);
    let mut parser = Parser::new(Scope::new(scan_node_count(&lines)));
    for src in &lines {
        parser.line(src)?;
    }
    parser.finish(text.lines().count().max(1))
}

/// Reads and parses a `.litmus` file.
///
/// # Errors
/// `PATH:LINE: message` for a file that does not parse, `PATH: message` when it cannot be
/// read.
pub fn parse_file(path: &Path) -> Result<LitmusTest, String> {
    let bytes = std::fs::read(path).map_err(|err| format!("{}: {err}", path.display()))?;
    parse_source(&bytes, &path.display().to_string())
}

/// Parses the contents of the `.litmus` file called `name` (a path, in errors).
///
/// # Errors
/// `NAME:LINE: message`, also for bytes that are not UTF-8 text (the line of the first bad
/// byte).
pub fn parse_source(bytes: &[u8], name: &str) -> Result<LitmusTest, String> {
    let text = std::str::from_utf8(bytes).map_err(|err| {
        let before = &bytes[..err.valid_up_to()];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        format!("{name}:{line}: the file is not UTF-8 text")
    })?;
    parse(text).map_err(|err| format!("{name}:{}: {}", err.line, err.message))
}

/// One line that is not blank once its comment is removed.
#[derive(Debug)]
struct SourceLine<'a> {
    /// 1-based line number.
    number: usize,
    /// Whether the line starts with a space or tab (an instruction line).
    indented: bool,
    /// The line without comment and surrounding blanks; never empty.
    body: &'a str,
}

fn source_lines(text: &str) -> Vec<SourceLine<'_>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .enumerate()
        .filter_map(|(index, raw)| {
            let code = raw.find('#').map_or(raw, |hash| &raw[..hash]);
            let body = code.trim_matches(is_blank);
            let indented = code.starts_with([' ', '\t']);
            (!body.is_empty()).then_some(SourceLine {
                number: index + 1,
                indented,
                body,
            })
        })
        .collect()
}

/// Finds the first `nodes` line among the declarations (before the first `thread`).
fn scan_node_count(lines: &[SourceLine<'_>]) -> NodeCount {
    for src in lines.iter().filter(|src| !src.indented) {
        match src.body.split(is_blank).next() {
            Some("thread") => break,
            Some("nodes") => {
                let count = tokenize(src.body, src.number).and_then(|toks| {
                    let mut cur = Cursor::new(toks, src.number);
                    cur.bump();
                    nodes_operand(cur)
                });
                return match count {
                    Ok(count) => NodeCount::Known(count),
                    Err(err) => NodeCount::Broken(err),
                };
            }
            _ => {}
        }
    }
    NodeCount::Missing
}

/// The operand of `nodes N`.
fn nodes_operand(mut cur: Cursor<'_>) -> Result<u16, ParseError> {
    let word = cur.word("the number of nodes")?;
    cur.finish("nodes N")?;
    let count = parse_int(word, cur.line)?;
    if count == 0 {
        return Err(cur.error("nodes must be at least 1"));
    }
    match u16::try_from(count) {
        Ok(count) if u64::from(count) <= MAX_NODES => Ok(count),
        _ => Err(cur.error(format!(
            "at most {MAX_NODES} nodes are supported, found {word}"
        ))),
    }
}

/// Every instruction as its usage line: the words after the mnemonic give the operands, and
/// a trailing `[w=W]` means the instruction may carry a work id.
const INSTRUCTIONS: &[&str] = &[
    "store L V",
    "load R L",
    "cas R L E V",
    "mfence",
    "put Lremote Llocal [w=W]",
    "puti Lremote V [w=W]",
    "get Llocal Lremote [w=W]",
    "rcas Llocal Lremote E V [w=W]",
    "rfaa Llocal Lremote K [w=W]",
    "wait W",
    "poll N",
    "rfence N",
    "gf N|*",
    "bcast X {N1,N2,..} [w=W]",
    "acq LOCK",
    "rel LOCK",
    "sc_write L V",
    "sc_read R L",
    "sc_cas R L E V",
    "sc_faa R L K",
];

const WORK_SUFFIX: &str = "[w=W]";

fn usage_of(mnemonic: &str) -> Option<&'static str> {
    INSTRUCTIONS
        .iter()
        .copied()
        .find(|usage| usage.split(' ').next() == Some(mnemonic))
}

/// The directives, for telling a misplaced directive from an unknown word.
const DIRECTIVES: &[&str] = &[
    "litmus", "nodes", "loc", "var", "lock", "scloc", "thread", "exists", "expect", "allow",
];

/// The state of the walk over the file.
#[derive(Debug)]
struct Parser {
    scope: Scope,
    name: Option<String>,
    /// `nodes N` and its line.
    nodes: Option<(u16, usize)>,
    decls: Vec<Decl>,
    threads: Vec<Thread>,
    exists: Option<(Cond, usize)>,
    expect: Option<(Expect, usize)>,
    allow_stuck: Option<usize>,
}

impl Parser {
    fn new(scope: Scope) -> Self {
        Parser {
            scope,
            name: None,
            nodes: None,
            decls: Vec::new(),
            threads: Vec::new(),
            exists: None,
            expect: None,
            allow_stuck: None,
        }
    }

    /// Whether an `exists`, `expect` or `allow` line has been read: threads are closed.
    fn in_tail(&self) -> bool {
        self.exists.is_some() || self.expect.is_some() || self.allow_stuck.is_some()
    }

    fn line(&mut self, src: &SourceLine<'_>) -> Result<(), ParseError> {
        let line = src.number;
        let mut cur = Cursor::new(tokenize(src.body, line)?, line);
        if self.name.is_none() {
            return self.litmus_line(src.indented, cur);
        }
        if src.indented {
            return self.instruction_line(cur);
        }
        let keyword = match cur.bump() {
            Some(Tok::Word(word)) => word,
            other => {
                return Err(cur.error(format!("expected a directive, found {}", describe(other))));
            }
        };
        match keyword {
            "litmus" => Err(cur.error("repeated `litmus` line")),
            "nodes" | "loc" | "var" | "lock" | "scloc" => {
                self.check_declaration_place(keyword, line)?;
                self.declaration(keyword, cur)
            }
            "thread" => self.thread_line(cur),
            "exists" | "expect" | "allow" => {
                if self.threads.is_empty() {
                    return Err(cur.error(format!(
                        "`{keyword}` before any thread: a test needs at least one thread, and threads come first"
                    )));
                }
                self.tail_line(keyword, cur)
            }
            _ if usage_of(keyword).is_some() => Err(cur.error(format!(
                "instruction `{keyword}` is not indented: instructions go on indented lines under their `thread` line"
            ))),
            _ => Err(cur.error(format!("unknown directive `{keyword}`"))),
        }
    }

    fn litmus_line(&mut self, indented: bool, mut cur: Cursor<'_>) -> Result<(), ParseError> {
        if indented || cur.peek() != Some(Tok::Word("litmus")) {
            return Err(cur.error(format!(
                "the first line must be `litmus NAME`, found {}",
                describe(cur.peek())
            )));
        }
        cur.bump();
        let name = cur.word("a test name (letters, digits and `_.+-`)")?;
        cur.finish("litmus NAME")?;
        self.name = Some(name.to_owned());
        Ok(())
    }

    fn check_declaration_place(&self, keyword: &str, line: usize) -> Result<(), ParseError> {
        let after = if self.in_tail() {
            "exists/expect"
        } else if !self.threads.is_empty() {
            "the first thread"
        } else {
            return Ok(());
        };
        Err(error(
            line,
            format!(
                "declaration `{keyword}` after {after}: every nodes, loc, var, lock and scloc line \
                 comes before the first `thread`"
            ),
        ))
    }

    fn declaration(&mut self, keyword: &str, mut cur: Cursor<'_>) -> Result<(), ParseError> {
        let line = cur.line;
        if keyword == "nodes" {
            if let Some((_, first)) = self.nodes {
                return Err(cur.error(format!(
                    "repeated `nodes` line (the first is at line {first})"
                )));
            }
            self.nodes = Some((nodes_operand(cur)?, line));
            return Ok(());
        }
        let name = cur.word(&format!("a name after `{keyword}`"))?;
        let (kind, sym) = match keyword {
            "loc" | "scloc" => {
                let usage = format!("{keyword} NAME@NODE [= INT]");
                cur.expect(Tok::At, &format!("after the name ({usage})"))?;
                let node = self
                    .scope
                    .node(cur.word("a node number after `@`")?, line)?;
                let init = initial_value(&mut cur)?;
                cur.finish(&usage)?;
                if keyword == "loc" {
                    (DeclKind::Loc { node, init }, Sym::Loc(node))
                } else {
                    (DeclKind::ScLoc { node, init }, Sym::ScLoc(node))
                }
            }
            "var" => {
                let init = initial_value(&mut cur)?;
                cur.finish("var NAME [= INT]")?;
                (DeclKind::Var { init }, Sym::Var)
            }
            _ => {
                let kind = self.lock_kind(&mut cur)?;
                cur.finish("lock NAME wlock|slock|nlock@NODE")?;
                (DeclKind::Lock(kind), Sym::Lock(kind))
            }
        };
        self.scope.declare(name, sym, line)?;
        self.decls.push(Decl {
            name: name.to_owned(),
            kind,
            line,
        });
        Ok(())
    }

    fn lock_kind(&self, cur: &mut Cursor<'_>) -> Result<LockKind, ParseError> {
        match cur.word("a lock kind (wlock, slock or nlock@NODE)")? {
            "wlock" => Ok(LockKind::Wlock),
            "slock" => Ok(LockKind::Slock),
            "nlock" => {
                cur.expect(Tok::At, "after nlock (nlock@NODE)")?;
                Ok(LockKind::Nlock(
                    self.scope
                        .node(cur.word("a node number after `@`")?, cur.line)?,
                ))
            }
            other => Err(cur.error(format!(
                "unknown lock kind `{other}`: expected wlock, slock or nlock@NODE"
            ))),
        }
    }

    fn thread_line(&mut self, mut cur: Cursor<'_>) -> Result<(), ParseError> {
        let line = cur.line;
        if self.in_tail() {
            return Err(cur.error("`thread` after exists/expect: threads come before them"));
        }
        let name = cur.word("a thread name")?;
        cur.expect(Tok::At, "after the thread name (thread NAME@NODE)")?;
        let node = self
            .scope
            .node(cur.word("a node number after `@`")?, line)?;
        cur.finish("thread NAME@NODE")?;
        self.scope.declare(name, Sym::Thread(node), line)?;
        self.threads.push(Thread {
            name: name.to_owned(),
            node,
            instrs: Vec::new(),
            line,
        });
        Ok(())
    }

    fn instruction_line(&mut self, mut cur: Cursor<'_>) -> Result<(), ParseError> {
        let line = cur.line;
        if self.in_tail() {
            return Err(
                cur.error("indented line after exists/expect: instructions belong to a thread")
            );
        }
        let Some(thread) = self.threads.last_mut() else {
            return Err(cur.error(
                "indented line before any thread: instructions go under a `thread NAME@NODE` line",
            ));
        };
        let mnemonic = match cur.bump() {
            Some(Tok::Word(word)) => word,
            other => {
                return Err(cur.error(format!(
                    "expected an instruction, found {}",
                    describe(other)
                )));
            }
        };
        let kind = instruction(&self.scope, mnemonic, cur.rest(), line)?;
        self.scope.check_instr(thread, &kind, line)?;
        thread.instrs.push(Instr { kind, line });
        Ok(())
    }

    fn tail_line(&mut self, keyword: &str, mut cur: Cursor<'_>) -> Result<(), ParseError> {
        let line = cur.line;
        let first = match keyword {
            "exists" => self.exists.as_ref().map(|(_, first)| *first),
            "expect" => self.expect.map(|(_, first)| first),
            _ => self.allow_stuck,
        };
        if let Some(first) = first {
            return Err(cur.error(format!(
                "repeated `{keyword}` line (the first is at line {first})"
            )));
        }
        match keyword {
            "exists" => {
                let cond = CondParser::new(&self.scope, cur).parse()?;
                self.scope.check_cond(&cond, line)?;
                self.exists = Some((cond, line));
            }
            "expect" => {
                let expect = match cur.bump() {
                    Some(Tok::Word("allowed")) => Expect::Allowed,
                    Some(Tok::Word("forbidden")) => Expect::Forbidden,
                    other => {
                        return Err(cur.error(format!(
                            "expect must be `allowed` or `forbidden`, found {}",
                            describe(other)
                        )));
                    }
                };
                cur.finish("expect allowed|forbidden")?;
                self.expect = Some((expect, line));
            }
            _ => {
                if !cur.eat(Tok::Word("stuck")) {
                    return Err(cur.error(format!(
                        "`allow` must be followed by `stuck`, found {}",
                        describe(cur.peek())
                    )));
                }
                cur.finish("allow stuck")?;
                self.allow_stuck = Some(line);
            }
        }
        Ok(())
    }

    /// Checks the whole-file requirements; `last` is the line they are reported on.
    fn finish(self, last: usize) -> Result<LitmusTest, ParseError> {
        let name = self
            .name
            .ok_or_else(|| error(last, "missing `litmus NAME` line"))?;
        let (nodes, _) = self
            .nodes
            .ok_or_else(|| error(last, "missing `nodes N` line"))?;
        if self.threads.is_empty() {
            return Err(error(last, "the test has no threads"));
        }
        let (exists, _) = self
            .exists
            .ok_or_else(|| error(last, "missing `exists COND` line"))?;
        let (expect, _) = self
            .expect
            .ok_or_else(|| error(last, "missing `expect allowed|forbidden` line"))?;
        Ok(LitmusTest {
            name,
            nodes,
            decls: self.decls,
            threads: self.threads,
            exists,
            expect,
            allow_stuck: self.allow_stuck.is_some(),
        })
    }
}

/// The optional `= INT` of a declaration (0 when absent).
fn initial_value(cur: &mut Cursor<'_>) -> Result<u64, ParseError> {
    if cur.eat(Tok::Eq) {
        parse_int(cur.word("an initial value after `=`")?, cur.line)
    } else {
        Ok(0)
    }
}

/// An operand of an instruction.
#[derive(Debug)]
enum Operand<'a> {
    /// A name, integer, register or node number.
    Word(&'a str),
    /// `*` (of `gf *`).
    Star,
    /// `{N1,N2,..}` (of `bcast`).
    Set(Vec<&'a str>),
}

/// The operands of an instruction line, checked against its usage.
#[derive(Debug)]
struct Operands<'s, 'a> {
    scope: &'s Scope,
    mnemonic: &'a str,
    ops: Vec<Operand<'a>>,
    work: Option<String>,
    line: usize,
}

/// Parses the instruction `mnemonic` with operand tokens `toks`.
fn instruction(
    scope: &Scope,
    mnemonic: &str,
    toks: &[Tok<'_>],
    line: usize,
) -> Result<InstrKind, ParseError> {
    let Some(usage) = usage_of(mnemonic) else {
        let message = if DIRECTIVES.contains(&mnemonic) {
            format!("`{mnemonic}` is a directive, not an instruction: directives are not indented")
        } else {
            format!("unknown instruction `{mnemonic}`")
        };
        return Err(error(line, message));
    };
    let (toks, work) = match toks {
        [rest @ .., Tok::Word("w"), Tok::Eq, Tok::Word(work)] => (rest, Some(*work)),
        _ => (toks, None),
    };
    if let Some(work) = work.filter(|work| !is_work_name(work)) {
        return Err(error(
            line,
            format!("bad work id `{work}`: a work id is letters, digits and `_`"),
        ));
    }
    let ops = split_operands(toks, line)?;
    let arity = usage
        .split(' ')
        .skip(1)
        .filter(|word| *word != WORK_SUFFIX)
        .count();
    if work.is_some() && !usage.ends_with(WORK_SUFFIX) {
        return Err(error(
            line,
            format!("{mnemonic} takes no work id (`{usage}`)"),
        ));
    }
    if ops.len() != arity {
        let plural = if arity == 1 { "" } else { "s" };
        let found = ops.len();
        return Err(error(
            line,
            format!("{mnemonic} takes {arity} operand{plural} (`{usage}`), found {found}"),
        ));
    }
    let ops = Operands {
        scope,
        mnemonic,
        ops,
        work: work.map(str::to_owned),
        line,
    };
    ops.build()
}

/// Groups operand tokens: words, `*`, and `{...}` node sets.
fn split_operands<'a>(toks: &[Tok<'a>], line: usize) -> Result<Vec<Operand<'a>>, ParseError> {
    let mut ops = Vec::new();
    let mut iter = toks.iter().copied();
    while let Some(tok) = iter.next() {
        ops.push(match tok {
            Tok::Word(word) => Operand::Word(word),
            Tok::Star => Operand::Star,
            Tok::LBrace => Operand::Set(node_set(&mut iter, line)?),
            Tok::Eq => {
                return Err(error(
                    line,
                    "malformed work id: write `w=NAME` as the last operand",
                ));
            }
            other => return Err(error(line, format!("unexpected {other} in an instruction"))),
        });
    }
    Ok(ops)
}

/// The rest of `{N1,N2,..}` after its `{`; spaces are free, commas are required.
fn node_set<'a>(
    iter: &mut impl Iterator<Item = Tok<'a>>,
    line: usize,
) -> Result<Vec<&'a str>, ParseError> {
    let mut items = Vec::new();
    loop {
        match iter.next() {
            Some(Tok::Word(word)) => items.push(word),
            Some(Tok::RBrace) if items.is_empty() => return Ok(items),
            other => {
                return Err(error(
                    line,
                    format!(
                        "expected a node number in `{{...}}`, found {}",
                        describe(other)
                    ),
                ));
            }
        }
        match iter.next() {
            Some(Tok::Comma) => {}
            Some(Tok::RBrace) => return Ok(items),
            other => {
                return Err(error(
                    line,
                    format!(
                        "expected `,` or `}}` in `{{...}}`, found {}",
                        describe(other)
                    ),
                ));
            }
        }
    }
}

impl Operands<'_, '_> {
    fn error(&self, index: usize, expected: &str) -> ParseError {
        let found = match &self.ops[index] {
            Operand::Word(word) => format!("`{word}`"),
            Operand::Star => "`*`".to_owned(),
            Operand::Set(_) => "a node set `{...}`".to_owned(),
        };
        error(
            self.line,
            format!(
                "operand {} of {}: expected {expected}, found {found}",
                index + 1,
                self.mnemonic
            ),
        )
    }

    fn word(&self, index: usize, expected: &str) -> Result<&str, ParseError> {
        match self.ops[index] {
            Operand::Word(word) => Ok(word),
            _ => Err(self.error(index, expected)),
        }
    }

    /// A location, variable or lock name; what it names is checked by the validator.
    fn name(&self, index: usize) -> Result<String, ParseError> {
        self.word(index, "a name").map(str::to_owned)
    }

    fn int(&self, index: usize) -> Result<u64, ParseError> {
        parse_int(self.word(index, "an integer")?, self.line)
    }

    fn reg(&self, index: usize) -> Result<Reg, ParseError> {
        parse_reg(self.word(index, "a register")?, self.line)
    }

    fn node(&self, index: usize) -> Result<u16, ParseError> {
        self.scope
            .node(self.word(index, "a node number")?, self.line)
    }

    fn node_set(&self, index: usize) -> Result<Vec<u16>, ParseError> {
        let Operand::Set(items) = &self.ops[index] else {
            return Err(self.error(index, "a node set `{N1,N2,..}`"));
        };
        if items.is_empty() {
            return Err(error(
                self.line,
                format!("{} needs at least one node in `{{...}}`", self.mnemonic),
            ));
        }
        let mut nodes = Vec::with_capacity(items.len());
        for item in items {
            let node = self.scope.node(item, self.line)?;
            if nodes.contains(&node) {
                return Err(error(
                    self.line,
                    format!("node {node} is listed twice in `{{...}}`"),
                ));
            }
            nodes.push(node);
        }
        Ok(nodes)
    }

    fn work_name(&self, index: usize) -> Result<String, ParseError> {
        let work = self.word(index, "a work id")?;
        if !is_work_name(work) {
            return Err(self.error(index, "a work id (letters, digits and `_`)"));
        }
        Ok(work.to_owned())
    }

    /// Builds the instruction; the operand count has been checked against its usage.
    fn build(self) -> Result<InstrKind, ParseError> {
        use InstrKind as I;
        let work = self.work.clone();
        Ok(match self.mnemonic {
            "store" => I::Store {
                loc: self.name(0)?,
                value: self.int(1)?,
            },
            "load" => I::Load {
                reg: self.reg(0)?,
                loc: self.name(1)?,
            },
            "cas" => I::Cas {
                reg: self.reg(0)?,
                loc: self.name(1)?,
                expected: self.int(2)?,
                new: self.int(3)?,
            },
            "mfence" => I::Mfence,
            "put" => I::Put {
                remote: self.name(0)?,
                local: self.name(1)?,
                work,
            },
            "puti" => I::PutInline {
                remote: self.name(0)?,
                value: self.int(1)?,
                work,
            },
            "get" => I::Get {
                local: self.name(0)?,
                remote: self.name(1)?,
                work,
            },
            "rcas" => I::Rcas {
                local: self.name(0)?,
                remote: self.name(1)?,
                expected: self.int(2)?,
                new: self.int(3)?,
                work,
            },
            "rfaa" => I::Rfaa {
                local: self.name(0)?,
                remote: self.name(1)?,
                add: self.int(2)?,
                work,
            },
            "wait" => I::Wait {
                work: self.work_name(0)?,
            },
            "poll" => I::Poll {
                node: self.node(0)?,
            },
            "rfence" => I::Rfence {
                node: self.node(0)?,
            },
            "gf" => match self.ops[0] {
                Operand::Star => I::Gf { node: None },
                _ => I::Gf {
                    node: Some(self.node(0)?),
                },
            },
            "bcast" => I::Bcast {
                var: self.name(0)?,
                nodes: self.node_set(1)?,
                work,
            },
            "acq" => I::Acq {
                lock: self.name(0)?,
            },
            "rel" => I::Rel {
                lock: self.name(0)?,
            },
            "sc_write" => I::ScWrite {
                loc: self.name(0)?,
                value: self.int(1)?,
            },
            "sc_read" => I::ScRead {
                reg: self.reg(0)?,
                loc: self.name(1)?,
            },
            "sc_cas" => I::ScCas {
                reg: self.reg(0)?,
                loc: self.name(1)?,
                expected: self.int(2)?,
                new: self.int(3)?,
            },
            "sc_faa" => I::ScFaa {
                reg: self.reg(0)?,
                loc: self.name(1)?,
                add: self.int(2)?,
            },
            other => return Err(error(self.line, format!("unknown instruction `{other}`"))),
        })
    }
}

/// How deep `(` and `!` may nest in a condition: a bound on the parser's recursion.
const MAX_COND_DEPTH: usize = 200;

/// How many atoms a condition may have. With [`MAX_COND_DEPTH`] this bounds the depth of
/// the [`Cond`] tree, which every consumer of the tree (and its `Drop`) walks recursively.
const MAX_COND_ATOMS: usize = 1000;

/// A recursive-descent parser of `exists` conditions: `!` binds tightest, then `&&`, then
/// `||`; both binary operators associate to the left.
struct CondParser<'s, 'a> {
    scope: &'s Scope,
    cur: Cursor<'a>,
    depth: usize,
    atoms: usize,
}

impl<'s, 'a> CondParser<'s, 'a> {
    fn new(scope: &'s Scope, cur: Cursor<'a>) -> Self {
        CondParser {
            scope,
            cur,
            depth: 0,
            atoms: 0,
        }
    }

    fn parse(mut self) -> Result<Cond, ParseError> {
        if self.cur.peek().is_none() {
            return Err(self.cur.error("`exists` needs a condition"));
        }
        let cond = self.or()?;
        match self.cur.peek() {
            None => Ok(cond),
            Some(Tok::RParen) => Err(self.cur.error("unmatched `)` in the condition")),
            Some(tok) => Err(self.cur.error(format!(
                "unexpected {tok} after a complete condition: join conditions with && or ||"
            ))),
        }
    }

    fn or(&mut self) -> Result<Cond, ParseError> {
        let mut cond = self.and()?;
        while self.cur.eat(Tok::Or) {
            cond = Cond::Or(Box::new(cond), Box::new(self.and()?));
        }
        Ok(cond)
    }

    fn and(&mut self) -> Result<Cond, ParseError> {
        let mut cond = self.unary()?;
        while self.cur.eat(Tok::And) {
            cond = Cond::And(Box::new(cond), Box::new(self.unary()?));
        }
        Ok(cond)
    }

    fn unary(&mut self) -> Result<Cond, ParseError> {
        if self.depth >= MAX_COND_DEPTH {
            return Err(self
                .cur
                .error(format!("condition nested more than {MAX_COND_DEPTH} deep")));
        }
        self.depth += 1;
        let cond = if self.cur.eat(Tok::Not) {
            self.unary().map(|inner| Cond::Not(Box::new(inner)))
        } else if self.cur.eat(Tok::LParen) {
            self.or().and_then(|inner| match self.cur.peek() {
                Some(Tok::RParen) => {
                    self.cur.bump();
                    Ok(inner)
                }
                None => Err(self.cur.error("missing `)` in the condition")),
                Some(tok) => Err(self.cur.error(format!(
                    "expected `)`, && or || in the condition, found {tok}"
                ))),
            })
        } else {
            self.atom().map(Cond::Atom)
        };
        self.depth -= 1;
        cond
    }

    fn atom(&mut self) -> Result<Atom, ParseError> {
        let line = self.cur.line;
        if self.atoms >= MAX_COND_ATOMS {
            return Err(self
                .cur
                .error(format!("condition has more than {MAX_COND_ATOMS} atoms")));
        }
        self.atoms += 1;
        let name = match self.cur.bump() {
            Some(Tok::Word(word)) => word,
            other => {
                return Err(self.cur.error(format!(
                    "expected a condition (`L = INT`, `VAR@NODE = INT`, `THREAD:rN = INT`, `!` or `(`), found {}",
                    describe(other)
                )));
            }
        };
        let (node, reg, written) = if self.cur.eat(Tok::At) {
            let word = self.cur.word("a node number after `@`")?;
            (
                Some(self.scope.node(word, line)?),
                None,
                format!("{name}@{word}"),
            )
        } else if self.cur.eat(Tok::Colon) {
            let word = self.cur.word("a register after `:`")?;
            (None, Some(parse_reg(word, line)?), format!("{name}:{word}"))
        } else {
            (None, None, name.to_owned())
        };
        self.cur
            .expect(Tok::Eq, &format!("after {written} in the condition"))?;
        let value = parse_int(self.cur.word("an integer after `=`")?, line)?;
        Ok(match reg {
            Some(reg) => Atom::Reg {
                thread: name.to_owned(),
                reg,
                value,
            },
            None => Atom::Mem {
                name: name.to_owned(),
                node,
                value,
            },
        })
    }
}
