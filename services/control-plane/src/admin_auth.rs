//! Who may call the admin API: a tower layer in front of every admin service that
//! authenticates the bearer token — the configured admin token (the bootstrap identity,
//! `admin`, scope full), an issued admin token, or an OpenID provider's access token when
//! `[admin_oidc]` is configured ([`crate::admin_oidc`]) — checks the method against the token's
//! scope, and hands the handlers the caller ([`AdminCaller`] in the request's extensions) and
//! the author every write it commits is recorded under ([`author`]).
//!
//! The method table lives here, in one place; handlers that touch one tenant narrow further
//! with [`check_tenant`], once they know which tenant. Unknown methods of an admin service
//! need a full token, so a new RPC is closed until it is classified.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use sha2::{Digest, Sha256};
use tonic::Status;
use tp_registry::{Access, AdminCaller};

use crate::admin_oidc::AdminOidc;
use crate::auth::constant_time_eq;
use crate::engine::{Engine, now_secs};

/// The author a request's writes are recorded under: the admin caller this layer found for it
/// (`system` for a request that never passed the layer, as in-process tests send). Handlers
/// pass it to [`crate::engine::Engine::write`] explicitly; work that serves no request names
/// its own (`system`, `system:sunset`).
pub fn author<T>(request: &tonic::Request<T>) -> String {
    request
        .extensions()
        .get::<AdminCaller>()
        .map_or_else(|| "system".to_owned(), |caller| caller.name.clone())
}

/// The admin services this layer guards (others pass: `Registry` has the edge token's
/// interceptor; health and reflection are open).
const ADMIN_SERVICES: [&str; 6] = [
    "/toolplane.v1.Catalog/",
    "/toolplane.v1.Policy/",
    "/toolplane.v1.Tenants/",
    "/toolplane.v1.Executors/",
    "/toolplane.v1.Audit/",
    "/toolplane.v1.Admins/",
];

/// What a method of an admin service needs; `None` for paths of other services.
pub fn access(path: &str) -> Option<Access> {
    ADMIN_SERVICES.iter().find(|s| path.starts_with(*s))?;
    let method = path.trim_start_matches('/');
    Some(match method {
        "toolplane.v1.Catalog/GetTool"
        | "toolplane.v1.Catalog/ListTools"
        | "toolplane.v1.Catalog/ListProviders"
        | "toolplane.v1.Catalog/ListRoles"
        | "toolplane.v1.Policy/GetPolicy"
        | "toolplane.v1.Policy/GetAdr"
        | "toolplane.v1.Policy/ListAdrs"
        | "toolplane.v1.Policy/RenderToolsDoc"
        | "toolplane.v1.Policy/CheckDocument"
        | "toolplane.v1.Executors/GetExecutor"
        | "toolplane.v1.Executors/ListExecutors"
        | "toolplane.v1.Admins/WhoAmI" => Access::Read,
        "toolplane.v1.Tenants/GetTenant"
        | "toolplane.v1.Tenants/ListTenants"
        | "toolplane.v1.Tenants/ListApiKeys"
        | "toolplane.v1.Tenants/PreviewRegistry"
        | "toolplane.v1.Tenants/ListConnections"
        | "toolplane.v1.Audit/ListAuditRecords"
        | "toolplane.v1.Audit/GetUsage"
        | "toolplane.v1.Admins/ListChanges" => Access::TenantRead,
        "toolplane.v1.Tenants/UpdateTenant"
        | "toolplane.v1.Tenants/IssueApiKey"
        | "toolplane.v1.Tenants/RevokeApiKey" => Access::TenantWrite,
        _ => Access::Full,
    })
}

/// The caller of a request that passed the layer (the bootstrap identity when none is
/// attached, which only in-process tests that skip the layer see).
pub fn caller<T>(request: &tonic::Request<T>) -> AdminCaller {
    request
        .extensions()
        .get::<AdminCaller>()
        .cloned()
        .unwrap_or_else(AdminCaller::bootstrap)
}

/// `PERMISSION_DENIED` unless `caller` may manage `tenant`.
pub fn check_tenant(caller: &AdminCaller, tenant: &str) -> Result<(), Status> {
    if caller.may_manage(tenant) {
        Ok(())
    } else {
        Err(tp_proto::status::error(
            tp_registry::ErrorCode::PermissionDenied,
            format!(
                "admin token {} does not manage tenant {tenant:?}",
                caller.name
            ),
        ))
    }
}

/// The tower layer that authenticates every admin gRPC request (keys, OIDC tokens, the bootstrap token).
#[derive(Clone)]
pub struct AdminAuthLayer {
    engine: Arc<Engine>,
    bootstrap: Arc<[u8; 32]>,
    oidc: Option<Arc<AdminOidc>>,
}

impl std::fmt::Debug for AdminAuthLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAuthLayer").finish_non_exhaustive()
    }
}

