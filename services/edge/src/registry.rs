//! A resolved registry as the edge serves it: tools in name order with their MCP form
//! precomputed, argument validators compiled on first use, and the executors they route to.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use prost::Message;
use rmcp::model::Tool as McpTool;
use serde_json::Value;
use tp_proto::pb;
use tp_registry::{Disclosure, Executor, ResolvedTool};

pub use crate::tool::{EdgeTool, mcp_tool};

/// What a registry shows and runs: the tools, their executors, the disclosure decision and the
/// listing. Tenants whose registries have the same content (the same providers, role and
/// disclosure settings: the common case in a large fleet) share one `Content` in memory — see
/// [`Registry::from_pb`].
#[derive(Debug)]
pub struct Content {
    /// Tools, in name order.
    pub tools: Vec<EdgeTool>,
    index: HashMap<String, usize>,
    /// Executors by name.
    pub executors: HashMap<String, Executor>,
    /// Disclosure settings of the tenant.
    pub disclosure: Disclosure,
    /// Live tools in the whole catalogue.
    pub catalogue_size: u32,
    /// Whether `tools/list` shows the meta-tools (and pinned tools) instead of every tool.
    pub progressive: bool,
    /// What `tools/list` shows, in name order (built once per body).
    pub listing: Vec<McpTool>,
    /// `tools/list` answers as bytes, per protocol generation (built on first use).
    lists: [OnceLock<crate::transport::pages::Pages>; 2],
    /// The tool-search index of this body (built on the first search).
    search: OnceLock<crate::disclosure::SearchIndex>,
    /// The embeddings of this body's tools, when the embeddings ranker is configured (made on
    /// the first search that asks for them).
    vectors: tokio::sync::OnceCell<Arc<crate::disclosure::ToolVectors>>,
    /// The digest of what a caller of this body can see (its tools and disclosure; not the
    /// executors' addresses nor the catalogue's size): two bodies with the same one list the
    /// same tools, so a change that keeps it owes the caller no `list_changed`.
    pub listing_digest: [u8; 32],
}

impl Content {
    /// This body with only `tools` (a subset of its own, for a caller narrowed to
    /// `providers`): the same executors and disclosure settings.
    fn narrowed(&self, tools: Vec<EdgeTool>, providers: &[String]) -> Content {
        use sha2::Digest as _;
        let index = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.resolved.name.clone(), i))
            .collect();
        let progressive = self.disclosure.is_progressive(tools.len());
        let listing = crate::disclosure::listing(&tools, progressive, &self.disclosure.pinned);
        // Of what the narrowed caller sees only: a change to tools it does not see keeps the
        // digest, so it owes this caller no `list_changed` (nor tells it of that change).
        let mut digest = sha2::Sha256::new();
        for provider in providers {
            digest.update((provider.len() as u64).to_le_bytes());
            digest.update(provider.as_bytes());
        }
        digest.update((tools.len() as u64).to_le_bytes());
        for tool in &tools {
            let bytes = serde_json::to_vec(&tool.resolved).unwrap_or_default();
            digest.update((bytes.len() as u64).to_le_bytes());
            digest.update(&bytes);
        }
        digest.update(serde_json::to_vec(&self.disclosure).unwrap_or_default());
        Content {
            tools,
            index,
            executors: self.executors.clone(),
            disclosure: self.disclosure.clone(),
            catalogue_size: self.catalogue_size,
            progressive,
            listing,
            lists: Default::default(),
            search: OnceLock::new(),
            vectors: tokio::sync::OnceCell::new(),
            listing_digest: digest.finalize().into(),
        }
    }

    /// The serialised `tools/list` pages of this body for one protocol generation.
    pub fn pages(
        &self,
        generation: crate::transport::pages::Generation,
        paging: crate::transport::pages::Paging,
    ) -> &crate::transport::pages::Pages {
        self.lists[generation as usize].get_or_init(|| {
            crate::transport::pages::Pages::build(&self.listing, paging, generation)
        })
    }

    /// The tool-search index of this body's tools, built on first use and kept with the body
    /// (so a new revision gets a new one).
    pub fn search_index(&self) -> &crate::disclosure::SearchIndex {
        self.search
            .get_or_init(|| crate::disclosure::SearchIndex::build(&self.tools))
    }
}

