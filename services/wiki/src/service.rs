//! The gRPC `toolplane.v1.Executor` contract for the one tool `client_wiki`.
//!
//! The tenant and role come only from the trusted call context the edge sets; the role rules
//! are checked here again (defense in depth, ADR-002): `ingest` and `lint` need `collector`;
//! `query` is open to `executor` and `collector`, but only a collector may `persist_output`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tp_proto::pb::{self, executor_server::Executor, executor_server::ExecutorServer};

use crate::engine::{Source, Wiki, WikiError};
use crate::fetch::Fetcher;
use crate::keys;

type Events = Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::InvokeEvent, Status>> + Send>>;

mod answer;

use self::answer::{result, summary_text};

/// The wiki executor.
#[derive(Debug, Clone)]
pub struct WikiService {
    wiki: Wiki,
    fetcher: Fetcher,
    auth: tp_proto::invoke_auth::CallerAuth,
    /// Calls in progress per tenant (at most [`PER_TENANT`] at once).
    running: Arc<std::sync::Mutex<HashMap<String, Arc<tokio::sync::Semaphore>>>>,
    /// The incarnation each tenant's data was last seen to belong to.
    claimed: Arc<std::sync::Mutex<HashMap<String, String>>>,
}

/// Calls of one tenant the wiki serves at once; more wait (within their deadline), so one
/// tenant cannot take every slot of the executor.
const PER_TENANT: usize = 2;

/// A wiki error as a gRPC status: the code from its class (`HasErrorCode`), its message.
fn status(error: WikiError) -> Status {
    match &error {
        WikiError::Storage(storage) => tp_proto::status::error(
            tp_registry::HasErrorCode::code(&error),
            format!("wiki storage: {storage}"),
        ),
        _ => tp_proto::status::status_of(&error),
    }
}

/// The call's action and arguments, once the call is for `client_wiki`, names a valid tenant
/// and an action, and passes only that action's arguments.
fn checked(request: &pb::InvokeRequest) -> Result<(String, Value), Status> {
    if request.tool != "client_wiki" {
        return Err(tp_proto::status::error(
            tp_registry::ErrorCode::NotFound,
            format!("this executor serves client_wiki, not {:?}", request.tool),
        ));
    }
    if request.tenant.is_empty() || tp_registry::ident::check_slug(&request.tenant).is_err() {
        return Err(tp_proto::status::error(
            tp_registry::ErrorCode::InvalidArgument,
            "a valid tenant is required in the call context",
        ));
    }
    let arguments = request
        .arguments
        .as_ref()
        .map(tp_proto::json::from_struct)
        .unwrap_or(json!({}));
    let action = if request.action.is_empty() {
        str_arg(&arguments, "action").unwrap_or_default().to_owned()
    } else {
        request.action.clone()
    };
    let Some((_, allowed)) = ALLOWED.iter().find(|(name, _)| *name == action) else {
        return Err(tp_proto::status::error(
            tp_registry::ErrorCode::InvalidArgument,
            format!("action must be ingest, query, lint or synonyms (got {action:?})"),
        ));
    };
    if let Some(object) = arguments.as_object()
        && let Some(unknown) = object.keys().find(|k| !allowed.contains(&k.as_str()))
    {
        return Err(tp_proto::status::error(
            tp_registry::ErrorCode::InvalidArgument,
            format!("{action}: unknown argument {unknown:?}"),
        ));
    }
    Ok((action, arguments))
}

fn str_arg<'a>(arguments: &'a Value, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(Value::as_str)
}

const ALLOWED: &[(&str, &[&str])] = &[
    (
        "ingest",
        &[
            "action",
            "source",
            "as_of",
            "subjects",
            "doc_type",
            "cost_cap_usd",
            "model",
        ],
    ),
    (
        "query",
        &[
            "action",
            "question",
            "output_format",
            "max_pages",
            "persist_output",
            "model",
        ],
    ),
    (
        "lint",
        &["action", "scope", "publish_report", "staleness_days"],
    ),
    ("synonyms", &["action", "set"]),
];

