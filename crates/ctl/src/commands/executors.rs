//! `executors …`, including MCP imports and drift.

use super::*;

pub(super) async fn executors(
    mut admin: Admin,
    cmd: ExecutorsCmd,
    json_out: bool,
) -> anyhow::Result<i32> {
    let list = match cmd {
        ExecutorsCmd::List => {
            admin
                .executors
                .list_executors(pb::ListExecutorsRequest {})
                .await?
                .into_inner()
                .executors
        }
        upsert @ ExecutorsCmd::Upsert { .. } => upsert_executor(&mut admin, upsert).await?,
        cmd @ ExecutorsCmd::Import { .. } => return import(&mut admin, cmd).await,
        ExecutorsCmd::Drift { name, credential } => {
            return drift(&mut admin, &name, credential, json_out).await;
        }
        ExecutorsCmd::Delete { name } => {
            let deleted = admin
                .executors
                .delete_executor(pb::DeleteExecutorRequest { name: name.clone() })
                .await?
                .into_inner();
            out!("deleted executor {name} (revision {})", deleted.revision);
            return Ok(0);
        }
    };
    print_executors(&list, json_out);
    Ok(0)
}

/// `executors upsert`: only what was given changes; an existing executor keeps the rest.
async fn upsert_executor(
    admin: &mut Admin,
    cmd: ExecutorsCmd,
) -> anyhow::Result<Vec<pb::ExecutorInfo>> {
    let ExecutorsCmd::Upsert {
        name,
        endpoint,
        protocol,
        timeout_ms,
        max_concurrency,
        description,
        tool_prefix,
        credential_env,
        credential_header,
        token_exchange,
    } = cmd
    else {
        unreachable!("called with executors upsert only");
    };
    let mut paths = Vec::new();
    let mut executor = pb::ExecutorInfo {
        name,
        ..Default::default()
    };
    if let Some(endpoint) = endpoint {
        executor.endpoint = endpoint;
        paths.push("endpoint");
    }
    if let Some(protocol) = protocol {
        executor.protocol = protocol_of(&protocol)? as i32;
        paths.push("protocol");
    }
    if let Some(timeout_ms) = timeout_ms {
        executor.timeout_ms = timeout_ms;
        paths.push("timeout_ms");
    }
    if let Some(max_concurrency) = max_concurrency {
        executor.max_concurrency = max_concurrency;
        paths.push("max_concurrency");
    }
    if let Some(description) = description {
        executor.description = description;
        paths.push("description");
    }
    if let Some(tool_prefix) = tool_prefix {
        executor.tool_prefix = tool_prefix;
        paths.push("tool_prefix");
    }
    if let Some(credential_env) = credential_env {
        executor.credential_env = credential_env;
        paths.push("credential_env");
    }
    if let Some(credential_header) = credential_header {
        executor.credential_header = credential_header;
        paths.push("credential_header");
    }
    if let Some(token_exchange) = token_exchange {
        executor.token_exchange = token_exchange_of(&token_exchange)?;
        paths.push("token_exchange");
    }
    if paths.is_empty() {
        bail!("nothing to change: give at least one of the flags (see --help)");
    }
    Ok(vec![
        admin
            .executors
            .upsert_executor(pb::UpsertExecutorRequest {
                executor: Some(executor),
                update_mask: Some(prost_types::FieldMask {
                    paths: paths.iter().map(|p| (*p).to_owned()).collect(),
                }),
            })
            .await?
            .into_inner(),
    ])
}

/// The executor protocol of `--protocol` (`grpc` or `mcp`).
fn protocol_of(protocol: &str) -> anyhow::Result<pb::ExecutorProtocol> {
    Ok(match protocol {
        "grpc" => pb::ExecutorProtocol::Grpc,
        "mcp" => pb::ExecutorProtocol::Mcp,
        other => bail!("unknown protocol {other:?} (grpc, mcp)"),
    })
}

