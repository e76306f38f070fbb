//! `toolplane.v1.Tenants`: tenants, API keys and registry previews.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tp_proto::convert::{operator_fields_changed, patch_tenant, try_tenant};
use tp_proto::keys::{KEY_PREFIX, hash};
use tp_proto::pb::{self, tenants_server::Tenants};
use tp_registry::{AdminScope, ApiKey, DomainError, ErrorCode, resolve};

use super::{domain, required, status};
use crate::admin_auth::{author, caller, check_tenant};
use crate::engine::{Engine, now_secs};

/// Longest key lifetime that can be requested (10 years).
pub const MAX_KEY_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;

/// The `Tenants` gRPC service: tenants, keys, connections and registry previews.
#[derive(Debug, Clone)]
pub struct TenantsService {
    engine: Arc<Engine>,
    purges: Arc<crate::purge::Purges>,
    vault: Option<crate::vault::Vault>,
    connector: Option<Arc<crate::provider_oauth::Connector>>,
}

impl TenantsService {
    /// Serves the engine's tenants; deletions are purged from executors by `purges`.
    pub fn new(engine: Arc<Engine>, purges: Arc<crate::purge::Purges>) -> Self {
        Self {
            engine,
            purges,
            vault: None,
            connector: None,
        }
    }

    /// Starts OAuth connections with `connector` (without one, `BeginConnect` is refused).
    pub fn with_connector(
        mut self,
        connector: Option<Arc<crate::provider_oauth::Connector>>,
    ) -> Self {
        self.connector = connector;
        self
    }

    /// Seals connections' credentials with `vault` (without one, connecting is refused).
    pub fn with_vault(mut self, vault: Option<crate::vault::Vault>) -> Self {
        self.vault = vault;
        self
    }

    async fn tenant(&self, id: &str) -> Result<pb::Tenant, Status> {
        self.engine
            .read(|state| state.tenant(id).map(pb::Tenant::from))
            .await
            .map_err(domain)
    }
}

/// A new secret key and its record fields: 256 random bits, hex, with the `tpk_` prefix.
pub fn generate_key() -> (String, String) {
    let secret: [u8; 32] = rand::random();
    let id: [u8; 8] = rand::random();
    (
        format!("{KEY_PREFIX}{}", hex::encode(secret)),
        format!("key_{}", hex::encode(id)),
    )
}

#[tonic::async_trait]
impl Tenants for TenantsService {
    async fn connect_provider(
        &self,
        request: Request<pb::ConnectProviderRequest>,
    ) -> Result<Response<pb::Connection>, Status> {
        let (author, who) = (author(&request), caller(&request));
        let request = request.into_inner();
        super::connections::connect(&self.engine, self.vault.as_ref(), &author, &who, request)
            .await
            .map(Response::new)
    }

    async fn disconnect_provider(
        &self,
        request: Request<pb::DisconnectProviderRequest>,
    ) -> Result<Response<pb::DisconnectProviderResponse>, Status> {
        let (author, who) = (author(&request), caller(&request));
        let request = request.into_inner();
        super::connections::disconnect(&self.engine, &author, &who, request)
            .await
            .map(Response::new)
    }

    async fn begin_connect(
        &self,
        request: Request<pb::BeginConnectRequest>,
    ) -> Result<Response<pb::BeginConnectResponse>, Status> {
        let (author, who) = (author(&request), caller(&request));
        super::connections::begin(
            self.connector.as_deref(),
            &author,
            &who,
            request.into_inner(),
        )
        .await
        .map(Response::new)
    }