/// The registry of one (tenant, role) at one revision: its own identity and settings, and a
/// body it may share with other tenants. Dereferences to the [`Content`].
#[derive(Debug)]
pub struct Registry {
    /// The tenant this registry was resolved for.
    pub tenant: String,
    /// The role it was resolved for (tools and actions are projected to it).
    pub role: String,
    /// Control-plane revision it was resolved at.
    pub revision: u64,
    /// Tool calls per minute (0 = unlimited).
    pub rate_limit_per_minute: u32,
    /// The tenant's lint webhook (passed to executors in the call context).
    pub lint_webhook: String,
    /// The tenant's incarnation (passed to executors in the call context).
    pub tenant_uid: String,
    /// The tenant's approval rules for this role (ADR 0013).
    pub approvals: Vec<pb::ApprovalRule>,
    /// The providers the tenant connected (ADR 0015), without credentials.
    pub connections: Vec<pb::ConnectedProvider>,
    body: Arc<Content>,
    /// This registry as seen by callers whose token scopes narrow them to some providers
    /// (ADR 0015, phase 3), built on first use; at most [`MAX_NARROWED`] variants.
    narrowed: std::sync::Mutex<Vec<(Vec<String>, Arc<Registry>)>>,
}

/// Most narrowed variants one registry keeps (more distinct scope sets are built per call).
const MAX_NARROWED: usize = 16;

impl std::ops::Deref for Registry {
    type Target = Content;

    fn deref(&self) -> &Content {
        &self.body
    }
}

/// The `default` a schema gives argument `name`: in its own `properties`, or in those of a
/// branch (`oneOf`, `anyOf`, `allOf`: a polymorphic tool's actions).
fn schema_default<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    if let Some(default) = schema["properties"][name].get("default") {
        return Some(default);
    }
    ["oneOf", "anyOf", "allOf"]
        .iter()
        .filter_map(|key| schema.get(*key)?.as_array())
        .flatten()
        .find_map(|branch| branch["properties"][name].get("default"))
}

/// Bodies by content digest; weak, so a body lives exactly as long as a registry uses it.
static CONTENTS: std::sync::LazyLock<
    std::sync::Mutex<HashMap<[u8; 32], std::sync::Weak<Content>>>,
> = std::sync::LazyLock::new(Default::default);

/// The digest of what a body is built from: the registry without its per-tenant fields
/// (tools, executors, disclosure, catalogue size), hashed field by field without copying it.
fn body_digest(registry: &pb::ResolvedRegistry) -> [u8; 32] {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = Vec::new();
    let mut feed = |hasher: &mut sha2::Sha256, message: &dyn Fn(&mut Vec<u8>)| {
        buffer.clear();
        message(&mut buffer);
        hasher.update((buffer.len() as u64).to_le_bytes());
        hasher.update(&buffer);
    };
    hasher.update((registry.tools.len() as u64).to_le_bytes());
    for tool in &registry.tools {
        feed(&mut hasher, &|b| tool.encode_raw(b));
    }
    hasher.update((registry.executors.len() as u64).to_le_bytes());
    for executor in &registry.executors {
        feed(&mut hasher, &|b| executor.encode_raw(b));
    }
    match &registry.disclosure {
        Some(disclosure) => feed(&mut hasher, &|b| disclosure.encode_raw(b)),
        None => hasher.update(b"-"),
    }
    hasher.update(registry.catalogue_size.to_le_bytes());
    hasher.finalize().into()
}