impl WikiService {
    /// A service over a wiki, fetching URLs with `fetcher`, for callers authenticated with
    /// `auth`.
    pub fn new(
        wiki: Wiki,
        fetcher: Fetcher,
        auth: tp_proto::invoke_auth::CallerAuth,
    ) -> WikiService {
        WikiService {
            wiki,
            fetcher,
            auth,
            running: Arc::default(),
            claimed: Arc::default(),
        }
    }

    /// Makes sure the tenant's data belongs to incarnation `uid`: data of a former
    /// incarnation (a tenant deleted and created again under the same id) is deleted before
    /// the new one reads or writes anything. The mark is written before the first write (a
    /// read of a tenant with no data leaves nothing behind). Data without a mark (written
    /// before marks existed) is adopted.
    async fn claim(&self, tenant: &str, uid: &str, writing: bool) -> Result<(), Status> {
        if uid.is_empty() {
            return Ok(());
        }
        let known = self
            .claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .is_some_and(|claimed| claimed == uid);
        if known {
            return Ok(());
        }
        let storage = self.wiki.storage();
        let marker = format!("wiki/{tenant}/.tenant");
        let current = storage.get(&marker).await.map_err(|e| status(e.into()))?;
        if current.is_none()
            && !writing
            && storage
                .list(&format!("wiki/{tenant}"))
                .await
                .map_err(|e| status(e.into()))?
                .is_empty()
        {
            // A read of a tenant with no data: nothing to protect, nothing to write.
            return Ok(());
        }
        if current.as_deref() != Some(uid) {
            let lease = storage.lock(tenant).await.map_err(|e| status(e.into()))?;
            // Again under the lease: another call may have claimed it meanwhile.
            let current = storage.get(&marker).await.map_err(|e| status(e.into()))?;
            let mark = match current.as_deref() {
                Some(mark) if mark == uid => true,
                Some(former) => {
                    let deleted = storage.purge(&lease).await.map_err(|e| status(e.into()))?;
                    self.wiki.forget_index(tenant);
                    tracing::warn!(
                        tenant,
                        former,
                        deleted,
                        "deleted the data of a former incarnation of the tenant"
                    );
                    writing
                }
                // No mark: adopt data written before marks existed; mark an empty wiki only
                // when something is about to be written.
                None => {
                    writing
                        || storage
                            .list(&format!("wiki/{tenant}"))
                            .await
                            .map_err(|e| status(e.into()))?
                            .iter()
                            .any(|k| !k.ends_with("/.lock"))
                }
            };
            if mark && current.as_deref() != Some(uid) {
                storage
                    .put(&marker, uid)
                    .await
                    .map_err(|e| status(e.into()))?;
            }
            lease.release().await;
            if !mark {
                // Nothing to protect yet; ask again next time.
                return Ok(());
            }
        }
        self.claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tenant.to_owned(), uid.to_owned());
        Ok(())
    }

    /// Deletes the data of `tenant` when it belongs to incarnation `uid` (or to none, or
    /// `uid` is empty); data of a later incarnation is kept.
    pub async fn purge(&self, tenant: &str, uid: &str) -> Result<u64, Status> {
        if tp_registry::ident::check_slug(tenant).is_err() {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::InvalidArgument,
                "a valid tenant is required",
            ));
        }
        let storage = self.wiki.storage();
        let lease = storage.lock(tenant).await.map_err(|e| status(e.into()))?;
        let mark = storage
            .get(&format!("wiki/{tenant}/.tenant"))
            .await
            .map_err(|e| status(e.into()))?;
        let deleted = match mark.as_deref() {
            Some(mark) if !uid.is_empty() && mark != uid => 0,
            _ => {
                let deleted = storage.purge(&lease).await.map_err(|e| status(e.into()))?;
                self.wiki.forget_index(tenant);
                deleted
            }
        };
        lease.release().await;
        self.claimed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tenant);
        tracing::info!(tenant, deleted, "tenant data purged");
        Ok(deleted)
    }

    /// Replays the writes a killed process left half done (every tenant's journal). Runs
    /// again at [`serve`]; a second pass finds nothing to do.
    pub async fn recover(&self) {
        match self.wiki.storage().recover_all().await {
            Ok(0) => {}
            Ok(tenants) => tracing::warn!(tenants, "replayed interrupted wiki writes"),
            Err(error) => tracing::warn!(%error, "could not replay interrupted wiki writes"),
        }
    }

    fn slots(&self, tenant: &str) -> Arc<tokio::sync::Semaphore> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.len() > 4096 {
            running.retain(|_, slots| Arc::strong_count(slots) > 1);
        }
        Arc::clone(
            running
                .entry(tenant.to_owned())
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(PER_TENANT))),
        )
    }

    /// Runs one call (what `invoke` streams back as its result).
    pub async fn call(
        &self,
        request: &pb::InvokeRequest,
        progress: crate::engine::Progress<'_>,
    ) -> Result<Value, Status> {
        let (action, arguments) = checked(request)?;
        let collector = request.role == "collector";
        let tenant = request.tenant.as_str();
        let uid = request
            .tenant_context
            .as_ref()
            .map(|c| c.tenant_uid.as_str())
            .unwrap_or_default();
        // A query writes only when it persists an answer: it marks the wiki afterwards.
        let writing = match action.as_str() {
            "ingest" => true,
            "query" => false,
            "synonyms" => arguments.get("set").is_some(),
            _ => arguments
                .get("publish_report")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        };
        self.claim(tenant, uid, writing).await?;
        match action.as_str() {
            "ingest" => {
                if !collector {
                    return Err(tp_proto::status::error(
                        tp_registry::ErrorCode::PermissionDenied,
                        "ingest needs the collector role",
                    ));
                }
                let source = self.source(tenant, &arguments).await?;
                self.wiki
                    .ingest_with(tenant, source, progress)
                    .await
                    .map_err(status)
            }
            "query" => self.query(tenant, uid, &arguments, collector).await,
            "synonyms" => self.synonyms(tenant, &arguments, collector).await,
            _ => self.lint(request, &arguments, collector, progress).await,
        }
    }

    /// `query`: an answer with citations; persisted (a collector's default) as a page.
    async fn query(
        &self,
        tenant: &str,
        uid: &str,
        arguments: &Value,
        collector: bool,
    ) -> Result<Value, Status> {
        let persist = arguments
            .get("persist_output")
            .and_then(Value::as_bool)
            .unwrap_or(collector);
        if persist && !collector {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::PermissionDenied,
                "only the collector role may persist_output",
            ));
        }
        let question = str_arg(arguments, "question").ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::InvalidArgument,
                "query needs a question",
            )
        })?;
        let max_pages = arguments
            .get("max_pages")
            .and_then(Value::as_u64)
            .unwrap_or(8);
        let format = str_arg(arguments, "output_format").unwrap_or("markdown");
        let answer = self
            .wiki
            .query(
                tenant,
                question,
                usize::try_from(max_pages).unwrap_or(usize::MAX),
                format,
                persist,
            )
            .await
            .map_err(status)?;
        if !answer["persisted"].is_null() {
            self.claim(tenant, uid, true).await?;
        }
        Ok(answer)
    }

    /// `synonyms`: the tenant's table, changed first when `set` is given (collectors only).
    async fn synonyms(
        &self,
        tenant: &str,
        arguments: &Value,
        collector: bool,
    ) -> Result<Value, Status> {
        let changes = match arguments.get("set") {
            None => None,
            Some(Value::Object(changes)) => Some(changes),
            Some(_) => {
                return Err(tp_proto::status::error(
                    tp_registry::ErrorCode::InvalidArgument,
                    "set must be an object of phrase -> meaning (\"\" removes a phrase)",
                ));
            }
        };
        if changes.is_some() && !collector {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::PermissionDenied,
                "only the collector role may change the synonym table",
            ));
        }
        self.wiki
            .edit_synonyms(tenant, changes)
            .await
            .map_err(status)
    }

    /// `lint`: the tenant's findings, published as a report and posted to its webhook when
    /// asked (collectors only).
    async fn lint(
        &self,
        request: &pb::InvokeRequest,
        arguments: &Value,
        collector: bool,
        progress: crate::engine::Progress<'_>,
    ) -> Result<Value, Status> {
        let tenant = request.tenant.as_str();
        if !collector {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::PermissionDenied,
                "lint needs the collector role",
            ));
        }
        let scope = str_arg(arguments, "scope").unwrap_or("full");
        let publish = arguments
            .get("publish_report")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let staleness = arguments
            .get("staleness_days")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let mut report = self
            .wiki
            .lint_with(
                tenant,
                scope,
                publish,
                u32::try_from(staleness).unwrap_or(u32::MAX),
                progress,
            )
            .await
            .map_err(status)?;
        let webhook = request
            .tenant_context
            .as_ref()
            .map(|c| c.lint_webhook.as_str())
            .unwrap_or_default();
        if !webhook.is_empty() {
            report["webhook"] = self.post_findings(tenant, scope, webhook, &report).await;
        }
        Ok(report)
    }

    /// Posts the material findings (errors and warnings) of a lint to the tenant's webhook.
    /// A failed delivery is reported in the result, never fails the lint.
    async fn post_findings(&self, tenant: &str, scope: &str, url: &str, report: &Value) -> Value {
        let material: Vec<&Value> = report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["severity"] == "error" || f["severity"] == "warning")
            .collect();
        if material.is_empty() {
            return json!({"url": url, "delivered": false, "reason": "no material findings"});
        }
        let body = json!({
            "event": "wiki.lint",
            "tenant": tenant,
            "scope": scope,
            "findings": material,
            "report": report["report"],
        });
        match self.fetcher.post_json(url, &body).await {
            Ok(status) => {
                json!({"url": url, "delivered": (200..300).contains(&status), "status": status, "findings_sent": material.len()})
            }
            Err(error) => json!({"url": url, "delivered": false, "error": error.to_string()}),
        }
    }

    async fn source(&self, tenant: &str, arguments: &Value) -> Result<Source, Status> {
        let source = arguments.get("source").ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::InvalidArgument,
                "ingest needs a source",
            )
        })?;
        let (doc_type, cost_cap_usd) = ingest_options(arguments)?;
        let model = str_arg(arguments, "model").map(str::to_owned);
        let as_of = as_of_arg(arguments)?;
        let subjects = subjects_arg(arguments)?;
        let source = match str_arg(source, "type") {
            Some("text") => Ok(Source {
                text: str_arg(source, "text").unwrap_or_default().to_owned(),
                label: str_arg(source, "source_label")
                    .unwrap_or("untitled")
                    .to_owned(),
                origin: None,
                doc_type,
                cost_cap_usd,
                model: model.clone(),
                ..Source::default()
            }),
            Some("url") => {
                let url = str_arg(source, "url").unwrap_or_default();
                let fetched = self.fetcher.fetch(url).await.map_err(|e| {
                    tp_proto::status::error(
                        tp_registry::ErrorCode::FailedPrecondition,
                        e.to_string(),
                    )
                })?;
                Ok(Source {
                    label: fetched.title.unwrap_or_else(|| url.to_owned()),
                    text: fetched.text,
                    origin: Some(url.to_owned()),
                    doc_type,
                    cost_cap_usd,
                    model: model.clone(),
                    ..Source::default()
                })
            }
            Some("r2") => {
                let key = str_arg(source, "r2_key").unwrap_or_default();
                let (key, text) = self.stored(tenant, key).await?;
                Ok(Source {
                    text,
                    label: key.rsplit('/').next().unwrap_or("object").to_owned(),
                    origin: Some(key),
                    doc_type,
                    cost_cap_usd,
                    model: model.clone(),
                    ..Source::default()
                })
            }
            other => Err(tp_proto::status::error(
                tp_registry::ErrorCode::InvalidArgument,
                format!("source.type must be url, text or r2 (got {other:?})"),
            )),
        }?;
        Ok(Source {
            as_of,
            subjects,
            ..source
        })
    }

    /// The text of the tenant's object at `key` (confined to the tenant's folder), and the
    /// key it was read at.
    async fn stored(&self, tenant: &str, key: &str) -> Result<(String, String), Status> {
        let key = keys::confine(tenant, key).map_err(|e| {
            tp_proto::status::error(tp_registry::ErrorCode::InvalidArgument, e.to_string())
        })?;
        let text = self
            .wiki
            .storage()
            .get(&key)
            .await
            .map_err(|e| {
                tp_proto::status::error(tp_registry::ErrorCode::Unavailable, e.to_string())
            })?
            .ok_or_else(|| {
                tp_proto::status::error(
                    tp_registry::ErrorCode::NotFound,
                    format!("no object at {key}"),
                )
            })?;
        Ok((key, text))
    }
}

