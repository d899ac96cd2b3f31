//! Running a benchmark's points on worker threads, with a progress bar: what
//! `bench locks`, `bench latency` and `bench failover` share.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `run` on every job on up to `threads` threads (each takes the next job in order),
/// showing a progress bar on stderr when `progress` (`label` after the count, `message`
/// naming the job being run); the results in the order of `jobs`, or the first error in
/// that order.
pub fn run_jobs<J: Sync, R: Send>(
    jobs: &[J],
    threads: usize,
    progress: bool,
    label: &str,
    message: impl Fn(&J) -> String + Sync,
    run: impl Fn(&J) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>> {
    let bar = if progress {
        ProgressBar::with_draw_target(Some(jobs.len() as u64), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    let template = format!("{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {label}{{msg}}");
    bar.set_style(
        ProgressStyle::with_template(&template)
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<anyhow::Result<R>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else {
                        break;
                    };
                    bar.set_message(message(job));
                    let result = run(job);
                    results.lock().expect("no worker panicked")[i] = Some(result);
                    bar.inc(1);
                }
            });
        }
    });
    bar.finish_and_clear();
    let results = results
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    assert_eq!(results.len(), jobs.len(), "one result per job");
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_job_order_and_the_first_error_wins() {
        let jobs: Vec<u64> = (0..20).collect();
        let r = run_jobs(&jobs, 3, false, "", |j| j.to_string(), |&j| Ok(j * 2)).unwrap();
        assert_eq!(r, jobs.iter().map(|j| j * 2).collect::<Vec<_>>());
        let e = run_jobs(
            &jobs,
            2,
            false,
            "",
            |_| String::new(),
            |&j| {
                if j % 7 == 3 {
                    anyhow::bail!("job {j}")
                }
                Ok(j)
            },
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "job 3");
        assert!(
            run_jobs(&[] as &[u64], 4, false, "", |_| String::new(), |&j| Ok(j))
                .unwrap()
                .is_empty()
        );
    }
}
