//! The `.litmus` format: syntax tree, parser, compiler, and runner.

pub mod ast;
pub mod compile;
pub mod lex;
pub mod libcall;
pub mod mem_runs;
pub mod parse;
pub mod program;
pub mod real;
pub mod real_report;
pub mod run;
pub mod totals;
pub mod validate;

pub use ast::{LitmusTest, ParseError};
pub use mem_runs::MemBackend;
pub use parse::parse;
pub use real::{FabricError, LitmusFabric, RealBackend};
pub use real_report::RealReport;
pub use run::{
    Backend, Report, RunError, RunOptions, collect_files, render, run_file, run_file_on,
};
pub use totals::Totals;
