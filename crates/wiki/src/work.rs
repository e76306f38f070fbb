//! CPU-bound work (text analysis, index commits and merges, lint, index rebuilds) runs here:
//! on a pool of its own, one thread per core, each at a lower scheduling priority (nice 10)
//! than the threads that answer requests. One tenant's bulk load or lint then never holds the
//! request threads, and when the machine's cores are all busy the scheduler gives other
//! tenants' queries (and, in `toolplanectl up`, the edge) the larger share: a query's p99
//! during a bulk load stayed within 1.5× of quiet only with both (docs/wiki.md).

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, OnceLock};

use crate::engine::WikiError;

/// The nice value of the pool's threads (0 is the default; higher yields more).
const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

fn pool() -> &'static Mutex<Sender<Job>> {
    static POOL: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (sender, receiver) = channel::<Job>();
        let receiver: &'static Mutex<Receiver<Job>> = Box::leak(Box::new(Mutex::new(receiver)));
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        for n in 0..cores {
            let spawned = std::thread::Builder::new()
                .name(format!("wiki-work-{n}"))
                .spawn(move || {
                    lower_priority();
                    loop {
                        // One waits for the next job while the others run theirs.
                        let next = receiver
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv();
                        match next {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(error) = spawned {
                tracing::error!(%error, "starting a wiki work thread failed");
            }
        }
        Mutex::new(sender)
    })
}

/// Lowers the calling thread's priority (on Linux `setpriority` with no pid applies to the
/// calling thread only). Unprivileged processes may lower theirs; a failure leaves it as is.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::process::setpriority_process(None, NICE) {
        tracing::warn!(%error, "could not lower the wiki work threads' priority; they run at the request threads'");
    }
}

/// Runs `job` on the work pool and waits for its result.
pub async fn cpu<T, F>(job: F) -> Result<T, WikiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (reply, result) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(job));
        let _ = reply.send(outcome);
    });
    pool()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(job)
        .map_err(|_| WikiError::Internal("the work pool is closed".into()))?;
    match result.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(WikiError::Internal("the wiki work failed (a panic)".into())),
        Err(_) => Err(WikiError::Internal("the work pool dropped a job".into())),
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn jobs_run_at_a_lower_priority_and_a_panic_is_an_error() {
        let nice = super::cpu(|| {
            std::fs::read_to_string("/proc/thread-self/stat")
                .ok()
                .and_then(|stat| {
                    // Field 19 is the nice value; the name (field 2) may hold spaces.
                    let after = stat.rsplit_once(')')?.1.to_owned();
                    after.split_whitespace().nth(16)?.parse::<i32>().ok()
                })
        })
        .await
        .unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(nice, Some(super::NICE));
        let failed = super::cpu(|| -> u32 { panic!("boom") }).await;
        assert!(failed.is_err());
        // The pool survives a panicking job.
        assert_eq!(super::cpu(|| 7).await.unwrap(), 7);
    }
}
