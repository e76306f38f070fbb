//! The meta-tools of progressive disclosure (ADR 0006): `capabilities`, `tool_schema`,
//! `dispatch` and `dispatch_parallel`.

use super::*;

/// A complete result, or an error result for a call that asked for client input where the
/// caller (`dispatch`, `dispatch_parallel`) cannot answer it.
fn complete(response: CallToolResponse, name: &str) -> CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        _ => CallToolResult::error(vec![ContentBlock::text(format!(
            "{name} needs input from the client (elicitation, sampling or roots) before it can finish; call it directly with tools/call"
        ))]),
    }
}

impl McpHandler {
    /// Serves a meta-tool (ADR 0006) from the caller's registry.
    pub(super) async fn meta_tool(
        &self,
        identity: &Identity,
        registry: &Registry,
        meta: MetaTool,
        arguments: Option<rmcp::model::JsonObject>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments = arguments.unwrap_or_default();
        match meta {
            MetaTool::Capabilities => {
                only_keys(&arguments, "capabilities", &["category"])?;
                let category = optional_str(&arguments, "category")?;
                let answer =
                    disclosure::capabilities(&registry.tools, category, registry.progressive)
                        .ok_or_else(|| {
                            ErrorData::invalid_params(
                                format!("unknown category: {}", category.unwrap_or_default()),
                                None,
                            )
                        })?;
                let mut result = CallToolResult::success(vec![ContentBlock::text(
                    disclosure::capabilities_text(&answer),
                )]);
                result.structured_content = Some(answer);
                Ok(result)
            }
            MetaTool::ToolSchema => {
                only_keys(&arguments, "tool_schema", &["tool", "tools", "action"])?;
                if let Some(action) = optional_str(&arguments, "action")? {
                    let Some(Value::String(name)) = arguments.get("tool") else {
                        return Err(ErrorData::invalid_params(
                            "tool_schema: `action` goes with `tool`",
                            None,
                        ));
                    };
                    let tool = registry.tool(name).ok_or_else(|| unknown_tool(name))?;
                    let entry = disclosure::action_schema_entry(tool, action).ok_or_else(|| {
                        let allowed = tool
                            .resolved
                            .actions
                            .as_ref()
                            .map(|set| set.allowed.join(", "))
                            .unwrap_or_default();
                        ErrorData::invalid_params(
                            format!("tool_schema: {name} has no action {action:?} for you (allowed: {allowed})"),
                            None,
                        )
                    })?;
                    return Ok(CallToolResult::structured(json!({ "tools": [entry] })));
                }
                let names: Vec<String> = match (arguments.get("tool"), arguments.get("tools")) {
                    (Some(Value::String(name)), None) => vec![name.clone()],
                    (None, Some(Value::Array(names)))
                        if !names.is_empty() && names.len() <= disclosure::MAX_SCHEMA_BATCH =>
                    {
                        names
                            .iter()
                            .map(|n| n.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| {
                                ErrorData::invalid_params(
                                    "tool_schema: `tools` must be names",
                                    None,
                                )
                            })?
                    }
                    _ => {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "tool_schema takes either `tool` (a name) or `tools` (1 to {} names)",
                                disclosure::MAX_SCHEMA_BATCH
                            ),
                            None,
                        ));
                    }
                };
                let mut schemas = Vec::with_capacity(names.len());
                for name in &names {
                    if let Some(meta) = disclosure::meta_tools()
                        .iter()
                        .find(|t| t.name == name.as_str())
                    {
                        schemas.push(json!({"name": meta.name, "description": meta.description, "inputSchema": meta.input_schema}));
                        continue;
                    }
                    let tool = registry.tool(name).ok_or_else(|| unknown_tool(name))?;
                    schemas.push(disclosure::schema_entry(tool));
                }
                Ok(CallToolResult::structured(json!({ "tools": schemas })))
            }
            MetaTool::Dispatch => {
                only_keys(&arguments, "dispatch", &["tool", "arguments"])?;
                let (name, inner) = dispatch_target(&arguments)?;
                self.call(identity, registry, &name, inner, Retry::default(), ctx)
                    .await
                    .map(|response| complete(response, &name))
            }
            MetaTool::DispatchParallel => {
                only_keys(&arguments, "dispatch_parallel", &["calls", "timeout_ms"])?;
                let limit = self.state.config.request_timeout();
                let timeout = match arguments.get("timeout_ms") {
                    None => limit,
                    Some(value) => match value.as_u64() {
                        Some(ms) if ms >= 1 => std::time::Duration::from_millis(ms).min(limit),
                        _ => {
                            return Err(ErrorData::invalid_params(
                                "dispatch_parallel: `timeout_ms` must be a positive integer",
                                None,
                            ));
                        }
                    },
                };
                let calls = match arguments.get("calls") {
                    Some(Value::Array(calls))
                        if !calls.is_empty() && calls.len() <= disclosure::MAX_PARALLEL_CALLS =>
                    {
                        calls
                            .iter()
                            .map(|call| match call {
                                Value::Object(call) => {
                                    only_keys(call, "dispatch_parallel call", &["tool", "arguments"])?;
                                    dispatch_target(call)
                                }
                                _ => Err(ErrorData::invalid_params(
                                    "dispatch_parallel: every call is an object with `tool` and `arguments`",
                                    None,
                                )),
                            })
                            .collect::<Result<Vec<_>, _>>()?
                    }
                    _ => {
                        return Err(ErrorData::invalid_params(
                            format!(
                                "dispatch_parallel: `calls` must hold 1 to {} calls",
                                disclosure::MAX_PARALLEL_CALLS
                            ),
                            None,
                        ));
                    }
                };
                use futures::StreamExt as _;
                let results: Vec<Value> = futures::stream::iter(calls)
                    .map(|(name, inner)| async move {
                        let outcome =
                            tokio::time::timeout(timeout, self.call(identity, registry, &name, inner, Retry::default(), ctx))
                                .await
                                .map(|outcome| outcome.map(|response| complete(response, &name)));
                        match outcome {
                            Ok(Ok(result)) => {
                                let mut entry = json!({
                                    "tool": name,
                                    "isError": result.is_error.unwrap_or(false),
                                    "content": result.content,
                                });
                                if let Some(structured) = result.structured_content {
                                    entry["structuredContent"] = structured;
                                }
                                entry
                            }
                            Ok(Err(error)) => json!({
                                "tool": name,
                                "error": {"code": error.code.0, "message": error.message, "data": error.data},
                            }),
                            Err(_) => json!({
                                "tool": name,
                                "error": {"code": -32001, "message": format!("timed out after {} ms", timeout.as_millis())},
                            }),
                        }
                    })
                    .buffered(disclosure::PARALLEL_FAN_OUT)
                    .collect()
                    .await;
                Ok(CallToolResult::structured(json!({ "results": results })))
            }
        }
    }
}

