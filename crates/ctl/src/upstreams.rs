//! `executors import` and `executors drift`: an MCP executor's live tool list against the
//! catalogue.

use std::collections::BTreeMap;

use anyhow::bail;
use serde_json::{Value, json};
use tp_proto::pb;
use tp_registry as domain;
use tp_upstream::Upstream;

use crate::Admin;

/// Options of `executors import`.
#[derive(Debug)]
pub struct ImportOptions {
    /// Provider of the imported tools (empty = platform).
    pub provider: String,
    /// The catalogue category the imported tools go under.
    pub category: String,
    /// Only these upstream names (empty = all).
    pub only: Vec<String>,
    /// ADR admitting them.
    pub adr: String,
    /// Or owner + scope.
    pub owner: String,
    /// What the owner admits them for (with `owner`, instead of an ADR).
    pub scope: String,
}

/// The MCP executor `name`, and an upstream client for it (credential from `credential`, or
/// from the executor's `credential_env` in this environment).
async fn upstream(
    admin: &mut Admin,
    name: &str,
    credential: Option<String>,
) -> anyhow::Result<(domain::Executor, Upstream)> {
    let info = admin
        .executors
        .get_executor(pb::GetExecutorRequest { name: name.into() })
        .await?
        .into_inner();
    let executor = domain::Executor::from(&info);
    if executor.protocol != domain::ExecutorProtocol::Mcp {
        bail!(
            "executor {name:?} speaks {}, not mcp",
            executor.protocol.as_str()
        );
    }
    let header = if executor.credential_header.is_empty() {
        "authorization".to_owned()
    } else {
        executor.credential_header.to_ascii_lowercase()
    };
    // The edges' TLS settings for MCP upstreams, from the same environment variables.
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let http = tp_upstream::http_client(
        &var("TOOLPLANE_EDGE_EXECUTORS__UPSTREAM_CA_FILE"),
        &var("TOOLPLANE_EDGE_EXECUTORS__UPSTREAM_CERT_FILE"),
        &var("TOOLPLANE_EDGE_EXECUTORS__UPSTREAM_KEY_FILE"),
    )?;
    let client = match credential {
        Some(value) => {
            Upstream::with_credential(executor.clone(), Some((header, value))).with_http(http)
        }
        None => Upstream::new(
            executor.clone(),
            tp_upstream::DEFAULT_CREDENTIAL_ENV_PREFIX,
            http,
        ),
    };
    Ok((executor, client))
}

/// Catalogue entries (the `def` shape `tools register` reads) for the upstream's tools.
pub async fn proposals(
    admin: &mut Admin,
    name: &str,
    credential: Option<String>,
    options: &ImportOptions,
) -> anyhow::Result<Vec<domain::ToolDef>> {
    let (executor, client) = upstream(admin, name, credential).await?;
    let tools = client.list_tools().await?;
    let admission = domain::Admission {
        adr: (!options.adr.is_empty()).then(|| options.adr.clone()),
        owner: (!options.owner.is_empty()).then(|| options.owner.clone()),
        scope: (!options.scope.is_empty()).then(|| options.scope.clone()),
    };
    let mut defs = Vec::new();
    for tool in tools {
        if !options.only.is_empty() && !options.only.contains(&tool.name.to_string()) {
            continue;
        }
        let mut def = catalogue_entry(&tool, &executor.tool_prefix, name)?;
        def.category = options.category.clone();
        def.provider = (!options.provider.is_empty()).then(|| options.provider.clone());
        def.admission = admission.clone();
        defs.push(def);
    }
    Ok(defs)
}

/// The catalogue's entry for one upstream tool, as `executors import` writes it and `executors
/// drift` compares it ([`tp_upstream::definition`]); no category, provider or admission.
fn catalogue_entry(
    tool: &tp_upstream::UpstreamTool,
    prefix: &str,
    executor: &str,
) -> anyhow::Result<domain::ToolDef> {
    let (name, upstream) = tp_upstream::definition(tool, prefix, executor);
    Ok(domain::ToolDef {
        name,
        title: upstream.title,
        description: upstream.description,
        category: String::new(),
        provider: None,
        input_schema: upstream.input_schema,
        output_schema: upstream.output_schema,
        annotations: upstream.annotations,
        executor: executor.to_owned(),
        roles: Vec::new(),
        examples: Vec::new(),
        client_capabilities: Vec::new(),
        bucket: None,
        admission: domain::Admission::default(),
        polymorphism: None,
    })
}

/// What differs between the catalogue's tools of executor `name` and the upstream's list.
pub async fn drift(
    admin: &mut Admin,
    name: &str,
    credential: Option<String>,
) -> anyhow::Result<Value> {
    let (executor, client) = upstream(admin, name, credential).await?;
    let mut live = BTreeMap::new();
    for tool in client.list_tools().await? {
        let (catalogue_name, definition) =
            tp_upstream::definition(&tool, &executor.tool_prefix, name);
        live.insert(catalogue_name, definition);
    }
    let mut catalogued = BTreeMap::new();
    let mut page_token = String::new();
    loop {
        let page = admin
            .catalog
            .list_tools(pb::ListToolsRequest {
                page_size: 500,
                page_token: page_token.clone(),
                ..Default::default()
            })
            .await?
            .into_inner();
        for tool in page.tools {
            let retired = tool.status == pb::ToolStatus::Retired as i32;
            if let Some(spec) = tool.spec
                && spec.executor == name
                && !retired
            {
                let def = tp_proto::convert::try_tool_def(Some(spec))?;
                catalogued.insert(def.name.clone(), def);
            }
        }
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    let added: Vec<&String> = live
        .keys()
        .filter(|n| !catalogued.contains_key(*n))
        .collect();
    let removed: Vec<&String> = catalogued
        .keys()
        .filter(|n| !live.contains_key(*n))
        .collect();
    // The fields models are shown that differ ([`domain::ToolDef::differs_from`], the check
    // the control plane's drift quarantine makes).
    let changed: BTreeMap<&String, Vec<String>> = catalogued
        .iter()
        .filter_map(|(n, def): (&String, &domain::ToolDef)| {
            Some((n, def.differs_from(live.get(n)?)))
        })
        .filter(|(_, fields)| !fields.is_empty())
        .collect();
    let schema_changed: Vec<&&String> = changed
        .iter()
        .filter(|(_, fields)| fields.iter().any(|f| f == "input_schema"))
        .map(|(n, _)| n)
        .collect();
    Ok(json!({
        "executor": name,
        "protocol_version": client.protocol_version().await.unwrap_or_default(),
        "upstream_tools": live.len(),
        "catalogued_tools": catalogued.len(),
        "added": added,
        "removed": removed,
        "changed": changed,
        "schema_changed": schema_changed,
    }))
}
