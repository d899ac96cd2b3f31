//! Tokens of one `.litmus` line, a cursor over them, and the lexical checks on words
//! (integers, names, registers).
//!
//! Every line, directive or instruction, goes through the same small lexer, so spacing is
//! free around punctuation everywhere: `a=0&&(x=1)`, `loc x@2 = 0`, `bcast v {1, 2}` and
//! `w=W` all tokenize as expected. A *word* is a run of `[A-Za-z0-9_.+-]` (the character set
//! of test names); whether a word is a valid name, integer or register is decided where it is
//! used, so the error can say what was expected there.

use std::fmt;

use super::ast::{ParseError, Reg};

/// Builds a [`ParseError`] for `line`.
pub(crate) fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// One token of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// A run of `[A-Za-z0-9_.+-]`: a keyword, name, integer or register.
    Word(&'a str),
    /// `@`
    At,
    /// `=`
    Eq,
    /// `:`
    Colon,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `!`
    Not,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `,`
    Comma,
    /// `*`
    Star,
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Tok::Word(word) => word,
            Tok::At => "@",
            Tok::Eq => "=",
            Tok::Colon => ":",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::Not => "!",
            Tok::And => "&&",
            Tok::Or => "||",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Comma => ",",
            Tok::Star => "*",
        };
        write!(f, "`{text}`")
    }
}

/// Describes an optional token for a message: the token, or "end of line".
pub(crate) fn describe(tok: Option<Tok<'_>>) -> String {
    tok.map_or_else(|| "end of line".to_owned(), |tok| tok.to_string())
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')
}

/// Whether `c` separates tokens. Tabs count as spaces; a stray `\r` (a CRLF file read
/// line by line) is blank too.
pub(crate) fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r')
}

/// Splits `text` (one line without its comment) into tokens.
pub(crate) fn tokenize(text: &str, line: usize) -> Result<Vec<Tok<'_>>, ParseError> {
    let mut toks = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        let tok = match c {
            c if is_blank(c) => continue,
            c if is_word_char(c) => {
                let mut end = start + c.len_utf8();
                while let Some(&(i, next)) = chars.peek() {
                    if !is_word_char(next) {
                        break;
                    }
                    end = i + next.len_utf8();
                    chars.next();
                }
                Tok::Word(&text[start..end])
            }
            '@' => Tok::At,
            '=' => Tok::Eq,
            ':' => Tok::Colon,
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '!' => Tok::Not,
            '{' => Tok::LBrace,
            '}' => Tok::RBrace,
            ',' => Tok::Comma,
            '*' => Tok::Star,
            '&' | '|' => {
                if chars.next_if(|&(_, next)| next == c).is_none() {
                    return Err(error(line, format!("single `{c}`: write `{c}{c}`")));
                }
                if c == '&' { Tok::And } else { Tok::Or }
            }
            other => {
                return Err(error(
                    line,
                    format!("unexpected character `{}`", other.escape_debug()),
                ));
            }
        };
        toks.push(tok);
    }
    Ok(toks)
}

/// A cursor over the tokens of one line.
#[derive(Debug)]
pub(crate) struct Cursor<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
    /// The line the tokens come from, for errors.
    pub(crate) line: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the first of `toks`.
    pub(crate) fn new(toks: Vec<Tok<'a>>, line: usize) -> Self {
        Cursor { toks, pos: 0, line }
    }

    /// The next token, without consuming it.
    pub(crate) fn peek(&self) -> Option<Tok<'a>> {
        self.toks.get(self.pos).copied()
    }

    /// Consumes and returns the next token.
    pub(crate) fn bump(&mut self) -> Option<Tok<'a>> {
        let tok = self.peek();
        if tok.is_some() {
            self.pos += 1;
        }
        tok
    }

    /// Consumes the next token if it is `tok`.
    pub(crate) fn eat(&mut self, tok: Tok<'_>) -> bool {
        let found = self.peek() == Some(tok);
        if found {
            self.pos += 1;
        }
        found
    }

    /// The tokens not consumed yet.
    pub(crate) fn rest(&self) -> &[Tok<'a>] {
        &self.toks[self.pos..]
    }

    /// An error on this line.
    pub(crate) fn error(&self, message: impl Into<String>) -> ParseError {
        error(self.line, message)
    }

    /// Consumes `tok`, or fails saying what `context` needed.
    pub(crate) fn expect(&mut self, tok: Tok<'_>, context: &str) -> Result<(), ParseError> {
        if self.eat(tok) {
            return Ok(());
        }
        Err(self.error(format!(
            "expected {tok} {context}, found {}",
            describe(self.peek())
        )))
    }

    /// Consumes a word, or fails saying that `what` was expected.
    pub(crate) fn word(&mut self, what: &str) -> Result<&'a str, ParseError> {
        match self.peek() {
            Some(Tok::Word(word)) => {
                self.pos += 1;
                Ok(word)
            }
            other => Err(self.error(format!("expected {what}, found {}", describe(other)))),
        }
    }

    /// Fails unless every token has been consumed; `usage` is the form of the line.
    pub(crate) fn finish(&self, usage: &str) -> Result<(), ParseError> {
        match self.peek() {
            None => Ok(()),
            Some(tok) => Err(self.error(format!("unexpected {tok} at the end of `{usage}`"))),
        }
    }
}