/// Refuses keys other than `allowed` in a meta-tool's arguments.
fn only_keys(
    arguments: &rmcp::model::JsonObject,
    tool: &str,
    allowed: &[&str],
) -> Result<(), ErrorData> {
    match arguments.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(ErrorData::invalid_params(
            format!(
                "{tool}: unknown argument {key:?} (allowed: {})",
                allowed.join(", ")
            ),
            None,
        )),
        None => Ok(()),
    }
}

fn optional_str<'a>(
    arguments: &'a rmcp::model::JsonObject,
    key: &str,
) -> Result<Option<&'a str>, ErrorData> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.as_str())),
        Some(_) => Err(ErrorData::invalid_params(
            format!("`{key}` must be a string"),
            None,
        )),
    }
}

/// `tool` and `arguments` of a dispatch; meta-tools cannot be dispatched.
fn dispatch_target(
    arguments: &rmcp::model::JsonObject,
) -> Result<(String, Option<rmcp::model::JsonObject>), ErrorData> {
    let Some(Value::String(name)) = arguments.get("tool") else {
        return Err(ErrorData::invalid_params(
            "dispatch: `tool` (a tool name) is required",
            None,
        ));
    };
    if MetaTool::parse(name).is_some() {
        return Err(unknown_tool(name));
    }
    let inner = match arguments.get("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(inner)) => Some(inner.clone()),
        Some(_) => {
            return Err(ErrorData::invalid_params(
                "dispatch: `arguments` must be an object",
                None,
            ));
        }
    };
    Ok((name.clone(), inner))
}
