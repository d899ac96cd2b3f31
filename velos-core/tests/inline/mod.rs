//! The cluster the engine's backend tests run on: a log whose failure timeout passes
//! within a few thousand rounds, on the in-process backend with remote operations
//! executed inline (one thread, replicas round-robin).

use velos_core::log::{Detector, LogConfig};
use velos_rdma::mem::{MemFabric, MemOptions, Mode};

/// A log of `replicas` with a pipeline of `pipeline` and values of `max_value` bytes.
pub fn config(replicas: u16, pipeline: u32, max_value: u32) -> LogConfig {
    let mut c = LogConfig::new(replicas, 4_096, max_value);
    c.pipeline = pipeline;
    c.detector = Detector::Fixed;
    // Real time passes only as the rounds go; a crash is noticed within a few thousand.
    c.heartbeat_period_ns = 20_000;
    c.failure_timeout_ns = 200_000;
    c.catch_up_after_ns = 100_000;
    c.validate().expect("a valid configuration");
    c
}

/// The in-process fabric of `log`'s replicas: remote operations executed inline by the
/// posting thread, every node's memory reachable only as its region plan says.
pub fn fabric(log: &LogConfig) -> MemFabric {
    let shape = log.shape();
    let options = MemOptions {
        mode: Mode::Inline,
        jitter: None,
    };
    MemFabric::with_plans(shape.layout(), options, shape.region_plans()).expect("the fabric")
}
