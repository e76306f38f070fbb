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
        ExecutorsCmd::Upsert {
            name,
            endpoint,
            protocol,
            timeout_ms,
            max_concurrency,
            description,
            tool_prefix,
            credential_env,
            credential_header,
        } => {
            let protocol = match protocol.as_str() {
                "grpc" => pb::ExecutorProtocol::Grpc,
                "mcp" => pb::ExecutorProtocol::Mcp,
                other => bail!("unknown protocol {other:?} (grpc, mcp)"),
            };
            let executor = pb::ExecutorInfo {
                name,
                endpoint,
                protocol: protocol as i32,
                timeout_ms,
                max_concurrency,
                description,
                tool_prefix,
                credential_env,
                credential_header,
            };
            vec![
                admin
                    .executors
                    .upsert_executor(pb::UpsertExecutorRequest {
                        executor: Some(executor),
                    })
                    .await?
                    .into_inner(),
            ]
        }
        ExecutorsCmd::Import {
            name,
            provider,
            category,
            only,
            register,
            adr,
            owner,
            scope,
            credential,
        } => {
            if register && adr.is_empty() && (owner.is_empty() || scope.is_empty()) {
                bail!(
                    "--register needs --adr, or --owner and --scope: every tool is admitted by one"
                );
            }
            let options = crate::upstreams::ImportOptions {
                provider,
                category,
                only,
                adr,
                owner,
                scope,
            };
            let defs = crate::upstreams::proposals(&mut admin, &name, credential, &options).await?;
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
            return Ok(0);
        }
        ExecutorsCmd::Drift { name, credential } => {
            let report = crate::upstreams::drift(&mut admin, &name, credential).await?;
            let drifted = ["added", "removed", "schema_changed"]
                .iter()
                .any(|k| report[*k].as_array().is_some_and(|a| !a.is_empty()));
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
                    ("schema_changed", "input schema changed"),
                ] {
                    for tool in report[key].as_array().into_iter().flatten() {
                        out!("  {label}: {}", tool.as_str().unwrap_or_default());
                    }
                }
                if !drifted {
                    out!("  no drift");
                }
            }
            return Ok(i32::from(drifted));
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
    Ok(0)
}
