//! What the edge asks the control plane: the [`Directory`] seam the caches use on every miss,
//! and [`ControlPlane`], its gRPC implementation with failover across the configured replicas
//! (which also carries the change stream and audit delivery).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tp_proto::pb::{self, registry_client::RegistryClient};

/// Per-call timeout for unary calls.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);

pub use tp_client::Bearer;

/// An authenticated Registry client.
pub type Client = RegistryClient<InterceptedService<Channel, Bearer>>;

/// The questions the request path puts to the control plane when its caches miss: who a key
/// is, and what a (tenant, role) may use. [`ControlPlane`] answers them over gRPC; the router's
/// in-memory tests answer them from a table, so the HTTP behaviour of the edge can be checked
/// with `oneshot` and no process.
pub trait Directory: Send + Sync + std::fmt::Debug {
    /// The edge's resource URL for access tokens (empty when OAuth is off).
    fn resource(&self) -> &str;

    /// Whether the control plane answered the last time it was asked.
    fn reachable(&self) -> bool;

    /// The identity of an API key or access token.
    fn authenticate<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<pb::Identity, Status>>;

    /// The registry of (tenant, role).
    fn resolve<'a>(
        &'a self,
        tenant: &'a str,
        role: &'a str,
    ) -> BoxFuture<'a, Result<pb::ResolvedRegistry, Status>>;

    /// The credential of the tenant (or of its `user`, when not empty) for a provider
    /// (NOT_FOUND: no usable connection).
    fn credential<'a>(
        &'a self,
        tenant: &'a str,
        provider: &'a str,
        user: &'a str,
    ) -> BoxFuture<'a, Result<pb::Credential, Status>> {
        let _ = (tenant, provider, user);
        Box::pin(async {
            Err(tp_proto::status::error(
                tp_registry::ErrorCode::NotFound,
                "no connection",
            ))
        })
    }
}

impl Directory for ControlPlane {
    fn resource(&self) -> &str {
        ControlPlane::resource(self)
    }

    fn reachable(&self) -> bool {
        ControlPlane::reachable(self)
    }

    fn authenticate<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<pb::Identity, Status>> {
        Box::pin(ControlPlane::authenticate(self, key))
    }

    fn resolve<'a>(
        &'a self,
        tenant: &'a str,
        role: &'a str,
    ) -> BoxFuture<'a, Result<pb::ResolvedRegistry, Status>> {
        Box::pin(ControlPlane::resolve(self, tenant, role))
    }

    fn credential<'a>(
        &'a self,
        tenant: &'a str,
        provider: &'a str,
        user: &'a str,
    ) -> BoxFuture<'a, Result<pb::Credential, Status>> {
        Box::pin(ControlPlane::credential(self, tenant, provider, user))
    }
}

/// The control plane, as the edge sees it.
pub struct ControlPlane {
    clients: Vec<(String, Client)>,
    current: AtomicUsize,
    reachable: AtomicBool,
    /// The edge's resource URL, sent with access tokens to be checked against their audience
    /// (empty: OAuth is off and tokens are refused).
    resource: String,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field(
                "endpoints",
                &self.clients.iter().map(|(url, _)| url).collect::<Vec<_>>(),
            )
            .field("current", &self.current.load(Ordering::Relaxed))
            .finish()
    }
}

/// Whether a status means "this replica is not answering" (try another), as opposed to an
/// answer.
pub fn is_unreachable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Cancelled
    )
}

// === impl ControlPlane ===

impl ControlPlane {
    /// Lazily connecting clients for every URL; `resource` is the edge's resource URL for
    /// access tokens (empty when OAuth is off).
    pub fn new(urls: &[String], token: &str, resource: &str) -> anyhow::Result<Arc<ControlPlane>> {
        let bearer = Bearer::new(token)?;
        let mut clients = Vec::with_capacity(urls.len());
        for url in urls {
            let channel = tp_net::dial::dial(url)
                .map_err(|e| anyhow::anyhow!("control_plane: {e}"))?
                .map(|endpoint| {
                    endpoint
                        .connect_timeout(Duration::from_secs(2))
                        .tcp_nodelay(true)
                        .http2_keep_alive_interval(Duration::from_secs(10))
                        .keep_alive_timeout(Duration::from_secs(5))
                })
                .connect_lazy();
            let client = RegistryClient::with_interceptor(channel, bearer.clone())
                .max_decoding_message_size(64 * 1024 * 1024);
            clients.push((url.clone(), client));
        }
        Ok(Arc::new(ControlPlane {
            clients,
            current: AtomicUsize::new(0),
            reachable: AtomicBool::new(false),
            resource: resource.to_owned(),
        }))
    }