/// `doc_type` (one of the kinds, `auto` by default) and `cost_cap_usd` (0.01–2, 0.15 by
/// default) of an ingest.
fn ingest_options(arguments: &Value) -> Result<(String, f64), Status> {
    let doc_type = str_arg(arguments, "doc_type").unwrap_or("auto").to_owned();
    if !["article", "tweet", "transcript", "paper", "note", "auto"].contains(&doc_type.as_str()) {
        return Err(tp_proto::status::error(
            tp_registry::ErrorCode::InvalidArgument,
            format!("unknown doc_type {doc_type:?}"),
        ));
    }
    let cost_cap_usd = match arguments.get("cost_cap_usd") {
        None => 0.15,
        Some(value) => match value.as_f64() {
            Some(cap) if (0.01..=2.0).contains(&cap) => cap,
            _ => {
                return Err(tp_proto::status::error(
                    tp_registry::ErrorCode::InvalidArgument,
                    "cost_cap_usd must be a number between 0.01 and 2",
                ));
            }
        },
    };
    Ok((doc_type, cost_cap_usd))
}

/// The `as_of` argument: a calendar date `YYYY-MM-DD`.
fn as_of_arg(arguments: &Value) -> Result<Option<u32>, Status> {
    let Some(value) = arguments.get("as_of") else {
        return Ok(None);
    };
    value
        .as_str()
        .and_then(crate::text::dates::parse_iso)
        .map(Some)
        .ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::InvalidArgument,
                format!("as_of must be a calendar date written YYYY-MM-DD (got {value})"),
            )
        })
}

