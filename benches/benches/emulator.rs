//! `cargo bench -p velos-bench --bench emulator`: the emulator's speed (the same measurement as
//! `velos bench emulator`). Reports medians; asserts nothing about speed.

fn main() -> anyhow::Result<()> {
    velos_bench::release_engine("emulator")?;
    let suite = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../velos-sim/litmus");
    let report = velos_bench::emulator::measure(&suite, 5, 250_000)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
