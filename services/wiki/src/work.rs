//! CPU-bound work (text analysis, index commits and merges, lint, index rebuilds) runs here:
//! on a pool of its own, one thread per core, each at the lowest scheduling priority (nice 19),
//! below the threads that answer requests; writes to the store run on a runtime of their own
//! at the same priority. One tenant's bulk load or lint then never holds the
//! request threads, and when the machine's cores are all busy the scheduler gives other
//! tenants' queries (and, in `toolplane up`, the edge) the larger share and lets their
//! threads in at once when they wake (docs/wiki.md, "Through the edge").

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, OnceLock};

/// The nice value of the pool's threads (0 is the default; higher yields more).
const NICE: i32 = 19;

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

/// The runtime writes run on: a worker per core, and its blocking pool (where the local object
/// store creates, renames and deletes files — on ext4 under churn, most of an ingest's
/// kernel time), at the work pool's priority.
fn writes() -> Option<&'static tokio::runtime::Runtime> {
    static WRITES: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    WRITES
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores)
                .thread_name("wiki-writes")
                .on_thread_start(lower_priority)
                .enable_all()
                .build()
                .inspect_err(|error| {
                    tracing::error!(%error, "starting the wiki's write runtime failed; writing on the request threads");
                })
                .ok()
        })
        .as_ref()
}

/// Runs `future` (a write to the store) on the write runtime and waits for it.
pub async fn write<F>(future: F) -> Result<F::Output, std::io::Error>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match writes() {
        Some(runtime) => {
            // A caller that goes away (a cancelled call) stops the write at its next step, as
            // it would on its own thread: never a write that outlives the lease it holds.
            let mut task = AbortOnDrop(runtime.spawn(future));
            (&mut task.0)
                .await
                .map_err(|error| std::io::Error::other(format!("the wiki write failed: {error}")))
        }
        None => Ok(future.await),
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Work that did not finish: the pool was closed or the job panicked.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WorkError(&'static str);

/// Runs `job` on the work pool and waits for its result.
pub async fn cpu<T, F>(job: F) -> Result<T, WorkError>
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
        .map_err(|_| WorkError("the work pool is closed"))?;
    match result.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(_)) => Err(WorkError("the wiki work failed (a panic)")),
        Err(_) => Err(WorkError("the work pool dropped a job")),
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

    #[tokio::test]
    async fn writes_run_on_their_own_runtime() {
        let name = super::write(async { std::thread::current().name().map(str::to_owned) })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("wiki-writes"));
    }
}
