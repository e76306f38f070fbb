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
    /// Category.
    pub category: String,
    /// Only these upstream names (empty = all).
    pub only: Vec<String>,
    /// ADR admitting them.
    pub adr: String,
    /// Or owner + scope.
    pub owner: String,
    /// Scope.
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
        let upstream_name = tool.name.to_string();
        if !options.only.is_empty() && !options.only.contains(&upstream_name) {
            continue;
        }
        let value = serde_json::to_value(&tool)?;
        let description = tool
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map_or_else(
                || format!("{upstream_name} (from the MCP server {name})"),
                str::to_owned,
            );
        let annotations = &value["annotations"];
        defs.push(domain::ToolDef {
            name: format!("{}{upstream_name}", executor.tool_prefix),
            title: value["title"]
                .as_str()
                .or_else(|| annotations["title"].as_str())
                .unwrap_or_default()
                .to_owned(),
            description: description
                .chars()
                .take(domain::ident::MAX_DESCRIPTION)
                .collect(),
            category: options.category.clone(),
            provider: (!options.provider.is_empty()).then(|| options.provider.clone()),
            input_schema: value["inputSchema"].clone(),
            output_schema: value
                .get("outputSchema")
                .filter(|schema| schema.is_object())
                .cloned(),
            annotations: domain::Annotations {
                read_only: annotations["readOnlyHint"].as_bool(),
                destructive: annotations["destructiveHint"].as_bool(),
                idempotent: annotations["idempotentHint"].as_bool(),
                open_world: annotations["openWorldHint"].as_bool(),
            },
            executor: name.to_owned(),
            roles: Vec::new(),
            examples: Vec::new(),
            client_capabilities: Vec::new(),
            bucket: None,
            admission: admission.clone(),
            polymorphism: None,
        });
    }
    Ok(defs)
}

/// A JSON Schema as the catalogue stores it (through `google.protobuf.Struct`, where every
/// number is a double), so that equal schemas compare equal.
fn normalised(schema: &Value) -> Value {
    tp_proto::json::to_struct(schema)
        .map(|s| tp_proto::json::from_struct(&s))
        .unwrap_or_else(|| schema.clone())
}

/// What differs between the catalogue's tools of executor `name` and the upstream's list.
pub async fn drift(
    admin: &mut Admin,
    name: &str,
    credential: Option<String>,
) -> anyhow::Result<Value> {
    let (executor, client) = upstream(admin, name, credential).await?;
    let live: BTreeMap<String, Value> = client
        .list_tools()
        .await?
        .into_iter()
        .map(|tool| {
            let schema = serde_json::to_value(&tool)
                .map(|v| v["inputSchema"].clone())
                .unwrap_or_default();
            (format!("{}{}", executor.tool_prefix, tool.name), schema)
        })
        .collect();
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
                let schema = spec
                    .input_schema
                    .as_ref()
                    .map(tp_proto::json::from_struct)
                    .unwrap_or_default();
                catalogued.insert(spec.name, schema);
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
    let changed: Vec<&String> = catalogued
        .iter()
        .filter(|(n, schema)| live.get(*n).is_some_and(|l| normalised(l) != **schema))
        .map(|(n, _)| n)
        .collect();
    Ok(json!({
        "executor": name,
        "protocol_version": client.protocol_version().await.unwrap_or_default(),
        "upstream_tools": live.len(),
        "catalogued_tools": catalogued.len(),
        "added": added,
        "removed": removed,
        "schema_changed": changed,
    }))
}
