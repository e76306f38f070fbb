//! Authenticated clients of every admin service.

use anyhow::Context;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tp_proto::pb::{
    catalog_client::CatalogClient, executors_client::ExecutorsClient, policy_client::PolicyClient,
    registry_client::RegistryClient, tenants_client::TenantsClient,
};

/// Adds `authorization: Bearer <token>` to every request.
#[derive(Clone)]
pub struct Bearer(MetadataValue<tonic::metadata::Ascii>);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(..)")
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

type Authed = InterceptedService<Channel, Bearer>;

/// Clients of the admin services over one channel.
#[derive(Debug, Clone)]
pub struct Admin {
    /// Catalog.
    pub catalog: CatalogClient<Authed>,
    /// Policy.
    pub policy: PolicyClient<Authed>,
    /// Tenants.
    pub tenants: TenantsClient<Authed>,
    /// Executors.
    pub executors: ExecutorsClient<Authed>,
    /// Registry (usage).
    pub registry: RegistryClient<Authed>,
}

// === impl Admin ===

impl Admin {
    /// Connects to `addr` (e.g. `http://127.0.0.1:50051`) with `token`.
    pub async fn connect(addr: &str, token: &str) -> anyhow::Result<Admin> {
        let channel = Endpoint::from_shared(addr.to_owned())
            .with_context(|| format!("bad address {addr:?}"))?
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect()
            .await
            .with_context(|| format!("cannot reach the control plane at {addr}"))?;
        let value: MetadataValue<_> = format!("Bearer {token}")
            .parse()
            .context("the token is not valid ASCII")?;
        let bearer = Bearer(value);
        Ok(Admin {
            catalog: CatalogClient::with_interceptor(channel.clone(), bearer.clone()),
            policy: PolicyClient::with_interceptor(channel.clone(), bearer.clone()),
            tenants: TenantsClient::with_interceptor(channel.clone(), bearer.clone()),
            executors: ExecutorsClient::with_interceptor(channel.clone(), bearer.clone()),
            registry: RegistryClient::with_interceptor(channel, bearer),
        })
    }
}