/// `--token-exchange`: a JSON object of the exchange's settings; empty = none.
fn token_exchange_of(text: &str) -> anyhow::Result<Option<pb::TokenExchange>> {
    const FIELDS: [&str; 5] = [
        "token_endpoint",
        "client_id",
        "client_secret_env",
        "audience",
        "scope",
    ];
    if text.trim().is_empty() {
        return Ok(None);
    }
    let given: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
        .map_err(|e| anyhow::anyhow!("--token-exchange: not a JSON object ({e})"))?;
    let field = |name: &str| -> anyhow::Result<String> {
        match given.get(name) {
            None => Ok(String::new()),
            Some(serde_json::Value::String(value)) => Ok(value.clone()),
            Some(_) => bail!("--token-exchange: {name} must be a string"),
        }
    };
    if let Some(unknown) = given.keys().find(|key| !FIELDS.contains(&key.as_str())) {
        bail!(
            "--token-exchange: unknown field {unknown:?} (known: {})",
            FIELDS.join(", ")
        );
    }
    Ok(Some(pb::TokenExchange {
        token_endpoint: field("token_endpoint")?,
        client_id: field("client_id")?,
        client_secret_env: field("client_secret_env")?,
        audience: field("audience")?,
        scope: field("scope")?,
    }))
}

/// `executors import`: the upstream's tools as proposed definitions, or registered.
async fn import(admin: &mut Admin, cmd: ExecutorsCmd) -> anyhow::Result<i32> {
    let ExecutorsCmd::Import {
        name,
        provider,
        category,
        only,
        register,
        adr,
        owner,
        scope,
        credential,
    } = cmd
    else {
        unreachable!("called with executors import only");
    };
    if register && adr.is_empty() && (owner.is_empty() || scope.is_empty()) {
        bail!("--register needs --adr, or --owner and --scope: every tool is admitted by one");
    }
    let options = crate::upstreams::ImportOptions {
        provider,
        category,
        only,
        adr,
        owner,
        scope,
    };
    let defs = crate::upstreams::proposals(admin, &name, credential, &options).await?;
    if !register {
        out!("{}", pretty(&json!(defs)));
        return Ok(0);
    }
    let mut admitted = 0;
    let mut progress =
        crate::progress::Progress::new(&format!("registering {name}'s tools"), defs.len());
    for def in &defs {
        let spec = pb::ToolSpec::from(def);
        match admin
            .catalog
            .register_tool(pb::RegisterToolRequest { tool: Some(spec) })
            .await
        {
            Ok(_) => {
                admitted += 1;
                progress.step(&def.name);
                out!("registered {}", def.name);
            }
            Err(status) => {
                out!(
                    "{} of {} registered; {} refused:\n{}",
                    admitted,
                    defs.len(),
                    def.name,
                    describe_error(&anyhow::Error::new(status))
                );
                return Ok(1);
            }
        }
    }
    out!("{admitted} tools registered from {name}");
    Ok(0)
}

/// `executors drift`: what changed upstream against the catalogue; exit 1 when anything did.
async fn drift(
    admin: &mut Admin,
    name: &str,
    credential: Option<String>,
    json_out: bool,
) -> anyhow::Result<i32> {
    let report = crate::upstreams::drift(admin, name, credential).await?;
    let drifted = ["added", "removed"]
        .iter()
        .any(|k| report[*k].as_array().is_some_and(|a| !a.is_empty()))
        || report["changed"].as_object().is_some_and(|m| !m.is_empty());
    if json_out {
        out!("{}", pretty(&report));
    } else {
        out!(
            "{name} ({}): {} upstream tools, {} in the catalogue",
            report["protocol_version"].as_str().unwrap_or_default(),
            report["upstream_tools"],
            report["catalogued_tools"]
        );
        for (key, label) in [
            ("added", "new upstream (not in the catalogue)"),
            ("removed", "gone upstream (still in the catalogue)"),
        ] {
            for tool in report[key].as_array().into_iter().flatten() {
                out!("  {label}: {}", tool.as_str().unwrap_or_default());
            }
        }
        for (tool, fields) in report["changed"].as_object().into_iter().flatten() {
            let fields: Vec<&str> = fields
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            out!("  changed upstream: {tool} ({})", fields.join(", "));
        }
        if !drifted {
            out!("  no drift");
        }
    }
    Ok(i32::from(drifted))
}

/// The executors as JSON or a table.
fn print_executors(list: &[pb::ExecutorInfo], json_out: bool) {
    if json_out {
        let values: Vec<Value> = list
            .iter()
            .map(|e| json!(domain::Executor::from(e)))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
    } else {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|e| {
                let executor = domain::Executor::from(e);
                vec![
                    executor.name,
                    executor.protocol.as_str().into(),
                    executor.endpoint,
                    executor.timeout_ms.to_string(),
                    executor.max_concurrency.to_string(),
                ]
            })
            .collect();
        out!(
            "{}",
            table(
                &["NAME", "PROTOCOL", "ENDPOINT", "TIMEOUT_MS", "CONCURRENCY"],
                &rows
            )
        );
    }
}
