//! Litmus tests on real RDMA (`velos litmus --backend verbs`, feature `verbs`): velos-sim's
//! [`RealBackend`] for velos-rdma's [`VerbsFabric`]. It lives here because velos-sim does
//! not build the `verbs` feature, and the orphan rule wants a local type: [`VerbsLitmus`]
//! wraps the fabric.
//!
//! One fabric is opened per test (its layout) and reused by every execution of the test;
//! between executions its words are set back to 0 by CPU stores. Each execution starts
//! the threads in a random order and, four times out of five, pauses them at random
//! (`jitter.rs`), so that executions do not all run in the one order a barrier start
//! favours.

mod jitter;

use jitter::Jittered;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use velos_rdma::verbs::{VerbsError, VerbsFabric, VerbsOptions};
use velos_rdma::{Layout, Loc, NodeId, RdmaError};
use velos_sim::litmus::program::LitmusThread;
use velos_sim::litmus::real::every_word;
use velos_sim::litmus::{FabricError, LitmusFabric, RealBackend};
use velos_sim::rng::Rng;

/// The verbs backend: fabrics on one RDMA device (the first, or `VELOS_RDMA_DEVICE`; see
/// [`VerbsOptions::from_env`]).
#[derive(Debug)]
pub struct VerbsBackend {
    options: VerbsOptions,
    device: String,
    /// Seed of the pauses.
    seed: u64,
    /// Wall-clock time spent in executions (threads, operations, queue-pair setup).
    busy: Rc<Cell<Duration>>,
}

impl VerbsBackend {
    /// Opens a one-word fabric to check that the device can be used, with the options of
    /// the environment; `seed` draws the executions' pauses.
    ///
    /// # Errors
    /// [`FabricError::Unavailable`] without an RDMA device, [`FabricError::Failed`] when
    /// the device fails.
    pub fn open(seed: u64) -> Result<VerbsBackend, FabricError> {
        let options = VerbsOptions::from_env();
        let probe = VerbsFabric::with_options(Layout::uniform(1, 1), options.clone())
            .map_err(fabric_error)?;
        Ok(VerbsBackend {
            device: probe.device_name().to_owned(),
            options,
            seed,
            busy: Rc::default(),
        })
    }

    /// Wall-clock time the executions have taken so far (not the exploration).
    pub fn busy(&self) -> Duration {
        self.busy.get()
    }

    /// The device's name (`rxe0`, `mlx5_0`, ...).
    pub fn device(&self) -> &str {
        &self.device
    }
}

impl RealBackend for VerbsBackend {
    type Fabric = VerbsLitmus;

    fn name(&self) -> &'static str {
        "verbs"
    }

    fn open(&mut self, layout: &Layout) -> Result<VerbsLitmus, FabricError> {
        let fabric = VerbsFabric::with_options(layout.clone(), self.options.clone())
            .map_err(fabric_error)?;
        Ok(VerbsLitmus {
            fabric,
            seed: self.seed,
            run: 0,
            busy: Rc::clone(&self.busy),
        })
    }
}

/// A [`VerbsFabric`] running one test's executions.
#[derive(Debug)]
pub struct VerbsLitmus {
    fabric: VerbsFabric,
    seed: u64,
    /// The execution under way.
    run: u64,
    busy: Rc<Cell<Duration>>,
}

/// "No device" stops the whole run (a usage error); any other error fails the test.
fn fabric_error(e: VerbsError) -> FabricError {
    if e.is_no_device() {
        FabricError::Unavailable(format!(
            "{e} (the verbs backend needs an RDMA device, e.g. soft-RoCE: scripts/softroce)"
        ))
    } else {
        FabricError::Failed(e.to_string())
    }
}

fn failed(e: RdmaError) -> FabricError {
    FabricError::Failed(e.to_string())
}

impl LitmusFabric for VerbsLitmus {
    fn reset(&mut self, run: u64) -> Result<(), FabricError> {
        self.run = run;
        let layout = self.fabric.layout().clone();
        for loc in every_word(&layout) {
            self.fabric.write(loc, 0).map_err(failed)?;
        }
        Ok(())
    }

    fn write(&mut self, loc: Loc, value: u64) -> Result<(), FabricError> {
        self.fabric.write(loc, value).map_err(failed)
    }

    fn run(
        &mut self,
        threads: Vec<(NodeId, LitmusThread)>,
    ) -> Result<Vec<LitmusThread>, FabricError> {
        let mut rng = Rng::new(self.seed ^ self.run.rotate_left(32));
        let scale = jitter::scale_ns(self.run);
        let order = jitter::order(threads.len(), &mut rng);
        let mut slots: Vec<Option<(NodeId, LitmusThread)>> =
            threads.into_iter().map(Some).collect();
        let started = order
            .iter()
            .map(|&i| {
                let (node, thread) = slots[i].take().expect("an order is a permutation");
                (node, Jittered::new(thread, rng.next_u64(), scale))
            })
            .collect();
        let start = Instant::now();
        let finals = self.fabric.run(started).map_err(fabric_error);
        self.busy.set(self.busy.get() + start.elapsed());
        // Back to the test's order.
        let mut back: Vec<Option<LitmusThread>> = vec![None; order.len()];
        for (&i, done) in order.iter().zip(finals?) {
            back[i] = Some(done.inner);
        }
        Ok(back.into_iter().flatten().collect())
    }

    fn read(&self, loc: Loc) -> Result<u64, FabricError> {
        self.fabric.read(loc).map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use velos_sim::litmus::{RunOptions, run_file_on};

    /// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
    fn rdma_required() -> bool {
        std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
    }

    /// A few tests of the suite on real verbs: nothing forbidden, every execution
    /// completes. Without a device: a skip message, unless `VELOS_REQUIRE_RDMA=1`.
    #[test]
    fn suite_tests_run_on_real_verbs() {
        let mut backend = match VerbsBackend::open(1) {
            Ok(backend) => backend,
            Err(FabricError::Unavailable(e)) if !rdma_required() => {
                println!("skipped: {e} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
                return;
            }
            Err(e) => panic!("the verbs backend cannot run: {e}"),
        };
        let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("../velos-sim/litmus");
        let options = RunOptions {
            runs: 10,
            ..RunOptions::default()
        };
        for file in [
            "paper/fig6c.litmus",
            "paper/fig2a.litmus",
            "locks/fig8e-slock.litmus",
        ] {
            let report = run_file_on(&suite.join(file), &options, &mut backend)
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            let real = report.real.as_ref().expect("the backend ran");
            assert_eq!(real.backend, "verbs");
            assert!(real.skipped.is_none(), "{file}: {:?}", real.skipped);
            assert_eq!(real.runs, 10, "{file}: {:?}", real.failure);
            assert!(real.covered >= 1, "{file}: some allowed outcome was seen");
            assert!(report.pass, "{file}: {real:?}");
        }
    }
}