/// [`Content::listing_digest`] of a resolved registry.
fn listing_digest(registry: &pb::ResolvedRegistry) -> [u8; 32] {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    hasher.update((registry.tools.len() as u64).to_le_bytes());
    for tool in &registry.tools {
        let bytes = tool.encode_to_vec();
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    if let Some(disclosure) = &registry.disclosure {
        hasher.update(disclosure.encode_to_vec());
    }
    hasher.finalize().into()
}

fn build_body(registry: &pb::ResolvedRegistry) -> Content {
    let tools: Vec<EdgeTool> = registry
        .tools
        .iter()
        .map(|t| EdgeTool::new(ResolvedTool::from(t)))
        .collect();
    let index = tools
        .iter()
        .enumerate()
        .map(|(i, t)| (t.resolved.name.clone(), i))
        .collect();
    let executors = registry
        .executors
        .iter()
        .map(|e| (e.name.clone(), Executor::from(e)))
        .collect();
    let disclosure = registry
        .disclosure
        .as_ref()
        .map(Disclosure::from)
        .unwrap_or_default();
    let progressive = disclosure.is_progressive(tools.len());
    let listing = crate::disclosure::listing(&tools, progressive, &disclosure.pinned);
    Content {
        tools,
        index,
        executors,
        disclosure,
        catalogue_size: registry.catalogue_size,
        progressive,
        listing,
        lists: Default::default(),
        search: OnceLock::new(),
        vectors: tokio::sync::OnceCell::new(),
        listing_digest: listing_digest(registry),
    }
}

// === impl Registry ===

impl Registry {
    /// Builds this body's search index on a blocking thread, once: for thousands of tools it
    /// takes tens of milliseconds, which would otherwise stall every request on the worker
    /// that makes the first search.
    pub async fn prepare_search(&self) {
        if self.body.search.get().is_some() {
            return;
        }
        let body = Arc::clone(&self.body);
        // A failed join (a panic while indexing) leaves the index unbuilt; the search that
        // follows builds it in place and reports the same failure.
        let _ = tokio::task::spawn_blocking(move || {
            body.search_index();
        })
        .await;
    }

    /// The embeddings ranker's order of this body's tools for `query` (best first), or `None`
    /// when the endpoint does not answer within its timeout: then the search is BM25F alone.
    /// The tools' vectors are made once per body, by a task that goes on after a timeout so
    /// that a later search finds them.
    pub async fn semantic_order(
        &self,
        embedder: &Arc<crate::disclosure::Embedder>,
        query: &str,
    ) -> Option<Vec<usize>> {
        let body = Arc::clone(&self.body);
        let owner = Arc::clone(embedder);
        let vectors = async move {
            if let Some(vectors) = body.vectors.get() {
                return Some(Arc::clone(vectors));
            }
            let task = tokio::spawn(async move {
                body.vectors
                    .get_or_try_init(|| async {
                        owner.tool_vectors(&body.tools).await.map(Arc::new)
                    })
                    .await
                    .map(Arc::clone)
            });
            task.await.ok()?.ok()
        };
        let (vectors, query) = tokio::time::timeout(
            embedder.settings().timeout,
            futures::future::join(vectors, embedder.query(query)),
        )
        .await
        .ok()?;
        let ranked = vectors?.rank(&query.ok()?, usize::MAX, |_| true);
        Some(ranked.into_iter().map(|(tool, _)| tool).collect())
    }

    /// Builds the edge form of a resolved registry, sharing the body with every registry of
    /// the same content already in memory.
    pub fn from_pb(registry: pb::ResolvedRegistry) -> Registry {
        let digest = body_digest(&registry);
        let body = {
            let mut bodies = CONTENTS.lock().unwrap_or_else(|e| e.into_inner());
            match bodies.get(&digest).and_then(std::sync::Weak::upgrade) {
                Some(body) => body,
                None => {
                    let body = Arc::new(build_body(&registry));
                    // Forget dead entries now and then, so the table stays the size of the
                    // distinct bodies in use.
                    if bodies.len() >= 64 && bodies.len().is_power_of_two() {
                        bodies.retain(|_, weak| weak.strong_count() > 0);
                    }
                    bodies.insert(digest, Arc::downgrade(&body));
                    body
                }
            }
        };
        Registry {
            tenant: registry.tenant,
            role: registry.role,
            revision: registry.revision,
            rate_limit_per_minute: registry.rate_limit_per_minute,
            lint_webhook: registry.lint_webhook,
            tenant_uid: registry.tenant_uid,
            approvals: registry.approvals,
            connections: registry.connections,
            body,
            narrowed: std::sync::Mutex::default(),
        }
    }

    /// This registry as a caller narrowed to `providers` sees it: the tools of those
    /// providers and the platform tools (no provider); itself when nothing is hidden.
    pub fn narrowed_to(self: &Arc<Self>, providers: &[String]) -> Arc<Registry> {
        let keeps = |tool: &EdgeTool| {
            tool.resolved
                .provider
                .as_deref()
                .is_none_or(|p| providers.iter().any(|q| q == p))
        };
        if self.tools.iter().all(keeps) {
            return Arc::clone(self);
        }
        let mut memo = self.narrowed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, registry)) = memo.iter().find(|(key, _)| key == providers) {
            return Arc::clone(registry);
        }
        let tools: Vec<EdgeTool> = self
            .tools
            .iter()
            .filter(|tool| keeps(tool))
            .map(|tool| EdgeTool::new(tool.resolved.clone()))
            .collect();
        let body = Arc::new(self.body.narrowed(tools, providers));
        let narrowed = Arc::new(Registry {
            tenant: self.tenant.clone(),
            role: self.role.clone(),
            revision: self.revision,
            rate_limit_per_minute: self.rate_limit_per_minute,
            lint_webhook: self.lint_webhook.clone(),
            tenant_uid: self.tenant_uid.clone(),
            approvals: self.approvals.clone(),
            connections: self.connections.clone(),
            body,
            narrowed: std::sync::Mutex::default(),
        });
        if memo.len() < MAX_NARROWED {
            memo.push((providers.to_vec(), Arc::clone(&narrowed)));
        }
        narrowed
    }

    /// Whether two registries share one body.
    pub fn shares_body_with(&self, other: &Registry) -> bool {
        Arc::ptr_eq(&self.body, &other.body)
    }

    /// Decodes the shared-cache form.
    pub fn decode(bytes: &[u8]) -> Option<Registry> {
        pb::ResolvedRegistry::decode(bytes)
            .ok()
            .map(Registry::from_pb)
    }

    /// The approval rule of a call of `tool`'s `action` ("" for a plain tool) with
    /// `arguments`: the first that names the tool, no action or this one, and no condition or
    /// one the arguments meet (an absent argument counts as its schema default).
    pub fn approval(
        &self,
        tool: &str,
        action: &str,
        arguments: &Value,
    ) -> Option<&pb::ApprovalRule> {
        self.approvals.iter().find(|rule| {
            rule.tool == tool
                && (rule.action.is_empty() || rule.action == action)
                && (rule.when_argument.is_empty() || self.meets(rule, tool, arguments))
        })
    }

    /// Whether `arguments` meet `rule`'s condition.
    fn meets(&self, rule: &pb::ApprovalRule, tool: &str, arguments: &Value) -> bool {
        let Ok(expected) = serde_json::from_str::<Value>(&rule.when_equals) else {
            // A condition no edge can read applies: asking too often is the safe side.
            return true;
        };
        let value = arguments.get(&rule.when_argument).or_else(|| {
            self.tool(tool)
                .and_then(|t| schema_default(&t.resolved.input_schema, &rule.when_argument))
        });
        value == Some(&expected)
    }

    /// A tool the caller may see, by name.
    pub fn tool(&self, name: &str) -> Option<&EdgeTool> {
        self.body.index.get(name).map(|&i| &self.body.tools[i])
    }
}

