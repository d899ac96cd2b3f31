//! Printing a benchmark's report, shared by the `velos bench` subcommands.

/// Prints a benchmark's report: one JSON object with `json`, else `text(report)`.
pub fn print_report<R: serde::Serialize>(report: &R, json: bool, text: impl FnOnce(&R) -> String) {
    if json {
        let line = serde_json::to_string(report).expect("a report serialises");
        println!("{line}");
    } else {
        print!("{}", text(report));
    }
}
