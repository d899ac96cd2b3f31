//! `cargo bench -p velos-bench --bench failover`: the full failover sweep (the same measurement as
//! `velos bench failover`), written to `target/bench-failover/`. Reports; asserts nothing
//! about speed.

fn main() -> anyhow::Result<()> {
    velos_bench::release_engine("failover")?;
    let config = velos_bench::failover::FailoverConfig::full();
    let report = velos_bench::failover::run(&config, false)?;
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-failover");
    velos_bench::failover::write_outputs(&report, &out)?;
    print!("{}", velos_bench::failover::table(&report));
    println!("written to {}", out.display());
    Ok(())
}
