//! The rendezvous's frame decoder (`rendezvous::wire`) on any bytes, read as the frames a
//! peer sends in turn: no panic, and no allocation beyond the input's own size (run.sh
//! gives this target a malloc limit far below what an announced length could ask for).
#![no_main]

// The root package's own source, compiled in: it needs only serde and serde_json.
#[path = "../../../src/rendezvous/wire.rs"]
#[allow(dead_code)]
mod wire;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = wire::decode_frames(data);
    // A frame is a 4-byte length and at least two bytes of JSON.
    assert!(decoded <= data.len() / 6, "{decoded} frames in {} bytes", data.len());
});
