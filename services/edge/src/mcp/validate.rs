//! The checks a call passes before it is forwarded: the action of a polymorphic tool, the
//! arguments against the tool's schema (large ones off the async threads, within the call's
//! deadline), and the client capabilities a 2026-07-28 caller declares.

use super::*;
use crate::transport::session;

/// The action of a polymorphic tool, checked against the role's allowed actions ("" for plain
/// tools). A forbidden action fails exactly like one that does not exist, and the caller's
/// value is not echoed.
pub(super) fn check_action(tool: &EdgeTool, arguments: &Value) -> Result<String, Error> {
    let Some(set) = &tool.resolved.actions else {
        return Ok(String::new());
    };
    let requested = arguments
        .get(&set.discriminator)
        .and_then(Value::as_str)
        .unwrap_or("");
    if !set.allowed.iter().any(|a| a == requested) {
        // A hidden action gets the same answer as one that does not exist, as hidden tools do.
        return Err(Error::new(Fault::InvalidParams, format!(
                "invalid arguments for {}: {}; available: {}",
                tool.resolved.name,
                if requested.is_empty() {
                    format!("{} is required", set.discriminator)
                } else {
                    format!("unknown {} {requested:?}", set.discriminator)
                },
                set.allowed.join(", ")
            )).with_data(
                json!({ "errors": [{ "path": format!("/{}", set.discriminator), "message": "unknown action" }] }),
            ));
    }
    Ok(requested.to_owned())
}

/// Arguments at least this large (bytes of JSON) are validated on the blocking pool, with
/// `mcp.validation_timeout_ms`, instead of on the request's thread.
const INLINE_VALIDATION_BYTES: usize = 16 * 1024;

/// Longest message reported for one validation error.
const MAX_ERROR_MESSAGE: usize = 200;

/// The property names a schema declares anywhere (under `properties` or `required`): the only
/// names an error may repeat — any other name in the arguments is the caller's own text, which
/// may be a secret pasted in the wrong place.
fn declared_names(schema: &Value, names: &mut std::collections::HashSet<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                names.extend(properties.keys().cloned());
            }
            if let Some(Value::Array(required)) = map.get("required") {
                names.extend(required.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            for value in map.values() {
                declared_names(value, names);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| declared_names(v, names)),
        _ => {}
    }
}

/// The schema errors of `arguments`: path and message, with the caller's values and the
/// property names the schema does not declare masked (neither is echoed back, nor logged).
pub(super) fn schema_errors(
    validator: &jsonschema::Validator,
    schema: &Value,
    arguments: &Value,
) -> Vec<(String, String)> {
    use jsonschema::error::ValidationErrorKind as Kind;
    // Valid arguments (nearly every call) are checked without building any error.
    if validator.is_valid(arguments) {
        return Vec::new();
    }
    let mut errors = validator
        .iter_errors(arguments)
        .take(MAX_REPORTED_ERRORS)
        .peekable();
    if errors.peek().is_none() {
        return Vec::new();
    }
    let mut declared = std::collections::HashSet::new();
    declared_names(schema, &mut declared);
    errors
        .map(|error| {
            let path: String = error
                .instance_path()
                .to_string()
                .split('/')
                .skip(1)
                .map(|segment| {
                    let name = segment.replace("~1", "/").replace("~0", "~");
                    if declared.contains(&name) || segment.bytes().all(|b| b.is_ascii_digit()) {
                        format!("/{segment}")
                    } else {
                        "/*".to_owned()
                    }
                })
                .collect();
            let mut message = match error.kind() {
                Kind::AdditionalProperties { unexpected }
                | Kind::UnevaluatedProperties { unexpected } => format!(
                    "{} propert{} the schema does not allow",
                    unexpected.len(),
                    if unexpected.len() == 1 { "y" } else { "ies" }
                ),
                Kind::PropertyNames { .. } => {
                    "a property name does not match the schema's propertyNames".to_owned()
                }
                _ => error.masked_with("the value").to_string(),
            };
            if message.len() > MAX_ERROR_MESSAGE {
                let mut cut = MAX_ERROR_MESSAGE;
                while !message.is_char_boundary(cut) {
                    cut -= 1;
                }
                message.truncate(cut);
                message.push('…');
            }
            (
                if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                },
                message,
            )
        })
        .collect()
}

