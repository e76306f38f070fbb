//! The meta-tools of progressive disclosure (ADR 0006): `capabilities`, `tool_schema`,
//! `dispatch` and `dispatch_parallel`.

use super::*;

/// A complete result, or an error result for a call that asked for client input where the
/// caller (`dispatch_parallel`, whose calls share one result) cannot answer it.
fn complete(response: CallToolResponse, name: &str) -> CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        _ => CallToolResult::error(vec![ContentBlock::text(format!(
            "{name} needs input from the client (elicitation, sampling or roots) before it can finish; call it alone, with dispatch or tools/call"
        ))]),
    }
}

impl McpHandler {
    /// Serves a meta-tool (ADR 0006) from the caller's registry. `dispatch` answers exactly as
    /// `tools/call` of its tool would, an input-required result included: `retry` (the
    /// client's answers and the sealed state, on 2026-07-28) goes to the dispatched call, whose
    /// seal names that tool and its arguments.
    pub(super) async fn meta_tool(
        &self,
        identity: &Identity,
        registry: &Registry,
        meta: MetaTool,
        arguments: Option<rmcp::model::JsonObject>,
        retry: Retry,
        ctx: &CallContext<'_>,
    ) -> Result<CallToolResponse, Error> {
        let arguments = arguments.unwrap_or_default();
        let answer = match meta {
            MetaTool::Dispatch => {
                let args: disclosure::DispatchArgs = decode("dispatch", arguments)?;
                let (name, inner) = dispatch_target(args)?;
                return self
                    .call(identity, registry, &name, inner, retry, ctx)
                    .await;
            }
            MetaTool::Capabilities => self.capabilities(registry, arguments, ctx).await,
            MetaTool::ToolSchema => tool_schema(registry, decode("tool_schema", arguments)?),
            MetaTool::DispatchParallel => {
                let args = decode("dispatch_parallel", arguments)?;
                self.dispatch_parallel(identity, registry, args, ctx).await
            }
        };
        answer.map(CallToolResponse::from)
    }

    /// `capabilities`, with the search index built off the async workers when a query needs
    /// it, and the cache hint of 2026-07-28.
    async fn capabilities(
        &self,
        registry: &Registry,
        arguments: rmcp::model::JsonObject,
        ctx: &CallContext<'_>,
    ) -> Result<CallToolResult, Error> {
        let stateless = ctx
            .meta
            .contains_key(crate::transport::rules::META_PROTOCOL_VERSION);
        let ttl_ms = self.state.config.mcp.paging.ttl_ms;
        let args: disclosure::CapabilitiesArgs = decode("capabilities", arguments)?;
        let mut semantic = None;
        // A search that fell back to BM25F while the embeddings ranker is configured may
        // answer otherwise a moment later: it carries no cache hint.
        let mut fell_back = false;
        if let Some(query) = &args.query {
            registry.prepare_search().await;
            if let Some(embedder) = &self.state.embedder {
                semantic = registry
                    .semantic_order(embedder, &query.0)
                    .await
                    .map(|order| (order, embedder.settings().weight));
                fell_back = semantic.is_none();
            }
        }
        capabilities(registry, args, semantic.as_ref().map(|(o, w)| (&o[..], *w)))
            .map(|result| cache_hint(result, stateless && !fell_back, registry.revision, ttl_ms))
    }

    /// `dispatch_parallel`: the calls at most [`disclosure::PARALLEL_FAN_OUT`] at a time, each
    /// within `timeout_ms` (at most the request's own timeout); one result per call, in order.
    async fn dispatch_parallel(
        &self,
        identity: &Identity,
        registry: &Registry,
        args: disclosure::DispatchParallelArgs,
        ctx: &CallContext<'_>,
    ) -> Result<CallToolResult, Error> {
        use futures::StreamExt as _;
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
        let results: Vec<Value> = futures::stream::iter(calls)
            .map(|(name, inner)| async move {
                let call = self.call(identity, registry, &name, inner, Retry::default(), ctx);
                let outcome = tokio::time::timeout(timeout, call)
                    .await
                    .map(|outcome| outcome.map(|response| complete(response, &name)));
                parallel_entry(&name, outcome, timeout)
            })
            .buffered(disclosure::PARALLEL_FAN_OUT)
            .collect()
            .await;
        Ok(CallToolResult::structured(json!({ "results": results })))
    }
}

/// On 2026-07-28, a `capabilities` answer says how long it stays true: it depends only on the
/// registry's revision and the arguments, so it may be cached privately (per caller) for as
/// long as a `tools/list` page, keyed by the revision.
fn cache_hint(
    mut result: CallToolResult,
    stateless: bool,
    revision: u64,
    ttl_ms: u64,
) -> CallToolResult {
    if stateless {
        let mut meta = rmcp::model::JsonObject::new();
        meta.insert("cacheScope".into(), json!("private"));
        meta.insert("ttlMs".into(), json!(ttl_ms));
        meta.insert("io.toolplane/revision".into(), json!(revision));
        result.meta = Some(rmcp::model::MetaObject(meta));
    }
    result
}

