//! The in-process backend as a [`RealBackend`]: randomised real executions of litmus
//! tests on [`MemFabric`]s.

use super::program::LitmusThread;
use super::real::{FabricError, LitmusFabric, RealBackend};
use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{Layout, Loc, NodeId};

/// The in-process backend: executions alternate NIC-worker and inline mode, each with a
/// fresh jitter seed drawn from `seed`.
#[derive(Clone, Copy, Debug)]
pub struct MemBackend {
    /// Seed of the jitter.
    pub seed: u64,
}

impl RealBackend for MemBackend {
    type Fabric = MemRuns;

    fn name(&self) -> &'static str {
        "mem"
    }

    fn open(&mut self, layout: &Layout) -> Result<MemRuns, FabricError> {
        Ok(MemRuns {
            layout: layout.clone(),
            seed: self.seed,
            fabric: MemFabric::new(layout.clone(), Mode::Inline),
        })
    }
}

/// One test's executions on the in-process backend. A fabric's mode and jitter are fixed
/// when it is made, so each execution gets a fresh (zeroed) one.
#[derive(Debug)]
pub struct MemRuns {
    layout: Layout,
    seed: u64,
    fabric: MemFabric,
}

fn failed(e: velos_rdma::RdmaError) -> FabricError {
    FabricError::Failed(e.to_string())
}

impl LitmusFabric for MemRuns {
    fn reset(&mut self, run: u64) -> Result<(), FabricError> {
        let mode = if run % 2 == 0 {
            Mode::Worker
        } else {
            Mode::Inline
        };
        let jitter = Some(self.seed.wrapping_mul(0x9E37_79B9).wrapping_add(run));
        self.fabric = MemFabric::with_options(self.layout.clone(), MemOptions { mode, jitter });
        Ok(())
    }

    fn write(&mut self, loc: Loc, value: u64) -> Result<(), FabricError> {
        self.fabric.write(loc, value).map_err(failed)
    }

    fn run(
        &mut self,
        threads: Vec<(NodeId, LitmusThread)>,
    ) -> Result<Vec<LitmusThread>, FabricError> {
        Ok(self.fabric.run(threads))
    }

    fn read(&self, loc: Loc) -> Result<u64, FabricError> {
        self.fabric.read(loc).map_err(failed)
    }
}