/// Why a word is not an unsigned 64-bit integer.
enum IntError {
    /// Not digits of the radix; the kind of integer it tried to be.
    Bad(&'static str),
    /// Digits, but too many.
    Overflow,
}

fn parse_unsigned(word: &str) -> Result<u64, IntError> {
    let (digits, radix, kind) = match word.strip_prefix("0x") {
        Some(hex) => (hex, 16, "hexadecimal integer"),
        None => (word, 10, "integer"),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(IntError::Bad(kind));
    }
    // Every character is a digit of the radix, so the only possible failure is overflow.
    u64::from_str_radix(digits, radix).map_err(|_| IntError::Overflow)
}

/// Parses an unsigned 64-bit integer, decimal or `0x` hexadecimal.
pub(crate) fn parse_int(word: &str, line: usize) -> Result<u64, ParseError> {
    let message = match parse_unsigned(word) {
        Ok(value) => return Ok(value),
        Err(_)
            if word.strip_prefix('-').is_some_and(|magnitude| {
                !matches!(parse_unsigned(magnitude), Err(IntError::Bad(_)))
            }) =>
        {
            format!("negative integer {word}: integers are unsigned")
        }
        Err(IntError::Bad(kind)) => format!("bad {kind} `{word}`"),
        Err(IntError::Overflow) => format!("integer {word} does not fit in 64 bits"),
    };
    Err(error(line, message))
}

/// Whether `word` has the form of a register: `r` followed by digits.
pub(crate) fn is_reg_like(word: &str) -> bool {
    word.strip_prefix('r')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses a register `rN` with `N` fitting in 32 bits.
pub(crate) fn parse_reg(word: &str, line: usize) -> Result<Reg, ParseError> {
    if !is_reg_like(word) {
        return Err(error(
            line,
            format!("expected a register (r0, r1, ...), found `{word}`"),
        ));
    }
    word[1..].parse::<u32>().map(Reg).map_err(|_| {
        error(
            line,
            format!("register number of {word} does not fit in 32 bits"),
        )
    })
}

/// Whether `word` is a valid name of a location, variable, lock or thread: a letter or `_`
/// followed by letters, digits and `_`.
pub(crate) fn is_ident(word: &str) -> bool {
    let mut chars = word.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks that `word` may name a new location, variable, lock or thread (`what`).
pub(crate) fn check_ident(word: &str, what: &str, line: usize) -> Result<(), ParseError> {
    if !is_ident(word) {
        return Err(error(
            line,
            format!(
                "bad {what} name `{word}`: a name is a letter or `_` followed by letters, digits or `_`"
            ),
        ));
    }
    if is_reg_like(word) {
        return Err(error(
            line,
            format!(
                "{word} cannot name a {what}: names of the form r0, r1, ... are reserved for registers"
            ),
        ));
    }
    Ok(())
}

/// Whether `word` may be a work id: letters, digits and `_`. Work ids have a namespace of
/// their own and never appear in conditions, so `w=1` is accepted as well as `w=a`.
pub(crate) fn is_work_name(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