/// Validates the arguments against the tool's (role-projected) schema, with the linear-time
/// pattern engine; large arguments are validated off the request threads within `timeout`.
/// Returns the arguments back.
pub(super) async fn validate_schema(
    tool: &EdgeTool,
    action: &str,
    arguments: Value,
    timeout: std::time::Duration,
) -> Result<Value, Error> {
    // A polymorphic tool's call is checked against its action's branch (the whole schema's
    // `oneOf` would only say that no branch matched).
    let (validator, schema) = match tool.branch(action) {
        Some(branch) => branch,
        None => tool
            .validator()
            .map_err(|message| Error::new(Fault::Internal, message))?,
    };
    let (arguments, errors) = if bounds::size(&arguments) < INLINE_VALIDATION_BYTES {
        let errors = schema_errors(&validator, &schema, &arguments);
        (arguments, errors)
    } else {
        let job = tokio::task::spawn_blocking(move || {
            let errors = schema_errors(&validator, &schema, &arguments);
            (arguments, errors)
        });
        match tokio::time::timeout(timeout, job).await {
            Ok(Ok(done)) => done,
            Ok(Err(_)) => {
                return Err(Error::new(
                    Fault::Internal,
                    "validating the arguments failed",
                ));
            }
            Err(_) => {
                ::metrics::counter!("tp_edge_validation_timeouts_total").increment(1);
                return Err(Error::new(
                    Fault::InvalidParams,
                    format!(
                        "invalid arguments for {}: validating them took longer than {} ms",
                        tool.resolved.name,
                        timeout.as_millis()
                    ),
                ));
            }
        }
    };
    if errors.is_empty() {
        return Ok(arguments);
    }
    let summary = errors
        .iter()
        .map(|(path, message)| format!("{path}: {message}"))
        .collect::<Vec<_>>()
        .join("; ");
    let subject = if action.is_empty() {
        tool.resolved.name.clone()
    } else {
        format!("{} (action {action})", tool.resolved.name)
    };
    Err(Error::new(Fault::InvalidParams, format!("invalid arguments for {subject}: {summary}")).with_data(
            json!({ "errors": errors.iter().map(|(p, m)| json!({"path": p, "message": m})).collect::<Vec<_>>() }),
        ))
}

/// A 2026-07-28 caller must declare, in the request's `_meta`, every client capability the
/// tool needs; otherwise -32021 (HTTP 400) names them and nothing runs. Earlier versions
/// declared capabilities at `initialize`, which a stateless edge does not keep: not checked.
pub(super) fn missing_client_capabilities(
    tool: &EdgeTool,
    ctx: &CallContext<'_>,
) -> Result<(), Error> {
    if tool.resolved.client_capabilities.is_empty() || !super::declares_version(ctx.meta) {
        return Ok(());
    }
    let declared = ctx
        .meta
        .client_capabilities()
        .and_then(|caps| serde_json::to_value(caps).ok())
        .unwrap_or(Value::Null);
    let missing: serde_json::Map<String, Value> = tool
        .resolved
        .client_capabilities
        .iter()
        .filter(|capability| declared.get(capability.as_str()).is_none_or(Value::is_null))
        .map(|capability| (capability.clone(), json!({})))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let required: rmcp::model::ClientCapabilities =
        serde_json::from_value(Value::Object(missing)).unwrap_or_default();
    Err(Error::new(
        Fault::MissingClientCapability,
        "missing required client capability",
    )
    .with_data(json!({ "requiredCapabilities": required })))
}

/// The client capabilities that an executor may ask for and the caller declared: in a
/// 2026-07-28 request's `_meta`, or in a 2025-xx client's session id (`None` without one).
pub(super) fn declared_capabilities(ctx: &CallContext<'_>) -> Option<Vec<&'static str>> {
    if !stateless(ctx) {
        return ctx
            .parts
            .and_then(|parts| parts.extensions.get::<session::Session>())
            .map(session::Session::declared);
    }
    let declared = ctx
        .meta
        .client_capabilities()
        .and_then(|caps| serde_json::to_value(caps).ok())
        .unwrap_or(Value::Null);
    Some(
        ["elicitation", "sampling", "roots"]
            .into_iter()
            .filter(|c| declared.get(*c).is_some_and(|v| !v.is_null()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_repeat_no_value_and_no_property_name_the_schema_does_not_declare() {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 3},
                           "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "additionalProperties": {"type": "string"}}}},
            "required": ["text"],
            "additionalProperties": false,
            "propertyNames": {"maxLength": 20}
        });
        let validator = tp_registry::schema::linear_options()
            .build(&schema)
            .unwrap();
        let arguments = json!({
            "sk-live-SECRET123": 1,
            "n": 1,
            "tags": [{"k": "x", "tok-SECRET2": 7}],
            "this-is-a-very-long-secret-key-name": 3
        });
        let errors = schema_errors(&validator, &schema, &arguments);
        let text = format!("{errors:?}");
        assert!(!errors.is_empty());
        for secret in ["SECRET", "very-long"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(
            text.contains("/n") && text.contains("is a required property"),
            "{text}"
        );
        assert!(text.contains("/tags/0/*"), "{text}");
    }
}
