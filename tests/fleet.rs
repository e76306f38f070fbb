//! A fleet for end-to-end tests: control plane (demo world plus test tools), the demo
//! executor, a private Redis and N edges, with a key per (tenant, role).

use std::collections::BTreeMap;

use serde_json::json;
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::admin::NewExecutor;
use tp_test_support::{
    ControlPlaneProcess, EdgeProcess, ExecutorProcess, McpHttp, RedisProcess, WikiProcess,
};

pub(crate) const TENANTS: [&str; 4] = ["acme", "globex", "initech", "qa"];
pub(crate) const ROLES: [&str; 2] = ["collector", "executor"];
pub(crate) const LEGACY: &str = "2025-11-25";
pub(crate) const STATELESS: &str = "2026-07-28";

pub(crate) struct Fleet {
    pub(crate) cp: ControlPlaneProcess,
    pub(crate) executor: ExecutorProcess,
    pub(crate) wiki: WikiProcess,
    pub(crate) redis: RedisProcess,
    pub(crate) edges: Vec<EdgeProcess>,
    pub(crate) keys: BTreeMap<(String, String), String>,
}

pub(crate) fn test_tool(name: &str, schema: serde_json::Value, idempotent: bool) -> pb::ToolSpec {
    pb::ToolSpec {
        name: name.into(),
        description: format!("Test tool {name}"),
        category: "testing".into(),
        provider: "testing".into(),
        input_schema: to_struct(&schema),
        executor: "demo".into(),
        annotations: Some(pb::Annotations {
            idempotent: Some(idempotent),
            ..Default::default()
        }),
        admission: Some(pb::Admission {
            adr: "ADR-100".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Fleet {
    pub(crate) async fn start(edges: usize, extra_toml: &str) -> Fleet {
        Fleet::start_with_cp_env(edges, extra_toml, Vec::new()).await
    }

    /// A fleet whose control plane also gets `cp_envs` (its `TOOLPLANE_CP_*` settings).
    pub(crate) async fn start_with_cp_env(
        edges: usize,
        extra_toml: &str,
        cp_envs: Vec<(&'static str, String)>,
    ) -> Fleet {
        let cp = ControlPlaneProcess::start_demo_with_env(cp_envs).await;
        let executor = ExecutorProcess::start().await;
        let wiki = WikiProcess::start().await;
        let redis = RedisProcess::start().await;
        let mut admin = cp.admin().await;
        for (name, endpoint, timeout_ms) in [
            ("wiki", wiki.url(), 30_000),
            ("demo", executor.url(), 5_000),
        ] {
            let executor = NewExecutor {
                timeout_ms,
                max_concurrency: 64,
                ..NewExecutor::grpc(name, endpoint)
            };
            tp_test_support::admin::upsert_executor(&mut admin, executor).await;
        }
        // Room for test tools: an ADR that supersedes the ceiling's, then the amendment.
        admin
            .policy
            .create_adr(pb::CreateAdrRequest {
                adr: Some(pb::Adr {
                    id: "ADR-100".into(),
                    title: "Test tools".into(),
                    status: pb::AdrStatus::Accepted as i32,
                    date: "2026-11-22".into(),
                    supersedes: "ADR-007".into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        admin
            .policy
            .amend_ceiling(pb::AmendCeilingRequest {
                ceiling: 100,
                adr: "ADR-100".into(),
            })
            .await
            .unwrap();
        admin
            .catalog
            .upsert_provider(pb::UpsertProviderRequest {
                provider: Some(pb::Provider {
                    id: "testing".into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        let object = |props: serde_json::Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
        for spec in [
            test_tool(
                "echo",
                object(
                    json!({"text": {"type": "string", "maxLength": 100000}}),
                    &["text"],
                ),
                true,
            ),
            test_tool(
                "sleep",
                object(
                    json!({"ms": {"type": "integer", "minimum": 0, "maximum": 60000}}),
                    &["ms"],
                ),
                false,
            ),
            test_tool("fail", object(json!({}), &[]), false),
            test_tool("test_tool_with_progress", object(json!({}), &[]), false),
            test_tool("test_tool_with_logging", object(json!({}), &[]), false),
            test_tool("test_multiple_content_types", object(json!({}), &[]), false),
        ] {
            admin
                .catalog
                .register_tool(pb::RegisterToolRequest { tool: Some(spec) })
                .await
                .unwrap();
        }
        admin
            .tenants
            .create_tenant(pb::CreateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: "qa".into(),
                    connected_apis: Some(pb::ConnectedApis {
                        providers: vec!["testing".into()],
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        let mut keys = BTreeMap::new();
        for tenant in TENANTS {
            for role in ROLES {
                let key = tp_test_support::admin::issue_key(&mut admin, tenant, role).await;
                keys.insert((tenant.to_owned(), role.to_owned()), key);
            }
        }
        let mut started = Vec::new();
        for _ in 0..edges {
            started
                .push(EdgeProcess::start(&cp, &[cp.url()], Some(&redis.url()), extra_toml).await);
        }
        Fleet {
            cp,
            executor,
            wiki,
            redis,
            edges: started,
            keys,
        }
    }

    pub(crate) fn key(&self, tenant: &str, role: &str) -> &str {
        &self.keys[&(tenant.to_owned(), role.to_owned())]
    }

    pub(crate) fn client(&self, edge: usize, tenant: &str, role: &str, version: &str) -> McpHttp {
        McpHttp::new(
            &self.edges[edge].addr,
            Some(self.key(tenant, role)),
            version,
        )
    }

    /// What the control plane says (tenant, role) should see, in order.
    pub(crate) async fn expected(&self, tenant: &str, role: &str) -> Vec<String> {
        let mut admin = self.cp.admin().await;
        admin
            .tenants
            .preview_registry(pb::PreviewRegistryRequest {
                tenant: tenant.into(),
                role: role.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .tools
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    /// What `tools/list` should show (tenant, role): the registry, or the meta-tools plus pinned
    /// tools when the tenant's disclosure makes it progressive (ADR 0006).
    pub(crate) async fn listing(&self, tenant: &str, role: &str) -> Vec<String> {
        let mut admin = self.cp.admin().await;
        listing_of(&mut admin, tenant, role).await
    }

    /// Sets a tenant's disclosure settings.
    pub(crate) async fn set_disclosure(&self, tenant: &str, disclosure: pb::Disclosure) {
        let mut admin = self.cp.admin().await;
        let mut current = admin
            .tenants
            .get_tenant(pb::GetTenantRequest { id: tenant.into() })
            .await
            .unwrap()
            .into_inner();
        current.disclosure = Some(disclosure);
        admin
            .tenants
            .update_tenant(pb::UpdateTenantRequest::replacing(current))
            .await
            .unwrap();
    }

    pub(crate) async fn catalogue(&self) -> Vec<String> {
        let mut admin = self.cp.admin().await;
        admin
            .catalog
            .list_tools(pb::ListToolsRequest {
                page_size: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .tools
            .into_iter()
            .map(|t| t.spec.unwrap().name)
            .collect()
    }
}

/// The registry of (tenant, role) as the control plane resolves it.
pub(crate) async fn registry_of(
    admin: &mut tp_client::Admin,
    tenant: &str,
    role: &str,
) -> Vec<String> {
    admin
        .tenants
        .preview_registry(pb::PreviewRegistryRequest {
            tenant: tenant.into(),
            role: role.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// What `tools/list` should show (tenant, role), computed from the control plane's answers.
pub(crate) async fn listing_of(
    admin: &mut tp_client::Admin,
    tenant: &str,
    role: &str,
) -> Vec<String> {
    let registry = registry_of(admin, tenant, role).await;
    let disclosure: tp_registry::Disclosure = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: tenant.into() })
        .await
        .unwrap()
        .into_inner()
        .disclosure
        .as_ref()
        .map(Into::into)
        .unwrap_or_default();
    if !disclosure.is_progressive(registry.len()) {
        return registry;
    }
    let mut listed: Vec<String> = tp_registry::META_TOOLS
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    listed.extend(
        registry
            .into_iter()
            .filter(|name| disclosure.pinned.contains(name)),
    );
    listed.sort();
    listed
}
