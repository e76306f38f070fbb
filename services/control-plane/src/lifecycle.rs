//! Tools whose sunset date has passed are retired by the control plane itself: a tool
//! deprecated "until" a date is removed the day after, without an operator remembering to.
//!
//! Every replica runs the check (at start, then every `lifecycle.sunset_check_secs`); the
//! engine's optimistic write makes it happen once: a replica that lost the race finds the tool
//! already retired and writes nothing. The retirement is one change per tool, announced to the
//! edges through the change stream like any other, and recorded under the author
//! `system:sunset` (`toolplanectl changes` shows it).

use std::sync::Arc;
use std::time::Duration;

use tp_registry::state::Change;

use crate::engine::Engine;

/// Retires the tools whose sunset is before today; returns how many.
pub async fn retire_due(engine: &Engine) -> anyhow::Result<usize> {
    let today = crate::engine::today();
    let written = engine
        .write("system:sunset", |state| {
            let changes = state.retire_sunsets(&today);
            let names = Change::tools_put(&changes);
            Ok((changes, names))
        })
        .await?;
    for name in &written.value {
        tracing::info!(tool = %name, revision = written.revision, "tool retired: its sunset date has passed");
    }
    Ok(written.value.len())
}

/// Checks every `every` until `stopping`.
pub async fn run(
    engine: Arc<Engine>,
    every: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        if let Err(error) = retire_due(&engine).await {
            tracing::warn!(%error, "retiring tools past their sunset failed; will retry");
        }
    }
}