/// Most names in the `subjects` argument.
const MAX_SUBJECTS: usize = 10;

/// The `subjects` argument: up to ten names of 1 to 200 characters.
fn subjects_arg(arguments: &Value) -> Result<Vec<String>, Status> {
    let Some(value) = arguments.get("subjects") else {
        return Ok(Vec::new());
    };
    let names = value.as_array().ok_or_else(|| {
        tp_proto::status::error(
            tp_registry::ErrorCode::InvalidArgument,
            "subjects must be a list of names",
        )
    })?;
    if names.len() > MAX_SUBJECTS {
        return Err(tp_proto::status::error(
            tp_registry::ErrorCode::InvalidArgument,
            format!(
                "subjects may name at most {MAX_SUBJECTS} subjects (got {})",
                names.len()
            ),
        ));
    }
    names
        .iter()
        .map(|name| match name.as_str().map(str::trim) {
            Some(name) if !name.is_empty() && name.chars().count() <= 200 => Ok(name.to_owned()),
            _ => Err(tp_proto::status::error(
                tp_registry::ErrorCode::InvalidArgument,
                format!("every subject must be a name of 1 to 200 characters (got {name})"),
            )),
        })
        .collect()
}

#[tonic::async_trait]
impl Executor for WikiService {
    type InvokeStream = Events;