/// `capabilities`: the caller's categories, the tools of one, or (with `query`) the tools
/// that match some words.
fn capabilities(
    registry: &Registry,
    args: disclosure::CapabilitiesArgs,
    semantic: Option<(&[usize], f32)>,
) -> Result<CallToolResult, Error> {
    let category = args.category.as_deref();
    if let Some(query) = &args.query {
        let limit = args.limit.map_or(disclosure::DEFAULT_RESULTS, |l| l.0);
        let index = registry.search_index();
        let answer =
            disclosure::search_answer(&registry.tools, index, &query.0, limit, category, semantic)
                .ok_or_else(|| {
                    Error::invalid_params(format!(
                        "unknown category: {}",
                        category.unwrap_or_default()
                    ))
                })?;
        let mut result =
            CallToolResult::success(vec![ContentBlock::text(disclosure::search_text(&answer))]);
        result.structured_content = Some(answer);
        return Ok(result);
    }
    if args.limit.is_some() {
        return Err(Error::invalid_params(
            "capabilities: `limit` goes with `query`",
        ));
    }
    let answer = disclosure::capabilities(&registry.tools, category, registry.progressive)
        .ok_or_else(|| {
            Error::invalid_params(format!(
                "unknown category: {}",
                category.unwrap_or_default()
            ))
        })?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(
        disclosure::capabilities_text(&answer),
    )]);
    result.structured_content = Some(answer);
    Ok(result)
}

/// `tool_schema`: the input schema of one tool (of one of its actions, with `action`), or of
/// up to [`disclosure::MAX_SCHEMA_BATCH`] tools.
fn tool_schema(
    registry: &Registry,
    args: disclosure::ToolSchemaArgs,
) -> Result<CallToolResult, Error> {
    if let Some(action) = &args.action {
        let (Some(name), None) = (&args.tool, &args.tools) else {
            return Err(Error::invalid_params(
                "tool_schema: `action` goes with `tool`",
            ));
        };
        let tool = registry
            .tool(name)
            .ok_or_else(|| Error::unknown_tool(name))?;
        let entry = disclosure::action_schema_entry(tool, action).ok_or_else(|| {
            let allowed = tool
                .resolved
                .actions
                .as_ref()
                .map(|set| set.allowed.join(", "))
                .unwrap_or_default();
            Error::invalid_params(format!(
                "tool_schema: {name} has no action {action:?} for you (allowed: {allowed})"
            ))
        })?;
        return Ok(schema_result(json!({ "tools": [entry] })));
    }
    let names: Vec<String> = match (args.tool, args.tools) {
        (Some(name), None) => vec![name],
        (None, Some(names)) => names.0,
        _ => {
            return Err(Error::invalid_params(format!(
                "tool_schema takes either `tool` (a name) or `tools` (1 to {} names)",
                disclosure::MAX_SCHEMA_BATCH
            )));
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
        let tool = registry
            .tool(name)
            .ok_or_else(|| Error::unknown_tool(name))?;
        schemas.push(disclosure::schema_entry(tool));
    }
    Ok(schema_result(json!({ "tools": schemas })))
}

/// A `tool_schema` answer: compact signatures as text for the model, the JSON Schemas in
/// `structuredContent`.
fn schema_result(answer: Value) -> CallToolResult {
    let mut result =
        CallToolResult::success(vec![ContentBlock::text(disclosure::schema_text(&answer))]);
    result.structured_content = Some(answer);
    result
}

/// One call's entry in `dispatch_parallel`'s results: its result, its protocol error, or — a
/// call that did not answer within `timeout`, like an executor that does not — a tool error.
fn parallel_entry(
    name: &str,
    outcome: Result<Result<CallToolResult, Error>, tokio::time::error::Elapsed>,
    timeout: std::time::Duration,
) -> Value {
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
            "error": {"code": error.jsonrpc_code(false), "message": error.message(), "data": error.data()},
        }),
        Err(_) => json!({
            "tool": name,
            "isError": true,
            "content": [{"type": "text", "text": format!(
                "{name} did not answer within {} ms (timeout_ms)",
                timeout.as_millis()
            )}],
        }),
    }
}

/// A meta-tool's arguments as their type ([`disclosure::decode`]); anything else is -32602.
fn decode<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: rmcp::model::JsonObject,
) -> Result<T, Error> {
    disclosure::decode(tool, arguments).map_err(|message| Error::new(Fault::InvalidParams, message))
}

/// `tool` and `arguments` of a dispatch; meta-tools cannot be dispatched.
fn dispatch_target(
    args: disclosure::DispatchArgs,
) -> Result<(String, Option<rmcp::model::JsonObject>), Error> {
    if MetaTool::parse(&args.tool).is_some() {
        return Err(Error::unknown_tool(&args.tool));
    }
    Ok((args.tool, args.arguments))
}
