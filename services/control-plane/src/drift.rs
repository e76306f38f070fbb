//! Drift of MCP upstreams: the control plane fetches the tool list of every executor with
//! `protocol: mcp` (at start, every `lifecycle.drift_check_secs`, and at once when the upstream
//! announces `notifications/tools/list_changed` — on a 2026-07-28 `subscriptions/listen`
//! stream, or on a 2025-11-25 session's stream) and records, on each
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
    /// The MCP executor whose upstream was listed.
    pub executor: String,
    /// Its tools the catalogue holds whose upstream definition differs, after the check.
    pub drifted: usize,
    /// Why the upstream could not be listed, if it could not.
    pub error: Option<String>,
}

/// The catalogue's executors with `protocol: mcp`.
async fn mcp_executors(engine: &Engine) -> Vec<tp_registry::Executor> {
    engine
        .read(|state| {
            state
                .executors
                .values()
                .filter(|e| e.protocol == ExecutorProtocol::Mcp)
                .cloned()
                .collect()
        })
        .await
}

/// Lists every MCP upstream once and records what differs; returns one line per upstream.
pub async fn check_all(engine: &Engine, http: &reqwest::Client, on_drift: OnDrift) -> Vec<Checked> {
    let executors = mcp_executors(engine).await;
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

/// How often the set of listened-to upstreams follows the catalogue's executors, and the
/// longest wait before listening again to an upstream whose stream ended.
const LISTEN_REFRESH: Duration = Duration::from_secs(2);

/// Checks every `every`, and one upstream at once when it announces that its tools changed,
/// until `stopping`.
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
    let mut refresh = tokio::time::interval(LISTEN_REFRESH);
    let mut listeners = BTreeMap::new();
    loop {
        // What woke the loop, decided before anything is awaited (the stop signal's guard is
        // not Send).
        let check = tokio::select! {
            _ = ticker.tick() => Some(true),
            _ = refresh.tick() => Some(false),
            _ = stopping.wait_for(|stop| *stop) => None,
        };
        match check {
            Some(true) => {
                check_all(&engine, &http, on_drift).await;
            }
            Some(false) => listen_all(&engine, &http, on_drift, &mut listeners).await,
            None => break,
        }
    }
    for (_, (_, task)) in listeners {
        task.abort();
    }
}

/// One listener task per MCP executor, keyed by the executor's settings: a changed or deleted
/// executor's listener stops, a new one starts.
type Listeners = BTreeMap<String, (String, tokio::task::JoinHandle<()>)>;

async fn listen_all(
    engine: &Arc<Engine>,
    http: &reqwest::Client,
    on_drift: OnDrift,
    listeners: &mut Listeners,
) {
    let executors: Vec<_> = mcp_executors(engine)
        .await
        .into_iter()
        .map(|e| (serde_json::to_string(&e).unwrap_or_default(), e))
        .collect();
    listeners.retain(|name, (settings, task)| {
        let current = executors
            .iter()
            .any(|(s, e)| &e.name == name && s == settings);
        if !current {
            task.abort();
        }
        current
    });
    for (settings, executor) in executors {
        if listeners.contains_key(&executor.name) {
            continue;
        }
        let task = tokio::spawn(listen_one(
            Arc::clone(engine),
            http.clone(),
            executor.clone(),
            on_drift,
        ));
        listeners.insert(executor.name, (settings, task));
    }
}

/// Listens to one upstream's tool-list announcements (`notifications/tools/list_changed`) and
/// checks it at each one; listens again when the stream ends, until aborted.
async fn listen_one(
    engine: Arc<Engine>,
    http: reqwest::Client,
    executor: tp_registry::Executor,
    on_drift: OnDrift,
) {
    let name = executor.name.clone();
    // An upstream that cannot be listened to (down, or without subscriptions) is tried again
    // less and less often, up to once an hour; the periodic check covers it meanwhile.
    let mut pause = LISTEN_REFRESH;
    loop {
        let upstream = tp_upstream::Upstream::new(
            executor.clone(),
            tp_upstream::DEFAULT_CREDENTIAL_ENV_PREFIX,
            http.clone(),
        );
        match upstream.tool_changes().await {
            Ok(mut changes) => {
                tracing::debug!(executor = %name, "listening for the MCP upstream's tool-list changes");
                pause = LISTEN_REFRESH;
                while changes.next().await {
                    ::metrics::counter!("tp_cp_upstream_list_changed_total", "executor" => name.clone())
                        .increment(1);
                    tracing::info!(executor = %name, "the MCP upstream announced a tool-list change: checking it now");
                    if let Err(error) = check_one(&engine, &http, executor.clone(), on_drift).await
                    {
                        tracing::warn!(executor = %name, error = %format!("{error:#}"), "drift check after list_changed failed; the periodic check will retry");
                    }
                }
            }
            Err(error) => {
                tracing::debug!(executor = %name, %error, "cannot listen to the MCP upstream; the periodic check still runs");
                pause = (pause * 2).min(Duration::from_secs(3600));
            }
        }
        tokio::time::sleep(pause).await;
    }
}
