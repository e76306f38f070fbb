//! `toolplane.v1.Admins`: admin tokens (issue, list, revoke), `WhoAmI`, and the change log
//! with the author of every write.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tp_proto::convert::change_pb;
use tp_proto::pb::{self, admins_server::Admins};
use tp_registry::{AdminCaller, AdminScope, AdminToken, DomainError};

use super::{domain, required, status};
use crate::admin_auth::{author, caller};
use crate::engine::{Engine, EngineError, now_secs};

/// Prefix of admin token secrets (API keys have `tpk_`).
pub const ADMIN_TOKEN_PREFIX: &str = "tpa_";
/// Changes per page unless asked otherwise.
const DEFAULT_PAGE_SIZE: u32 = 100;
/// Most changes per page.
const MAX_PAGE_SIZE: u32 = 1000;
/// Longest admin token lifetime: ten years.
const MAX_TTL_SECONDS: u64 = 10 * 365 * 86_400;

fn scope_pb(scope: AdminScope) -> pb::AdminScope {
    match scope {
        AdminScope::ReadOnly => pb::AdminScope::ReadOnly,
        AdminScope::TenantAdmin => pb::AdminScope::TenantAdmin,
        AdminScope::Full => pb::AdminScope::Full,
    }
}

fn try_scope(value: i32) -> Result<AdminScope, DomainError> {
    match pb::AdminScope::try_from(value) {
        Ok(pb::AdminScope::ReadOnly) => Ok(AdminScope::ReadOnly),
        Ok(pb::AdminScope::TenantAdmin) => Ok(AdminScope::TenantAdmin),
        Ok(pb::AdminScope::Full) => Ok(AdminScope::Full),
        Ok(pb::AdminScope::Unspecified) => Err(DomainError::invalid(
            "scope",
            "is required: ADMIN_SCOPE_READ_ONLY, ADMIN_SCOPE_TENANT_ADMIN or ADMIN_SCOPE_FULL",
        )),
        Err(_) => Err(DomainError::invalid(
            "scope",
            format!("unknown value {value}"),
        )),
    }
}

fn info(token: &AdminToken) -> pb::AdminTokenInfo {
    pb::AdminTokenInfo {
        id: token.id.clone(),
        label: token.label.clone(),
        scope: scope_pb(token.scope) as i32,
        tenants: token.tenants.clone(),
        created_at: token.created_at,
        created_by: token.created_by.clone(),
        expires_at: token.expires_at.unwrap_or(0),
        revoked_at: token.revoked_at.unwrap_or(0),
    }
}

/// A new admin token: (secret, id).
fn generate_token() -> (String, String) {
    let secret: [u8; 32] = rand::random();
    let id: [u8; 8] = rand::random();
    (
        format!("{ADMIN_TOKEN_PREFIX}{}", hex::encode(secret)),
        format!("adm_{}", hex::encode(id)),
    )
}

/// The admin identities service.
#[derive(Debug, Clone)]
pub struct AdminsService {
    engine: Arc<Engine>,
}

impl AdminsService {
    /// Serves the engine.
    pub fn new(engine: Arc<Engine>) -> AdminsService {
        AdminsService { engine }
    }
}

#[tonic::async_trait]
impl Admins for AdminsService {
    async fn issue_admin_token(
        &self,
        request: Request<pb::IssueAdminTokenRequest>,
    ) -> Result<Response<pb::IssueAdminTokenResponse>, Status> {
        let author = author(&request);
        let issuer = caller(&request);
        let request = request.into_inner();
        let scope = try_scope(request.scope).map_err(domain)?;
        let now = now_secs();
        if request.expires_at > now.saturating_add(MAX_TTL_SECONDS) {
            return Err(domain(DomainError::invalid(
                "expires_at",
                "must be within ten years",
            )));
        }
        let (secret, id) = generate_token();
        let token = AdminToken {
            id,
            hash: tp_proto::keys::hash(&secret),
            label: request.label,
            scope,
            tenants: request.tenants,
            created_at: now,
            created_by: issuer.name,
            expires_at: (request.expires_at > 0).then_some(request.expires_at),
            revoked_at: None,
        };
        self.engine
            .write(&author, |state| {
                Ok((state.issue_admin_token(token.clone(), now)?, ()))
            })
            .await
            .map_err(status)?;
        tracing::info!(token = %token.id, scope = token.scope.as_str(), by = %token.created_by, "admin token issued");
        Ok(Response::new(pb::IssueAdminTokenResponse {
            token: secret,
            info: Some(info(&token)),
        }))
    }

