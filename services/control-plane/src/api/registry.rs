//! `toolplane.v1.Registry`: what edges call — authenticate keys, resolve registries, watch
//! the change log, report usage.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tp_proto::convert::change_pb;
use tp_proto::pb::{self, registry_server::Registry};
use tp_registry::{Change, DomainError, ObjectKind, resolve};

use super::{domain, required, status};
use crate::engine::{Engine, EngineError, now_secs};

/// Most usage records per `ReportUsage` call.
pub const MAX_USAGE_RECORDS: usize = 1000;
/// Longest audit batch id (`ReportUsageRequest.batch_id`).
pub const MAX_BATCH_ID_BYTES: usize = 64;
/// Change records read from the log per batch while replaying.
const REPLAY_BATCH: u32 = 500;

/// The edge-facing service.
#[derive(Debug, Clone)]
pub struct RegistryService {
    engine: Arc<Engine>,
    default_heartbeat_ms: u32,
    stopping: tokio::sync::watch::Receiver<bool>,
    tokens: Arc<crate::oidc::TokenVerifier>,
    vault: Option<crate::vault::Vault>,
}

impl RegistryService {
    /// Serves the engine to edges. `Watch` streams end when `stopping` turns true, so a
    /// graceful shutdown does not wait forever for edges that never hang up.
    pub fn new(
        engine: Arc<Engine>,
        default_heartbeat_ms: u32,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        Self {
            engine,
            default_heartbeat_ms,
            stopping,
            tokens: Arc::new(crate::oidc::TokenVerifier::new(Duration::from_secs(30))),
            vault: None,
        }
    }

    /// Verifies access tokens with `tokens` (its key-refetch interval).
    pub fn with_tokens(mut self, tokens: crate::oidc::TokenVerifier) -> Self {
        self.tokens = Arc::new(tokens);
        self
    }