impl AdminAuthLayer {
    /// Accepts `bootstrap_token` (scope full) and the admin tokens in `engine`'s state.
    pub fn new(engine: Arc<Engine>, bootstrap_token: &str) -> AdminAuthLayer {
        AdminAuthLayer {
            engine,
            bootstrap: Arc::new(Sha256::digest(bootstrap_token.as_bytes()).into()),
            oidc: None,
        }
    }

    /// Also accepts access tokens from the OpenID provider `oidc` is configured with.
    pub fn with_oidc(mut self, oidc: Option<Arc<AdminOidc>>) -> AdminAuthLayer {
        self.oidc = oidc;
        self
    }
}

impl<S> tower::Layer<S> for AdminAuthLayer {
    type Service = AdminAuth<S>;

    fn layer(&self, inner: S) -> AdminAuth<S> {
        AdminAuth {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`AdminAuthLayer`] makes.
#[derive(Debug, Clone)]
pub struct AdminAuth<S> {
    inner: S,
    layer: AdminAuthLayer,
}

impl AdminAuthLayer {
    /// The caller a request's `authorization` header stands for, if it may call a method
    /// needing `access`.
    async fn authorize(
        &self,
        header: Option<&http::HeaderValue>,
        access: Access,
        method: &str,
    ) -> Result<AdminCaller, Status> {
        let header = header.ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::Unauthenticated,
                "missing authorization: Bearer <admin token>",
            )
        })?;
        let presented = header
            .to_str()
            .ok()
            .and_then(tp_proto::keys::bearer)
            .ok_or_else(|| {
                tp_proto::status::error(
                    tp_registry::ErrorCode::Unauthenticated,
                    "authorization must be \"Bearer <token>\"",
                )
            })?;
        let presented = presented.trim();
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let caller = if constant_time_eq(&digest, &self.bootstrap) {
            AdminCaller::bootstrap()
        } else if let Some(oidc) = self.oidc.as_ref().filter(|_| AdminOidc::is_jwt(presented)) {
            oidc.caller(presented).await?
        } else {
            let hash = hex::encode(digest);
            let now = now_secs();
            self.engine
                .read(|state| state.authenticate_admin(&hash, now).map(AdminCaller::of))
                .await
                .ok_or_else(|| {
                    tp_proto::status::error(
                        tp_registry::ErrorCode::Unauthenticated,
                        "invalid admin token",
                    )
                })?
        };
        if !caller.allows(access) {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::PermissionDenied,
                format!(
                    "admin token {} ({}) may not call {method}",
                    caller.name,
                    caller.scope.as_str()
                ),
            ));
        }
        Ok(caller)
    }
}

impl<S, B, R> tower::Service<http::Request<B>> for AdminAuth<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let Some(access) = access(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        // The clone that was polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            let method = request.uri().path().trim_start_matches('/').to_owned();
            let header = request.headers().get(http::header::AUTHORIZATION).cloned();
            match layer.authorize(header.as_ref(), access, &method).await {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                    inner.call(request).await
                }
                Err(status) => Ok(status.into_http()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admin_rpc_is_classified_and_writes_default_to_full() {
        assert_eq!(
            access("/toolplane.v1.Catalog/ListTools"),
            Some(Access::Read)
        );
        assert_eq!(
            access("/toolplane.v1.Tenants/IssueApiKey"),
            Some(Access::TenantWrite)
        );
        assert_eq!(
            access("/toolplane.v1.Tenants/CreateTenant"),
            Some(Access::Full)
        );
        assert_eq!(
            access("/toolplane.v1.Admins/IssueAdminToken"),
            Some(Access::Full)
        );
        assert_eq!(
            access("/toolplane.v1.Catalog/NoSuchMethod"),
            Some(Access::Full)
        );
        assert_eq!(access("/toolplane.v1.Registry/Authenticate"), None);
        assert_eq!(access("/grpc.health.v1.Health/Check"), None);
        // Every method the descriptor set declares on an admin service is in the table on
        // purpose: reads are named, and nothing that writes is named as a read.
        let set = <prost_types::FileDescriptorSet as prost::Message>::decode(
            tp_proto::FILE_DESCRIPTOR_SET,
        )
        .unwrap();
        let mut reads = 0;
        for file in &set.file {
            for service in &file.service {
                for method in &service.method {
                    let path = format!("/{}.{}/{}", file.package(), service.name(), method.name());
                    let Some(access) = access(&path) else {
                        continue;
                    };
                    let name = method.name();
                    let reads_only = ["Get", "List", "Preview", "Render", "Check", "WhoAmI"]
                        .iter()
                        .any(|p| name.starts_with(p));
                    match access {
                        Access::Read | Access::TenantRead => {
                            assert!(reads_only, "{path} is classified as a read");
                            reads += 1;
                        }
                        Access::TenantWrite | Access::Full => {}
                    }
                }
            }
        }
        assert_eq!(reads, 20);
    }
}