    async fn list_admin_tokens(
        &self,
        _request: Request<pb::ListAdminTokensRequest>,
    ) -> Result<Response<pb::ListAdminTokensResponse>, Status> {
        let tokens = self
            .engine
            .read(|state| state.admin_tokens.values().map(info).collect())
            .await;
        Ok(Response::new(pb::ListAdminTokensResponse { tokens }))
    }

    async fn revoke_admin_token(
        &self,
        request: Request<pb::RevokeAdminTokenRequest>,
    ) -> Result<Response<pb::AdminTokenInfo>, Status> {
        let author = author(&request);
        let request = request.into_inner();
        required("id", &request.id)?;
        let now = now_secs();
        self.engine
            .write(&author, |state| {
                Ok((state.revoke_admin_token(&request.id, now)?, ()))
            })
            .await
            .map_err(status)?;
        tracing::info!(token = %request.id, "admin token revoked");
        self.engine
            .read(|state| state.admin_tokens.get(&request.id).map(info))
            .await
            .map(Response::new)
            .ok_or_else(|| {
                tp_proto::status::error(
                    tp_registry::ErrorCode::Internal,
                    "admin token vanished after revocation",
                )
            })
    }

    async fn who_am_i(
        &self,
        request: Request<pb::WhoAmIRequest>,
    ) -> Result<Response<pb::AdminIdentity>, Status> {
        let AdminCaller {
            name,
            scope,
            tenants,
        } = caller(&request);
        Ok(Response::new(pb::AdminIdentity {
            name,
            scope: scope_pb(scope) as i32,
            tenants,
        }))
    }

    async fn list_changes(
        &self,
        request: Request<pb::ListChangesRequest>,
    ) -> Result<Response<pb::ListChangesResponse>, Status> {
        let who = caller(&request);
        let request = request.into_inner();
        let page_size = super::page_size(request.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
            .map_err(domain)?;
        let records = self
            .engine
            .store()
            .changes_since(request.since_revision, page_size)
            .await
            .map_err(|e| status(EngineError::Store(e)))?;
        let next_since_revision = if records.len() == page_size as usize {
            records.last().map_or(0, |r| r.revision)
        } else {
            0
        };
        let changes = records
            .iter()
            .filter(|record| request.author.is_empty() || record.author == request.author)
            .filter_map(|record| {
                let mut change = change_pb(
                    record.revision,
                    record.at_ms,
                    &record.author,
                    &record.changes,
                    super::registry::tenant_of,
                );
                // A tenant admin sees the changes about its tenants, and nothing else.
                if !who.sees_every_tenant() {
                    change
                        .items
                        .retain(|item| !item.tenant.is_empty() && who.may_manage(&item.tenant));
                    if change.items.is_empty() {
                        return None;
                    }
                }
                Some(change)
            })
            .collect();
        Ok(Response::new(pb::ListChangesResponse {
            changes,
            next_since_revision,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_and_the_zero_value_is_refused() {
        for scope in [
            AdminScope::ReadOnly,
            AdminScope::TenantAdmin,
            AdminScope::Full,
        ] {
            assert_eq!(try_scope(scope_pb(scope) as i32).unwrap(), scope);
        }
        for bad in [0, 9] {
            assert_eq!(try_scope(bad).unwrap_err().violations[0].field, "scope");
        }
        let (secret, id) = generate_token();
        assert!(secret.starts_with(ADMIN_TOKEN_PREFIX) && secret.len() == 68);
        assert!(id.starts_with("adm_") && id.len() == 20);
    }
}
