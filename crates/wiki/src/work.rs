//! CPU-bound work (text analysis, lint) runs here: on the blocking pool, at most as many jobs
//! at once as the machine has cores, so one tenant's large ingest or lint never stalls the
//! request threads other tenants' calls (and, in `toolplanectl up`, the edge) run on.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

use crate::engine::WikiError;

fn slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        Semaphore::new(cores)
    })
}

/// Runs `job` on the blocking pool once a CPU slot is free.
pub async fn cpu<T, F>(job: F) -> Result<T, WikiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let _slot = slots()
        .acquire()
        .await
        .map_err(|_| WikiError::Internal("the work pool is closed".into()))?;
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|error| WikiError::Internal(format!("the wiki work failed: {error}")))
}