    async fn invoke(
        &self,
        request: Request<pb::InvokeRequest>,
    ) -> Result<Response<Self::InvokeStream>, Status> {
        self.auth.check("Invoke", &request)?;
        let request = request.into_inner();
        let budget = request
            .deadline_ms
            .checked_sub(now_ms())
            .map_or(Duration::from_secs(120), Duration::from_millis);
        let slots = self.slots(&request.tenant);
        // Events: progress of a long ingest or lint as it happens (the edge relays it to
        // clients that sent a progressToken), then the result or the error.
        let (sender, receiver) = tokio::sync::mpsc::channel(16);
        let service = self.clone();
        let started = std::time::Instant::now();
        // The work runs on a task of its own: its span is the call's child explicitly.
        let span = tracing::info_span!(
            "wiki.call",
            action = %request.action,
            tenant = %request.tenant,
        );
        tokio::spawn(async move {
            // The work is the span; the answer is sent once it has ended, so the call's span
            // (which ends when the caller has read the answer) never ends before its child.
            let event = async {
            let progress_sender = sender.clone();
            let progress = move |done: f64, total: f64, message: &str| {
                // Progress is advisory: a full channel (a slow reader) drops it.
                let _ = progress_sender.try_send(Ok(pb::InvokeEvent {
                    event: Some(pb::invoke_event::Event::Progress(pb::Progress {
                        progress: done,
                        total,
                        message: message.to_owned(),
                    })),
                }));
            };
            let work = async {
                let _slot = slots
                    .acquire()
                    .await
                    .map_err(|_| tp_proto::status::error(tp_registry::ErrorCode::Unavailable, "shutting down"))?;
                service.call(&request, &progress).await
            };
            let event = match tokio::time::timeout(budget, work).await {
                Err(_) => Err(tp_proto::status::error(tp_registry::ErrorCode::Timeout,
                    "the wiki call ran past its deadline",
                )),
                Ok(Err(status)) => Err(status),
                Ok(Ok(value)) => {
                    tracing::info!(tenant = %request.tenant, role = %request.role, action = %request.action, "client_wiki");
                    let text = summary_text(&value);
                    Ok(result(value, text))
                }
            };
            // The whole call, not only its start (which is all the gRPC layer sees of a
            // stream); actions outside the three are one label, so callers cannot grow the set.
            let action = match request.action.as_str() {
                action @ ("ingest" | "query" | "lint" | "synonyms") => action.to_owned(),
                _ => "other".to_owned(),
            };
            let code = tp_telemetry::metrics::grpc_code_name(match &event {
                Ok(_) => 0,
                Err(status) => status.code() as i32,
            });
            metrics::histogram!("tp_wiki_call_duration_seconds", "action" => action, "code" => code)
                .record(started.elapsed().as_secs_f64());
            event
            }
            .instrument(span)
            .await;
            let _ = sender.send(event).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn purge_tenant(
        &self,
        request: Request<pb::PurgeTenantRequest>,
    ) -> Result<Response<pb::PurgeTenantResponse>, Status> {
        self.auth.check("PurgeTenant", &request)?;
        let request = request.into_inner();
        let deleted = self.purge(&request.tenant, &request.tenant_uid).await?;
        Ok(Response::new(pb::PurgeTenantResponse { deleted }))
    }
}

use tp_proto::clock::now_ms;

/// Serves the wiki executor (with health) on `listener` until `shutdown`.
pub async fn serve(
    service: WikiService,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_tls(service, listener, shutdown, None).await
}

/// [`serve`], over TLS when `tls` is set.
pub async fn serve_tls(
    service: WikiService,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    tls: Option<std::sync::Arc<tp_net::tls::ReloadingTls>>,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<ExecutorServer<WikiService>>().await;
    service.recover().await;
    tonic::transport::Server::builder()
        // Every call counted and timed (tp_grpc_server_*{server="wiki"}).
        .layer(tp_telemetry::metrics::GrpcMetricsLayer::new("wiki"))
        .layer(tp_telemetry::trace::GrpcTraceLayer::new("wiki"))
        .add_service(health)
        .add_service(ExecutorServer::new(service))
        .serve_with_incoming_shutdown(
            // Connection cap, handshake and idle deadlines, TCP_NODELAY (as for every
            // Toolplane gRPC server).
            tp_net::grpc_incoming_tls(listener, &tp_net::ListenerLimits::default(), tls),
            shutdown,
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod argument_tests {
    use super::*;

    #[test]
    fn as_of_and_subjects_are_checked_by_the_wiki_too() {
        assert_eq!(as_of_arg(&json!({})).unwrap(), None);
        assert_eq!(
            as_of_arg(&json!({"as_of": "2025-07-01"})).unwrap(),
            Some(20_250_701)
        );
        for bad in [
            json!("2025-02-30"),
            json!("2025-7-1"),
            json!(20250701),
            json!(""),
        ] {
            let error = as_of_arg(&json!({ "as_of": bad })).unwrap_err();
            assert_eq!(error.code(), tonic::Code::InvalidArgument, "{bad}");
        }
        assert_eq!(
            subjects_arg(&json!({"subjects": [" Acme Corp "]})).unwrap(),
            ["Acme Corp"]
        );
        let eleven: Vec<String> = (0..11).map(|i| format!("n{i}")).collect();
        for bad in [
            json!({"subjects": eleven}),
            json!({"subjects": [""]}),
            json!({"subjects": "Acme"}),
            json!({"subjects": ["x".repeat(201)]}),
        ] {
            let error = subjects_arg(&bad).unwrap_err();
            assert_eq!(error.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }
}
