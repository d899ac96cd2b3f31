//! The `.litmus` format: syntax tree, parser, compiler, and runner.

pub mod ast;
pub mod compile;
pub mod lex;
pub mod libcall;
mod mem_runs;
pub mod parse;
pub mod program;
pub mod run;
pub mod validate;

pub use ast::{LitmusTest, ParseError};
pub use parse::parse;
pub use run::{Backend, Report, RunError, RunOptions, collect_files, render, run_file};
