//! What every fuzz target checks about an error message.

/// Panics unless `error` has the form `NAME:LINE: message`: it starts with `name`, then `:`,
/// a 1-based line number within `input` (counted as the parsers count, one past the number of
/// `\n`s at most), `: `, and a non-empty message, all on one line.
pub fn check_error(error: &str, name: &str, input: &[u8]) {
    let fail = |why: &str| -> ! { panic!("error {error:?} is not `{name}:LINE: message`: {why}") };
    if error.contains('\n') {
        fail("it has several lines");
    }
    let Some(rest) = error.strip_prefix(name) else {
        fail("it does not start with the file name");
    };
    let Some(rest) = rest.strip_prefix(':') else {
        fail("no `:` after the file name");
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        fail("no line number");
    }
    let (number, rest) = rest.split_at(digits);
    let Ok(line) = number.parse::<usize>() else {
        fail("the line number does not fit");
    };
    let lines = input.iter().filter(|&&b| b == b'\n').count() + 1;
    if line == 0 || line > lines {
        fail(&format!("line {line} is outside 1..={lines}"));
    }
    let Some(message) = rest.strip_prefix(": ") else {
        fail("no `: ` after the line number");
    };
    if message.trim().is_empty() {
        fail("the message is empty");
    }
}
