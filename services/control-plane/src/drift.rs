//! Drift of MCP upstreams: the control plane fetches the tool list of every executor with
//! `protocol: mcp` (at start, then every `lifecycle.drift_check_secs`) and records, on each
//! catalogued tool, what the upstream now says when it differs from the admitted definition
//! (`Tool.drift`, under the author `system:drift`, so `toolplanectl changes` shows when).
//! Edges never serve the upstream's text: with `lifecycle.on_drift = "hide"` (the default) the
//! tool leaves every registry until an admin admits the change (`toolplanectl tools drift NAME
//! --admit`, a new pin, the admission lint again); with `serve` the admitted text stays.
//!
//! Every replica checks; the engine's compare-and-set makes one of them write a given drift,
//! and the same drift seen again writes nothing. Docs: ADR 0012, the operators' guide.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tp_registry::ExecutorProtocol;

use crate::config::OnDrift;
use crate::engine::Engine;

/// What one check found for one upstream.
#[derive(Debug)]
pub struct Checked {
    /// The executor.
    pub executor: String,
    /// Its tools the catalogue holds whose upstream definition differs, after the check.
    pub drifted: usize,
    /// Why the upstream could not be listed, if it could not.
    pub error: Option<String>,
}

/// Lists every MCP upstream once and records what differs; returns one line per upstream.
pub async fn check_all(engine: &Engine, http: &reqwest::Client, on_drift: OnDrift) -> Vec<Checked> {
    let executors = engine
        .read(|state| {
            state
                .executors
                .values()
                .filter(|e| e.protocol == ExecutorProtocol::Mcp)
                .cloned()
                .collect::<Vec<_>>()
        })
        .await;
    let mut checked = Vec::new();
    for executor in executors {
        let name = executor.name.clone();
        let outcome = check_one(engine, http, executor, on_drift).await;
        let (drifted, error) = match outcome {
            Ok(drifted) => (drifted, None),
            Err(error) => (0, Some(format!("{error:#}"))),
        };
        ::metrics::counter!(
            "tp_cp_drift_checks_total",
            "executor" => name.clone(),
            "outcome" => if error.is_some() { "unreachable" } else { "checked" }
        )
        .increment(1);
        if let Some(error) = &error {
            tracing::warn!(executor = %name, %error, "drift check: the MCP upstream could not be listed; will retry");
        } else {
            ::metrics::gauge!("tp_cp_tools_drifted", "executor" => name.clone())
                .set(drifted as f64);
        }
        checked.push(Checked {
            executor: name,
            drifted,
            error,
        });
    }
    checked
}

/// Lists one upstream and records its drift; returns how many of its tools drifted.
async fn check_one(
    engine: &Engine,
    http: &reqwest::Client,
    executor: tp_registry::Executor,
    on_drift: OnDrift,
) -> anyhow::Result<usize> {
    let name = executor.name.clone();
    let prefix = executor.tool_prefix.clone();
    let upstream = tp_upstream::Upstream::new(
        executor,
        tp_upstream::DEFAULT_CREDENTIAL_ENV_PREFIX,
        http.clone(),
    );
    let observed: BTreeMap<_, _> = upstream
        .list_tools()
        .await?
        .iter()
        .map(|tool| tp_upstream::definition(tool, &prefix, &name))
        .collect();
    let hidden = on_drift == OnDrift::Hide;
    let written = engine
        .write("system:drift", |state| {
            let changes = state.record_drift(&name, &observed, hidden);
            let names = tp_registry::Change::tools_put(&changes);
            Ok((changes, names))
        })
        .await?;
    for tool in &written.value {
        tracing::warn!(
            executor = %name,
            tool = %tool,
            revision = written.revision,
            "drift: the MCP upstream's definition of this tool changed (or changed back); see toolplanectl tools drift"
        );
    }
    Ok(engine.read(|state| state.drifted(Some(&name)).len()).await)
}

/// Checks every `every` until `stopping`.
pub async fn run(
    engine: Arc<Engine>,
    every: Duration,
    on_drift: OnDrift,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let http = match tp_upstream::http_client("", "", "") {
        Ok(http) => http,
        Err(error) => {
            tracing::error!(%error, "drift check: no HTTP client; MCP upstreams are not checked");
            return;
        }
    };
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        check_all(&engine, &http, on_drift).await;
    }
}