    async fn list_connections(
        &self,
        request: Request<pb::ListConnectionsRequest>,
    ) -> Result<Response<pb::ListConnectionsResponse>, Status> {
        let who = caller(&request);
        super::connections::list(&self.engine, &who, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn create_tenant(
        &self,
        request: Request<pb::CreateTenantRequest>,
    ) -> Result<Response<pb::Tenant>, Status> {
        let author = author(&request);
        let mut tenant = try_tenant(request.into_inner().tenant).map_err(domain)?;
        // A fresh incarnation: executors keep data per (tenant, uid), so a tenant deleted and
        // created again never reads what its predecessor left.
        let uid: [u8; 12] = rand::random();
        tenant.uid = hex::encode(uid);
        let id = tenant.id.clone();
        self.engine
            .write(&author, |state| {
                Ok((state.create_tenant(tenant.clone())?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.tenant(&id).await?))
    }

    async fn update_tenant(
        &self,
        request: Request<pb::UpdateTenantRequest>,
    ) -> Result<Response<pb::Tenant>, Status> {
        let author = author(&request);
        let who = caller(&request);
        let request = request.into_inner();
        let submitted = request
            .tenant
            .ok_or_else(|| domain(DomainError::invalid("tenant", "is required")))?;
        required("tenant.id", &submitted.id)?;
        check_tenant(&who, &submitted.id)?;
        let id = submitted.id.clone();
        let mask = request.update_mask;
        self.engine
            .write(&author, |state| {
                let existing = state.tenant(&id)?;
                if submitted.revision != 0 && submitted.revision != existing.revision {
                    return Err(DomainError::precondition(
                        "TENANT_CHANGED",
                        format!("tenants/{id}"),
                        format!(
                            "tenant {id:?} changed since it was read (revision {} there, {} now): read it again",
                            submitted.revision, existing.revision
                        ),
                    ));
                }
                let tenant = patch_tenant(existing, submitted.clone(), mask.as_ref())?;
                if who.scope == AdminScope::TenantAdmin {
                    let changed = operator_fields_changed(existing, &tenant);
                    if !changed.is_empty() {
                        return Err(DomainError::new(
                            ErrorCode::PermissionDenied,
                            format!(
                                "{} of tenant {id:?} can be changed by an operator (a full admin token) only; admin token {} may change display_name, disclosure and lint_webhook",
                                changed.join(", "),
                                who.name
                            ),
                        ));
                    }
                }
                Ok((state.update_tenant(tenant)?, ()))
            })
            .await
            .map_err(status)?;
        Ok(Response::new(self.tenant(&id).await?))
    }

    async fn get_tenant(
        &self,
        request: Request<pb::GetTenantRequest>,
    ) -> Result<Response<pb::Tenant>, Status> {
        let who = caller(&request);
        let request = request.into_inner();
        required("id", &request.id)?;
        check_tenant(&who, &request.id)?;
        Ok(Response::new(self.tenant(&request.id).await?))
    }

    async fn list_tenants(
        &self,
        request: Request<pb::ListTenantsRequest>,
    ) -> Result<Response<pb::ListTenantsResponse>, Status> {
        let who = caller(&request);
        let tenants = self
            .engine
            .read(|state| {
                state
                    .tenants
                    .values()
                    .filter(|t| who.may_manage(&t.id))
                    .map(pb::Tenant::from)
                    .collect()
            })
            .await;
        Ok(Response::new(pb::ListTenantsResponse { tenants }))
    }

    async fn delete_tenant(
        &self,
        request: Request<pb::DeleteTenantRequest>,
    ) -> Result<Response<pb::DeleteTenantResponse>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("id", &request.id)?;
        let written = self
            .engine
            .write(&author, |state| {
                let uid = state.tenant(&request.id)?.uid.clone();
                let executors: Vec<(String, String)> = state
                    .executors
                    .values()
                    .filter(|e| e.protocol == tp_registry::ExecutorProtocol::Grpc)
                    .map(|e| (e.name.clone(), e.endpoint.clone()))
                    .collect();
                let changes = state.delete_tenant(&request.id)?;
                let keys = changes.len().saturating_sub(1);
                Ok((changes, (keys, uid, executors)))
            })
            .await
            .map_err(status)?;
        let (keys, uid, executors) = written.value;
        // What executors keep for the tenant goes too (retried until each has answered).
        self.purges.enqueue(&request.id, &uid, executors).await;
        Ok(Response::new(pb::DeleteTenantResponse {
            revision: written.revision,
            keys_deleted: u32::try_from(keys).unwrap_or(u32::MAX),
        }))
    }

    async fn issue_api_key(
        &self,
        request: Request<pb::IssueApiKeyRequest>,
    ) -> Result<Response<pb::IssueApiKeyResponse>, Status> {
        let author = author(&request);
        let who = caller(&request);
        let request = request.into_inner();
        required("tenant", &request.tenant)?;
        check_tenant(&who, &request.tenant)?;
        required("role", &request.role)?;
        if request.ttl_seconds > MAX_KEY_TTL_SECONDS {
            return Err(domain(DomainError::invalid(
                "ttl_seconds",
                format!("must be at most {MAX_KEY_TTL_SECONDS} (10 years)"),
            )));
        }
        let now = now_secs();
        let (secret, id) = generate_key();
        let record = ApiKey {
            id,
            tenant: request.tenant,
            role: request.role,
            hash: hash(&secret),
            label: request.label,
            created_at: now,
            expires_at: (request.ttl_seconds > 0).then(|| now + request.ttl_seconds),
            revoked_at: None,
        };
        self.engine
            .write(&author, |state| {
                Ok((state.issue_key(record.clone(), now)?, ()))
            })
            .await
            .map_err(status)?;
        tracing::info!(key_id = %record.id, tenant = %record.tenant, role = %record.role, "api key issued");
        Ok(Response::new(pb::IssueApiKeyResponse {
            key: secret,
            info: Some((&record).into()),
        }))
    }

    async fn list_api_keys(
        &self,
        request: Request<pb::ListApiKeysRequest>,
    ) -> Result<Response<pb::ListApiKeysResponse>, Status> {
        let who = caller(&request);
        let request = request.into_inner();
        if !request.tenant.is_empty() {
            check_tenant(&who, &request.tenant)?;
        }
        let keys = self
            .engine
            .read(|state| {
                if !request.tenant.is_empty() {
                    state.tenant(&request.tenant)?;
                }
                Ok::<_, DomainError>(
                    state
                        .keys
                        .values()
                        .filter(|key| request.tenant.is_empty() || key.tenant == request.tenant)
                        .filter(|key| who.may_manage(&key.tenant))
                        .map(pb::ApiKeyInfo::from)
                        .collect(),
                )
            })
            .await
            .map_err(domain)?;
        Ok(Response::new(pb::ListApiKeysResponse { keys }))
    }

    async fn revoke_api_key(
        &self,
        request: Request<pb::RevokeApiKeyRequest>,
    ) -> Result<Response<pb::ApiKeyInfo>, Status> {
        let author = author(&request);
        let who = caller(&request);
        let request = request.into_inner();
        required("id", &request.id)?;
        // Another tenant's key is answered exactly like a key that does not exist: the answer
        // must not tell a tenant admin which key ids exist elsewhere.
        let owner = self
            .engine
            .read(|state| state.keys.get(&request.id).map(|k| k.tenant.clone()))
            .await;
        if owner.is_none_or(|owner| !who.may_manage(&owner)) {
            return Err(domain(DomainError::not_found("api key", &request.id)));
        }
        let now = now_secs();
        self.engine
            .write(&author, |state| {
                Ok((state.revoke_key(&request.id, now)?, ()))
            })
            .await
            .map_err(status)?;
        tracing::info!(key_id = %request.id, "api key revoked");
        let info = self
            .engine
            .read(|state| state.keys.get(&request.id).map(pb::ApiKeyInfo::from))
            .await;
        info.map(Response::new).ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::Internal,
                "key vanished after revocation",
            )
        })
    }

    async fn preview_registry(
        &self,
        request: Request<pb::PreviewRegistryRequest>,
    ) -> Result<Response<pb::PreviewRegistryResponse>, Status> {
        let who = caller(&request);
        let request = request.into_inner();
        required("tenant", &request.tenant)?;
        check_tenant(&who, &request.tenant)?;
        required("role", &request.role)?;
        let response = self
            .engine
            .read(|state| {
                let tenant = state.tenant(&request.tenant)?;
                if !state.roles.contains_key(&request.role) {
                    return Err(DomainError::invalid(
                        "role",
                        format!("unknown role {:?}", request.role),
                    ));
                }
                Ok(pb::PreviewRegistryResponse {
                    revision: state.revision,
                    tools: resolve(&state.tools, tenant, &request.role)
                        .iter()
                        .map(pb::ResolvedTool::from)
                        .collect(),
                })
            })
            .await
            .map_err(domain)?;
        Ok(Response::new(response))
    }
}
