//! The `.litmus` format: syntax tree, parser, and runner.

pub mod ast;
pub mod parse;

pub use ast::{LitmusTest, ParseError};
pub use parse::parse;