#[cfg(test)]
mod interning_tests {
    use super::*;

    fn resolved(tenant: &str, tools: &[&str]) -> pb::ResolvedRegistry {
        pb::ResolvedRegistry {
            tenant: tenant.into(),
            role: "collector".into(),
            revision: 7,
            tools: tools
                .iter()
                .map(|name| pb::ResolvedTool {
                    name: (*name).into(),
                    description: format!("{name} does things"),
                    input_schema: tp_proto::json::to_struct(&serde_json::json!({"type": "object"})),
                    executor: "demo".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn tenants_with_the_same_tools_share_one_body_and_keep_their_own_identity() {
        let a = Registry::from_pb(resolved("tenant-a", &["gmail", "web_fetch"]));
        let b = Registry::from_pb(resolved("tenant-b", &["gmail", "web_fetch"]));
        let c = Registry::from_pb(resolved("tenant-c", &["gmail"]));
        assert!(a.shares_body_with(&b));
        assert!(!a.shares_body_with(&c));
        assert_eq!(
            (a.tenant.as_str(), b.tenant.as_str()),
            ("tenant-a", "tenant-b")
        );
        assert_eq!(b.tools.len(), 2);
        assert!(b.tool("web_fetch").is_some() && c.tool("web_fetch").is_none());
        // Once no registry uses a body, the next one builds its own.
        drop((a, b));
        let d = Registry::from_pb(resolved("tenant-d", &["gmail", "web_fetch"]));
        assert_eq!(d.tools.len(), 2);
    }
}
