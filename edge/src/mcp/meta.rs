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
        ctx: &CallContext<'_>,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments = arguments.unwrap_or_default();
        match meta {
            MetaTool::Capabilities => {
                let args: disclosure::CapabilitiesArgs = decode("capabilities", arguments)?;
                let category = args.category.as_deref();
                let answer =
                    disclosure::capabilities(&registry.tools, category, registry.progressive)
                        .ok_or_else(|| {
                            fault(
                                Fault::InvalidParams,
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
                let args: disclosure::ToolSchemaArgs = decode("tool_schema", arguments)?;
                if let Some(action) = &args.action {
                    let (Some(name), None) = (&args.tool, &args.tools) else {
                        return Err(fault(
                            Fault::InvalidParams,
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
                        fault(Fault::InvalidParams,
                            format!("tool_schema: {name} has no action {action:?} for you (allowed: {allowed})"),
                            None,
                        )
                    })?;
                    return Ok(CallToolResult::structured(json!({ "tools": [entry] })));
                }
                let names: Vec<String> = match (args.tool, args.tools) {
                    (Some(name), None) => vec![name],
                    (None, Some(names)) => names.0,
                    _ => {
                        return Err(fault(
                            Fault::InvalidParams,
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
                let args: disclosure::DispatchArgs = decode("dispatch", arguments)?;
                let (name, inner) = dispatch_target(args)?;
                self.call(identity, registry, &name, inner, Retry::default(), ctx)
                    .await
                    .map(|response| complete(response, &name))
            }
            MetaTool::DispatchParallel => {
                let args: disclosure::DispatchParallelArgs =
                    decode("dispatch_parallel", arguments)?;
                let limit = self.state.config.request_timeout();
                let timeout = args.timeout_ms.map_or(limit, |ms| {
                    std::time::Duration::from_millis(ms.get()).min(limit)
                });
                let calls = args
                    .calls
                    .0
                    .into_iter()
                    .map(dispatch_target)
                    .collect::<Result<Vec<_>, _>>()?;
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
                                if let Some(meta) = result.meta {
                                    entry["_meta"] = Value::Object(meta.0);
                                }
                                entry
                            }
                            Ok(Err(error)) => json!({
                                "tool": name,
                                "error": {"code": error.code.0, "message": error.message, "data": error.data},
                            }),
                            // Like an executor that does not answer in time: a tool
                            // error, not a protocol error.
                            Err(_) => json!({
                                "tool": name,
                                "isError": true,
                                "content": [{"type": "text", "text": format!(
                                    "{name} did not answer within {} ms (timeout_ms)",
                                    timeout.as_millis()
                                )}],
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

/// A meta-tool's arguments as their type ([`disclosure::decode`]); anything else is -32602.
fn decode<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: rmcp::model::JsonObject,
) -> Result<T, ErrorData> {
    disclosure::decode(tool, arguments)
        .map_err(|message| fault(Fault::InvalidParams, message, None))
}

/// `tool` and `arguments` of a dispatch; meta-tools cannot be dispatched.
fn dispatch_target(
    args: disclosure::DispatchArgs,
) -> Result<(String, Option<rmcp::model::JsonObject>), ErrorData> {
    if MetaTool::parse(&args.tool).is_some() {
        return Err(unknown_tool(&args.tool));
    }
    Ok((args.tool, args.arguments))
}
