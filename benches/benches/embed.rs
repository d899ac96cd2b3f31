//! `cargo bench -p velos-bench --bench embed`: Velos beside OmniPaxos, three replicas in
//! this process (the same measurement as `velos bench embed`), written to
//! `target/bench-embed/`.
//! Reports; asserts nothing about speed.

fn main() -> anyhow::Result<()> {
    velos_bench::release_engine("embed")?;
    let config = velos_bench::embed::EmbedConfig::full();
    let report = velos_bench::embed::run(&config, false)?;
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-embed");
    velos_bench::embed::write_outputs(&report, &out)?;
    print!("{}", velos_bench::embed::table(&report));
    println!("written to {}", out.display());
    Ok(())
}