    /// The edge's resource URL for access tokens (empty when OAuth is off).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether the last attempt to reach any replica succeeded.
    pub fn reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// Records reachability (the watch loop knows best).
    pub fn set_reachable(&self, reachable: bool) {
        self.reachable.store(reachable, Ordering::Relaxed);
    }

    /// The client to use now and its URL.
    pub fn current(&self) -> (usize, &str, Client) {
        let index = self.current.load(Ordering::Relaxed) % self.clients.len();
        let (url, client) = &self.clients[index];
        (index, url, client.clone())
    }

    /// Moves to the next replica (after `failed` did not answer).
    pub fn fail_over(&self, failed: usize) {
        let next = (failed + 1) % self.clients.len();
        let _ = self
            .current
            .compare_exchange(failed, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Runs a unary call on the current replica, failing over once per replica when it does
    /// not answer.
    async fn call<T, F, Fut>(&self, mut f: F) -> Result<T, Status>
    where
        F: FnMut(Client) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut last_error = tp_proto::status::error(
            tp_registry::ErrorCode::Unavailable,
            "no control-plane replica configured",
        );
        for _ in 0..self.clients.len() {
            let (index, url, client) = self.current();
            match tokio::time::timeout(CALL_TIMEOUT, f(client)).await {
                Ok(Ok(response)) => {
                    self.set_reachable(true);
                    return Ok(response.into_inner());
                }
                Ok(Err(status)) if !is_unreachable(&status) => {
                    self.set_reachable(true);
                    return Err(status);
                }
                Ok(Err(status)) => {
                    tracing::warn!(control_plane = %url, error = %status.message(), "control plane did not answer");
                    last_error = status;
                }
                Err(_) => {
                    tracing::warn!(control_plane = %url, "control plane call timed out");
                    last_error = tp_proto::status::error(
                        tp_registry::ErrorCode::Timeout,
                        "control plane call timed out",
                    );
                }
            }
            self.fail_over(index);
        }
        self.set_reachable(false);
        Err(last_error)
    }

    /// Resolves a key to its identity.
    pub async fn authenticate(&self, key: &str) -> Result<pb::Identity, Status> {
        let request = pb::AuthenticateRequest {
            key: key.to_owned(),
            resource: self.resource.clone(),
        };
        self.call(|mut client| {
            let request = request.clone();
            async move { client.authenticate(request).await }
        })
        .await
    }

    /// The credential of the tenant (or of its `user`, when not empty) for `provider`.
    pub async fn credential(
        &self,
        tenant: &str,
        provider: &str,
        user: &str,
    ) -> Result<pb::Credential, Status> {
        let request = pb::GetCredentialRequest {
            tenant: tenant.to_owned(),
            provider: provider.to_owned(),
            user: user.to_owned(),
            features: vec!["user_connections".into(), "token_exchange".into()],
        };
        self.call(|mut client| {
            let request = request.clone();
            async move { client.get_credential(request).await }
        })
        .await
    }

    /// Resolves the registry of (tenant, role).
    pub async fn resolve(&self, tenant: &str, role: &str) -> Result<pb::ResolvedRegistry, Status> {
        let request = pb::ResolveRegistryRequest {
            tenant: tenant.to_owned(),
            role: role.to_owned(),
        };
        self.call(|mut client| {
            let request = request.clone();
            async move { client.resolve_registry(request).await }
        })
        .await
    }

    /// Sends a batch of audit records (with the count of records its edge shed before them,
    /// and its `batch_id`, the same on every retry); whether the control plane had stored that
    /// batch before.
    pub async fn report_usage(&self, request: &pb::ReportUsageRequest) -> Result<bool, Status> {
        self.call(|mut client| {
            let request = request.clone();
            async move { client.report_usage(request).await }
        })
        .await
        .map(|response| response.duplicate)
    }
}
