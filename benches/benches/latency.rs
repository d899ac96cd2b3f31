//! `cargo bench -p velos-bench --bench latency`: the full decision-latency sweep (the same measurement as
//! `velos bench latency`), written to `target/bench-latency/`. Reports; asserts nothing
//! about speed.

fn main() -> anyhow::Result<()> {
    velos_bench::release_engine("latency")?;
    let config = velos_bench::latency::LatencyConfig::full();
    let report = velos_bench::latency::run(&config, false)?;
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-latency");
    velos_bench::latency::write_outputs(&report, &out)?;
    print!("{}", velos_bench::latency::table(&report));
    println!("written to {}", out.display());
    Ok(())
}
