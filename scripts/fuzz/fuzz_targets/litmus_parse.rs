//! The `.litmus` parser on any bytes: no panic, and every error is `NAME:LINE: message`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use velos_fuzz::check_error;
use velos_sim::litmus::parse::parse_source;

const NAME: &str = "fuzz.litmus";

fuzz_target!(|data: &[u8]| {
    if let Err(error) = parse_source(data, NAME) {
        check_error(&error, NAME, data);
    }
});
