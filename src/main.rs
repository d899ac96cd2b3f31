//! The `velos` command-line tool.
fn main() {}
