//! The admin calls nearly every end-to-end test makes to set up its world.

use tp_client::Admin;
use tp_proto::pb;

/// An executor to register: its name, endpoint, and the rest at test defaults.
#[derive(Debug, Clone)]
pub struct NewExecutor {
    /// The executor's name, as tools name it.
    pub name: String,
    /// `http://`/`https://` address (gRPC), or an MCP server's URL.
    pub endpoint: String,
    /// Per-call timeout.
    pub timeout_ms: u32,
    /// Concurrent calls.
    pub max_concurrency: u32,
    /// gRPC contract or MCP server.
    pub protocol: pb::ExecutorProtocol,
}

impl NewExecutor {
    /// A gRPC executor `name` at `endpoint`, 30 s timeout, 8 calls at a time.
    pub fn grpc(name: &str, endpoint: impl Into<String>) -> NewExecutor {
        NewExecutor {
            name: name.to_owned(),
            endpoint: endpoint.into(),
            timeout_ms: 30_000,
            max_concurrency: 8,
            protocol: pb::ExecutorProtocol::Grpc,
        }
    }

    /// An MCP server `name` at `endpoint`, 10 s timeout, 8 calls at a time.
    pub fn mcp(name: &str, endpoint: impl Into<String>) -> NewExecutor {
        NewExecutor {
            timeout_ms: 10_000,
            protocol: pb::ExecutorProtocol::Mcp,
            ..NewExecutor::grpc(name, endpoint)
        }
    }
}

/// Registers (or replaces) `executor`; panics when the control plane refuses it.
pub async fn upsert_executor(admin: &mut Admin, executor: NewExecutor) {
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
            update_mask: None,
            executor: Some(pb::ExecutorInfo {
                name: executor.name,
                endpoint: executor.endpoint,
                timeout_ms: executor.timeout_ms,
                max_concurrency: executor.max_concurrency,
                protocol: executor.protocol as i32,
                ..Default::default()
            }),
        })
        .await
        .expect("the control plane registers the executor");
}

/// Issues an API key for (`tenant`, `role`) and returns it.
pub async fn issue_key(admin: &mut Admin, tenant: &str, role: &str) -> String {
    admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: tenant.into(),
            role: role.into(),
            ..Default::default()
        })
        .await
        .expect("the control plane issues the key")
        .into_inner()
        .key
}
