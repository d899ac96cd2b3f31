//! The NIC worker thread of a node in [`Mode::Worker`](super::Mode::Worker).

use super::completions::{SharedCompletions, Ticket};
use super::jitter::Jitter;
use super::memory::Memory;
use super::task::Task;
use crate::ids::NodeId;
use crossbeam_channel::{Receiver, Sender};
use std::collections::VecDeque;
use std::panic;
use std::sync::Arc;
use std::thread::{self, JoinHandle};

/// How many posted operations a node's NIC queues before posting blocks (a send queue's
/// depth; posting parks until the worker catches up).
const QUEUE_DEPTH: usize = 1024;

/// A remote operation handed to a NIC worker.
#[derive(Debug)]
pub(crate) struct Job {
    /// The posting endpoint (with `ticket.target`, it names the queue pair).
    pub(crate) endpoint: u64,
    /// Which operation of the endpoint this is.
    pub(crate) ticket: Ticket,
    /// What to execute.
    pub(crate) task: Task,
    /// Where to report the completion.
    pub(crate) completions: Arc<SharedCompletions>,
}

impl Job {
    fn queue_pair(&self) -> (u64, NodeId) {
        (self.endpoint, self.ticket.target)
    }

    fn run(self, memory: &Memory) {
        let result = self.task.execute(memory);
        self.completions.complete(self.ticket, result);
    }
}

/// A node's NIC: a thread that executes the jobs sent to it, one at a time.
#[derive(Debug)]
pub(crate) struct Worker {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
}

impl Worker {
    /// Starts the NIC worker of `node`. Without jitter it executes jobs in arrival order;
    /// with jitter it delays each job a little and picks a random queue pair among those
    /// with waiting jobs (queue pairs are independent in the model; each stays FIFO).
    pub(crate) fn spawn(node: NodeId, memory: Arc<Memory>, jitter: Option<Jitter>) -> Worker {
        let (jobs, queue) = crossbeam_channel::bounded::<Job>(QUEUE_DEPTH);
        let thread = thread::Builder::new()
            .name(format!("velos-nic-{}", node.0))
            .spawn(move || match jitter {
                None => queue.iter().for_each(|job| job.run(&memory)),
                Some(jitter) => run_jittered(&memory, &queue, jitter),
            })
            .expect("failed to spawn a NIC worker thread");
        Worker { jobs, thread }
    }

    /// The channel that feeds the worker.
    pub(crate) fn jobs(&self) -> &Sender<Job> {
        &self.jobs
    }

    /// Closes the worker's channel and joins its thread. Every sender (the endpoints
    /// borrow theirs from the fabric) must be gone, or this blocks.
    pub(crate) fn stop(self) {
        drop(self.jobs);
        if let Err(payload) = self.thread.join()
            && !thread::panicking()
        {
            panic::resume_unwind(payload);
        }
    }
}

/// The worker loop with jitter. It blocks on the channel when it has nothing to do.
fn run_jittered(memory: &Memory, queue: &Receiver<Job>, mut jitter: Jitter) {
    // One FIFO per queue pair that has waiting jobs.
    let mut ready: Vec<VecDeque<Job>> = Vec::new();
    loop {
        if ready.is_empty() {
            match queue.recv() {
                Ok(job) => enqueue(&mut ready, job),
                Err(_) => return,
            }
        }
        queue.try_iter().for_each(|job| enqueue(&mut ready, job));
        let pick = jitter.below(ready.len());
        let job = ready[pick].pop_front().expect("ready queues are non-empty");
        if ready[pick].is_empty() {
            ready.swap_remove(pick);
        }
        jitter.delay();
        job.run(memory);
    }
}

fn enqueue(ready: &mut Vec<VecDeque<Job>>, job: Job) {
    let queue_pair = job.queue_pair();
    match ready.iter_mut().find(|fifo| {
        fifo.front()
            .is_some_and(|head| head.queue_pair() == queue_pair)
    }) {
        Some(fifo) => fifo.push_back(job),
        None => ready.push(VecDeque::from([job])),
    }
}
