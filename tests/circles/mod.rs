//! Circles between the files of one folder: file `x.rs` (with its folder `x/`, if any)
//! imports file `y.rs` of the same folder when its code names `super::y`, `crate::…::y`
//! or a `{…}` group holding `y` at that level. Read as text, comments and a file's unit
//! tests (`#[cfg(test)] mod …` to its end, `all(test, …)` too) left out — a test may use a sibling's API
//! without the code being circular; an import hidden in a macro is missed, and a path in
//! a string literal is counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Circles kept on purpose: `(folder, files, why no shared types module removes it)`.
pub const ALLOWED: &[(&str, &[&str], &str)] = &[(
    "velos-rdma/src/mem",
    &["endpoint", "fabric"],
    "an owner and its borrower: the fabric makes the endpoints (and runs processes on \
     them), an endpoint borrows the fabric's memory, NIC workers and clock",
)];

/// One circle: the files (module names, sorted) of `folder` (relative to the crate's
/// `src/`, `.` for the root) that import each other.
#[derive(Debug)]
pub struct Circle {
    pub folder: String,
    pub files: Vec<String>,
}

/// Every circle in the crate whose sources are under `src`.
pub fn circles(src: &Path) -> Vec<Circle> {
    let mut files = Vec::new();
    crate::source_files::rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(src, f)).collect();
    // Per folder (a parent module path), the edges between its child modules.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for file in &files {
        let me = module_path(src, file);
        let text = std::fs::read_to_string(file).expect("a readable source file");
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let code = &code[..unit_tests(&code)];
        for target in references(code, &me) {
            for level in 0..me.len() {
                let parent = &me[..level];
                let (from, to) = (&me[level], target.get(level));
                let Some(to) = to else { continue };
                let mut sibling = parent.to_vec();
                sibling.push(to.clone());
                if target.starts_with(parent) && to != from && modules.contains(&sibling) {
                    let set = edges.entry(parent.to_vec()).or_default();
                    set.insert((from.clone(), to.clone()));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (parent, set) in edges {
        for files in strongly_connected(&set) {
            let folder = if parent.is_empty() {
                ".".to_string()
            } else {
                parent.join("/")
            };
            out.push(Circle { folder, files });
        }
    }
    out
}

/// Where a file's unit tests start (a `#[cfg(…test…)]` line before a `mod` line), or its
/// length.
fn unit_tests(code: &str) -> usize {
    let mut at = 0;
    let mut lines = code.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let gated = line.trim_start().starts_with("#[cfg(") && line.contains("test");
        if gated
            && lines
                .peek()
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            return at;
        }
        at += line.len();
    }
    code.len()
}

/// The module a file defines: `a/b.rs` and `a/b/mod.rs` are `[a, b]`; `lib.rs`, `main.rs`
/// the root `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn ident(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// The module paths `code` (of module `me`) names through `crate::` and `super::`.
fn references(code: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let starts = (rest.starts_with("crate::") || rest.starts_with("super::"))
            && (i == 0 || !(is_ident(bytes[i - 1] as char) || bytes[i - 1] == b':'));
        if !starts {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let mut base: Option<Vec<String>> = Some(Vec::new());
        let mut tail = rest;
        if let Some(t) = tail.strip_prefix("crate::") {
            tail = t;
        } else {
            let mut ups = 0;
            while let Some(t) = tail.strip_prefix("super::") {
                ups += 1;
                tail = t;
            }
            base = me.len().checked_sub(ups).map(|keep| me[..keep].to_vec());
        }
        i = code.len() - tail.len();
        let Some(base) = base else { continue };
        follow(base, tail, &mut out);
    }
    out
}

/// The paths `tail` (what follows `base::` in the code) names, groups expanded:
/// `x::{y, z::W}` is `x::y` and `x::z::W`.
fn follow(mut base: Vec<String>, tail: &str, out: &mut Vec<Vec<String>>) {
    let tail = tail.trim_start();
    if let Some(group) = tail.strip_prefix('{') {
        for item in top_level_items(group) {
            follow(base.clone(), &item, out);
        }
    } else if let Some(name) = ident(tail) {
        base.push(name.to_string());
        match tail[name.len()..].strip_prefix("::") {
            Some(rest) => follow(base, rest, out),
            None => out.push(base),
        }
    } else {
        out.push(base);
    }
}

/// The items of a `{…}` group (its text after the `{`), split at its top-level commas.
fn top_level_items(group: &str) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut depth = 0;
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(String::new());
                continue;
            }
            _ => {}
        }
        if depth == 0 {
            items.last_mut().expect("one item at least").push(c);
        }
    }
    items
}

/// The strongly connected components of more than one node (Tarjan), each sorted.
fn strongly_connected(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        next: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.next.get(v).cloned().unwrap_or_default() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    self.low.entry(v).and_modify(|l| *l = (*l).min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    self.low.entry(v).and_modify(|l| *l = (*l).min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().expect("v is on the stack");
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        next: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for (a, b) in edges {
        t.next.entry(a).or_default().push(b);
    }
    let nodes: Vec<&str> = t.next.keys().copied().collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}