    /// Opens connections' credentials for `GetCredential` with `vault`.
    pub fn with_vault(mut self, vault: Option<crate::vault::Vault>) -> Self {
        self.vault = vault;
        self
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;

/// Resolves the tenant of changes that carry no object (deletes of keys and tenants).
pub(crate) fn tenant_of(change: &Change) -> Option<String> {
    match change {
        Change::Delete {
            kind: ObjectKind::Tenant,
            key,
        } => Some(key.clone()),
        Change::Delete {
            kind: ObjectKind::Connection,
            key,
        } => key.split_once('/').map(|(tenant, _)| tenant.to_owned()),
        Change::Delete { .. } | Change::Put { .. } => None,
    }
}

#[tonic::async_trait]
impl Registry for RegistryService {
    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::Identity>, Status> {
        let pb::AuthenticateRequest { key, resource } = request.into_inner();
        let refused = || {
            tp_proto::status::error(
                tp_registry::ErrorCode::Unauthenticated,
                "invalid, revoked or expired API key or access token",
            )
        };
        if tp_proto::keys::looks_like_jwt(&key) {
            return match self.tokens.verify(&key, &resource, &self.engine).await {
                Ok(caller) => Ok(Response::new(pb::Identity {
                    tenant: caller.tenant,
                    role: caller.role,
                    key_id: caller.subject,
                    expires_at: caller.expires_at,
                    revision: caller.revision,
                    confirmed_at_ms: 0,
                    providers: caller
                        .providers
                        .map(|providers| pb::ProviderScopes { providers }),
                })),
                Err(crate::oidc::TokenError::Keys(error)) => {
                    // The provider is down or misconfigured: not the caller's fault, and not
                    // a reason for edges to remember the token as refused.
                    tracing::warn!(%error, "cannot verify an access token");
                    Err(tp_proto::status::error(
                        tp_registry::ErrorCode::Unavailable,
                        "cannot fetch the token issuer's signing keys right now",
                    ))
                }
                Err(error) => {
                    tracing::debug!(%error, "access token refused");
                    Err(refused())
                }
            };
        }
        if !tp_proto::keys::looks_like_key(&key) {
            return Err(refused());
        }
        let digest = tp_proto::keys::hash(&key);
        let now = now_secs();
        let identity = self
            .engine
            .read(|state| {
                state.authenticate(&digest, now).map(|record| pb::Identity {
                    confirmed_at_ms: 0,
                    tenant: record.tenant.clone(),
                    role: record.role.clone(),
                    key_id: record.id.clone(),
                    expires_at: record.expires_at.unwrap_or(0),
                    revision: state.revision,
                    providers: None,
                })
            })
            .await;
        identity.map(Response::new).ok_or_else(refused)
    }

    async fn resolve_registry(
        &self,
        request: Request<pb::ResolveRegistryRequest>,
    ) -> Result<Response<pb::ResolvedRegistry>, Status> {
        let request = request.into_inner();
        required("tenant", &request.tenant)?;
        required("role", &request.role)?;
        let registry = self
            .engine
            .read(|state| {
                let tenant = state.tenant(&request.tenant)?;
                let tools = resolve(&state.tools, tenant, &request.role);
                let mut executor_names: Vec<&str> =
                    tools.iter().map(|t| t.executor.as_str()).collect();
                executor_names.sort_unstable();
                executor_names.dedup();
                Ok::<_, DomainError>(pb::ResolvedRegistry {
                    tenant: tenant.id.clone(),
                    role: request.role.clone(),
                    revision: state.revision,
                    tools: tools.iter().map(pb::ResolvedTool::from).collect(),
                    executors: executor_names
                        .iter()
                        .filter_map(|name| state.executors.get(*name))
                        .map(pb::ExecutorInfo::from)
                        .collect(),
                    disclosure: Some((&tenant.disclosure).into()),
                    rate_limit_per_minute: tenant.rate_limit_per_minute,
                    catalogue_size: u32::try_from(state.live_tool_count()).unwrap_or(u32::MAX),
                    lint_webhook: tenant.lint_webhook.clone().unwrap_or_default(),
                    tenant_uid: tenant.uid.clone(),
                    // The rules of this role, for tools it sees.
                    approvals: tenant
                        .approvals
                        .iter()
                        .filter(|rule| {
                            (rule.roles.is_empty() || rule.roles.contains(&request.role))
                                && tools.iter().any(|t| t.name == rule.tool)
                        })
                        .map(pb::ApprovalRule::from)
                        .collect(),
                    connections: super::connections::connected_providers(state, tenant),
                })
            })
            .await
            .map_err(domain)?;
        Ok(Response::new(registry))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let request = request.into_inner();
        let heartbeat_ms = match request.heartbeat_ms {
            0 => self.default_heartbeat_ms,
            n if (100..=60_000).contains(&n) => n,
            n => {
                return Err(domain(DomainError::invalid(
                    "heartbeat_ms",
                    format!("must be 0 (default) or between 100 and 60000 (got {n})"),
                )));
            }
        };
        // Subscribe before reading the log so no commit falls between the two.
        let notifications = self.engine.subscribe();
        let head = self.engine.revision().await;
        if request.since_revision > head {
            return Err(tp_proto::status::revision_ahead(format!(
                "since_revision {} is ahead of the control plane's revision {head}; drop cached state and watch from 0 or {head}",
                request.since_revision
            )));
        }
        let (sender, receiver) = mpsc::channel(256);
        let engine = Arc::clone(&self.engine);
        tokio::spawn(stream_changes(
            engine,
            request.since_revision,
            Duration::from_millis(u64::from(heartbeat_ms)),
            notifications,
            sender,
            self.stopping.clone(),
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn get_credential(
        &self,
        request: Request<pb::GetCredentialRequest>,
    ) -> Result<Response<pb::Credential>, Status> {
        // Credentials go to edges only: the admin token, accepted on this service for
        // debugging, must not turn into a way to read them.
        if request.extensions().get::<crate::auth::MatchedToken>()
            != Some(&crate::auth::MatchedToken(0))
        {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::PermissionDenied,
                "GetCredential takes the edge token: tenants' credentials are handed to edges only, never to an operator",
            ));
        }
        super::connections::credential(&self.engine, self.vault.as_ref(), request.into_inner())
            .await
            .map(Response::new)
    }

    async fn report_usage(
        &self,
        request: Request<pb::ReportUsageRequest>,
    ) -> Result<Response<pb::ReportUsageResponse>, Status> {
        let pb::ReportUsageRequest {
            records,
            shed,
            edge,
            batch_id,
        } = request.into_inner();
        if batch_id.len() > MAX_BATCH_ID_BYTES || !batch_id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(domain(DomainError::invalid(
                "batch_id",
                format!("at most {MAX_BATCH_ID_BYTES} printable ASCII characters"),
            )));
        }
        if records.len() > MAX_USAGE_RECORDS {
            return Err(domain(DomainError::invalid(
                "records",
                format!(
                    "at most {MAX_USAGE_RECORDS} per call (got {})",
                    records.len()
                ),
            )));
        }
        if edge.len() > super::audit::MAX_FIELD_BYTES {
            return Err(domain(DomainError::invalid(
                "edge",
                format!("at most {} bytes", super::audit::MAX_FIELD_BYTES),
            )));
        }
        // The whole batch or nothing: a bad record refuses the call before anything is kept.
        let calls = records
            .into_iter()
            .filter(|r| !r.tenant.is_empty() && !r.tool.is_empty())
            .enumerate()
            .map(|(index, record)| super::audit::call_record(index, record))
            .collect::<Result<Vec<_>, _>>()
            .map_err(domain)?;
        let stored = self
            .engine
            .store()
            .record_calls(&tp_store::CallBatch {
                id: &batch_id,
                edge: &edge,
                shed,
                calls: &calls,
                received_ms: crate::engine::now_ms(),
            })
            .await
            .map_err(|e| status(EngineError::Store(e)))?;
        if !stored {
            tracing::info!(edge = %edge, batch_id = %batch_id, "an edge resent an audit batch already stored (its acknowledgement was lost); not stored again");
            ::metrics::counter!("tp_cp_audit_duplicate_batches_total").increment(1);
            return Ok(Response::new(pb::ReportUsageResponse {
                accepted: 0,
                duplicate: true,
            }));
        }
        if shed > 0 {
            tracing::warn!(edge = %edge, shed, "an edge shed audit records before it could deliver them");
            ::metrics::counter!("tp_cp_audit_shed_total").increment(shed);
        }
        ::metrics::counter!("tp_cp_audit_records_total").increment(calls.len() as u64);
        Ok(Response::new(pb::ReportUsageResponse {
            accepted: u32::try_from(calls.len()).unwrap_or(u32::MAX),
            duplicate: false,
        }))
    }
}

/// Replays the log after `since`, then follows new commits, with heartbeats, until the client
/// goes away. Each revision is sent exactly once, in order.
async fn stream_changes(
    engine: Arc<Engine>,
    since: u64,
    heartbeat: Duration,
    mut notifications: broadcast::Receiver<u64>,
    sender: mpsc::Sender<Result<pb::WatchEvent, Status>>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut last = since;
    let mut ticker = tokio::time::interval(heartbeat);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Shutdown started before this stream did: `changed` would never fire.
    let already_stopping = *stopping.borrow_and_update();
    if already_stopping {
        return;
    }
    loop {
        // Send everything committed after `last`.
        loop {
            let records = match engine.store().changes_since(last, REPLAY_BATCH).await {
                Ok(records) => records,
                Err(error) => {
                    let _ = sender.send(Err(status(EngineError::Store(error)))).await;
                    return;
                }
            };
            let full = records.len() == REPLAY_BATCH as usize;
            for record in records {
                let event = pb::WatchEvent {
                    event: Some(pb::watch_event::Event::Change(change_pb(
                        record.revision,
                        record.at_ms,
                        &record.author,
                        &record.changes,
                        tenant_of,
                    ))),
                };
                if sender.send(Ok(event)).await.is_err() {
                    return;
                }
                last = record.revision;
            }
            if !full {
                break;
            }
        }
        tokio::select! {
            _ = stopping.changed() => {
                // Edges reconnect (to another replica, or to this one after a restart) and
                // resume from their last revision.
                let _ = sender.send(Err(tp_proto::status::error(tp_registry::ErrorCode::Unavailable, "the control plane is shutting down"))).await;
                return;
            }
            _ = ticker.tick() => {
                let revision = engine.revision().await.max(last);
                let beat = pb::WatchEvent { event: Some(pb::watch_event::Event::Heartbeat(pb::Heartbeat { revision })) };
                if sender.send(Ok(beat)).await.is_err() {
                    return;
                }
            }
            notified = notifications.recv() => match notified {
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = sender.closed() => return,
        }
    }
}
