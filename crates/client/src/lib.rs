//! Clients of the control plane's gRPC services: the [`Bearer`] interceptor that adds
//! `authorization: Bearer <token>` to every call (admin token or edge token), and [`Admin`],
//! every admin service over one channel. Shared by `toolplanectl`, the edge (its `Registry`
//! client), the demo executor and the tests, so the token handling exists once.

use std::time::Duration;

use anyhow::Context;
use tonic::Request;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tp_proto::pb::{
    admins_client::AdminsClient, audit_client::AuditClient, catalog_client::CatalogClient,
    executors_client::ExecutorsClient, policy_client::PolicyClient,
    registry_client::RegistryClient, tenants_client::TenantsClient,
};

/// Adds `authorization: Bearer <token>` to every request. Its `Debug` hides the token.
#[derive(Clone)]
pub struct Bearer(MetadataValue<Ascii>);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(..)")
    }
}

impl Bearer {
    /// The interceptor for `token`; fails when the token is not printable ASCII.
    pub fn new(token: &str) -> anyhow::Result<Bearer> {
        let value = format!("Bearer {token}")
            .parse()
            .context("the token is not valid ASCII")?;
        Ok(Bearer(value))
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        // The caller's trace continues on the server (W3C traceparent), when traces export.
        tp_telemetry::trace::inject(request.metadata_mut());
        Ok(request)
    }
}

/// A channel whose every call carries the bearer token.
pub type Authed = InterceptedService<Channel, Bearer>;

/// Clients of the admin services over one channel.
#[derive(Debug, Clone)]
pub struct Admin {
    /// The catalogue: tools, providers and their lifecycle.
    pub catalog: CatalogClient<Authed>,
    /// The tool ceiling and the ADRs it is tied to.
    pub policy: PolicyClient<Authed>,
    /// Tenants, their keys, connections and registries.
    pub tenants: TenantsClient<Authed>,
    /// Executors: where tools run, and how they are reached.
    pub executors: ExecutorsClient<Authed>,
    /// Registry (usage; edges use it with the edge token).
    pub registry: RegistryClient<Authed>,
    /// The audit trail.
    pub audit: AuditClient<Authed>,
    /// Admin identities and the change log.
    pub admins: AdminsClient<Authed>,
}

// === impl Admin ===

impl Admin {
    /// Connects to `addr` (e.g. `http://127.0.0.1:50051`) with `token`, failing when nothing
    /// answers within 5 s.
    pub async fn connect(addr: &str, token: &str) -> anyhow::Result<Admin> {
        let channel = dial(addr)?
            .map(|endpoint| endpoint.connect_timeout(Duration::from_secs(5)))
            .connect()
            .await
            .with_context(|| format!("cannot reach the control plane at {addr}"))?;
        Ok(Admin::over(channel, Bearer::new(token)?))
    }

    /// Clients that connect on first use (for long-running processes that must start before
    /// the control plane does).
    pub fn lazy(addr: &str, token: &str) -> anyhow::Result<Admin> {
        let channel = dial(addr)?
            .map(|endpoint| endpoint.tcp_nodelay(true))
            .connect_lazy();
        Ok(Admin::over(channel, Bearer::new(token)?))
    }

    /// Clients over an existing channel.
    pub fn over(channel: Channel, bearer: Bearer) -> Admin {
        Admin {
            catalog: CatalogClient::with_interceptor(channel.clone(), bearer.clone()),
            policy: PolicyClient::with_interceptor(channel.clone(), bearer.clone()),
            tenants: TenantsClient::with_interceptor(channel.clone(), bearer.clone()),
            executors: ExecutorsClient::with_interceptor(channel.clone(), bearer.clone()),
            registry: RegistryClient::with_interceptor(channel.clone(), bearer.clone()),
            audit: AuditClient::with_interceptor(channel.clone(), bearer.clone()),
            admins: AdminsClient::with_interceptor(channel, bearer),
        }
    }
}

pub use tp_net::dial::ClientTlsFiles;

/// Makes `files` the client TLS settings of every `https://` connection this process makes
/// (instead of `TOOLPLANE_TLS_*`); call before the first one. `what` names their origin in
/// errors (a CLI profile).
pub fn configure_tls(files: ClientTlsFiles, what: &str) -> anyhow::Result<()> {
    tp_net::dial::ReloadingClientTls::configure(files, what).map_err(|e| anyhow::anyhow!(e))
}

/// How to reach `addr`; `https://` addresses use the client TLS settings of
/// `TOOLPLANE_TLS_*` (`tp_net::dial`), reloaded when their files change.
fn dial(addr: &str) -> anyhow::Result<tp_net::dial::Dial> {
    tp_net::dial::dial(addr).map_err(|e| anyhow::anyhow!(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interceptor_adds_the_token_and_never_prints_it() {
        let mut bearer = Bearer::new("s3cret").unwrap();
        assert_eq!(format!("{bearer:?}"), "Bearer(..)");
        let request = bearer.call(Request::new(())).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer s3cret"
        );
        assert!(Bearer::new("line\nbreak").is_err());
    }

    #[tokio::test]
    async fn a_bad_address_is_named() {
        let error = Admin::lazy("not a url", "t").unwrap_err();
        assert!(format!("{error:#}").contains("not a url"), "{error:#}");
    }
}
