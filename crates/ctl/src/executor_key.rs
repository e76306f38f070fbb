//! `toolplanectl executor-key`: the key edges sign executor calls with, and signatures for
//! calling an executor by hand (grpcurl) the way an edge does.

use std::path::PathBuf;

use anyhow::{Context, bail};
use base64::Engine as _;
use serde_json::Value;
use tp_proto::invoke_auth::ExecutorKey;
use tp_proto::pb;

/// `executor-key [--edge-token-file F | --generate | --sign METHOD JSON]`
#[derive(Debug, clap::Args)]
pub struct ExecutorKeyArgs {
    /// The edge token the fleet's edges use (the key is derived from it).
    #[arg(long, default_value = ".toolplane/edge-token")]
    pub edge_token_file: PathBuf,
    /// Use this key instead of deriving one (`tpx_…`).
    #[arg(long, env = "TOOLPLANE_EXECUTOR_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// Print a new random key instead (set it as the edges' `executors.auth_key` and the
    /// control plane's `auth.executor_key`).
    #[arg(long, conflicts_with = "sign")]
    pub generate: bool,
    /// Print the `x-toolplane-signature` of a call instead: the method (`Invoke`,
    /// `PurgeTenant`) and the request as grpcurl's JSON. Valid for five minutes.
    #[arg(long, num_args = 2, value_names = ["METHOD", "JSON"])]
    pub sign: Option<Vec<String>>,
}

fn key(args: &ExecutorKeyArgs) -> anyhow::Result<ExecutorKey> {
    if let Some(text) = &args.key {
        return ExecutorKey::parse(text).map_err(anyhow::Error::msg);
    }
    let token = std::fs::read_to_string(&args.edge_token_file).with_context(|| {
        format!(
            "reading the edge token from {} (point --edge-token-file at the fleet's, or pass --key)",
            args.edge_token_file.display()
        )
    })?;
    Ok(ExecutorKey::derive(token.trim()))
}

/// Runs the command; returns the exit code.
pub fn run(args: &ExecutorKeyArgs) -> anyhow::Result<i32> {
    use std::io::Write as _;
    let out = if args.generate {
        ExecutorKey::generate().encode()
    } else if let Some(sign) = &args.sign {
        let [method, json] = sign.as_slice() else {
            bail!("--sign takes a method and a JSON request");
        };
        let request: Value = serde_json::from_str(json).context("the request is not JSON")?;
        let key = key(args)?;
        match method.as_str() {
            "Invoke" => key.sign("Invoke", &invoke_request(&request)?),
            "PurgeTenant" => key.sign("PurgeTenant", &purge_request(&request)?),
            other => bail!("no executor method {other:?} (Invoke, PurgeTenant)"),
        }
    } else {
        key(args)?.encode()
    };
    let _ = writeln!(std::io::stdout().lock(), "{out}");
    Ok(0)
}

/// A field of a proto3 JSON object under its field name or its lowerCamelCase JSON name.
fn field<'a>(object: &'a serde_json::Map<String, Value>, name: &str) -> Option<&'a Value> {
    let camel: String = name
        .split('_')
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_owned()
            } else {
                let mut chars = part.chars();
                chars
                    .next()
                    .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                    .unwrap_or_default()
            }
        })
        .collect();
    object.get(name).or_else(|| object.get(&camel))
}

fn object<'a>(value: &'a Value, what: &str) -> anyhow::Result<&'a serde_json::Map<String, Value>> {
    value
        .as_object()
        .with_context(|| format!("{what} must be a JSON object"))
}

fn refuse_unknown(
    object: &serde_json::Map<String, Value>,
    known: &[&str],
    what: &str,
) -> anyhow::Result<()> {
    for key in object.keys() {
        let snake: String = key
            .chars()
            .flat_map(|c| {
                if c.is_ascii_uppercase() {
                    vec!['_', c.to_ascii_lowercase()]
                } else {
                    vec![c]
                }
            })
            .collect();
        if !known.contains(&snake.as_str()) {
            bail!("{what}: unknown field {key:?}");
        }
    }
    Ok(())
}

fn string(object: &serde_json::Map<String, Value>, name: &str) -> anyhow::Result<String> {
    match field(object, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => bail!("{name} must be a string"),
    }
}

/// An Invoke request's `credential` (a tenant's provider credential), if it has one.
fn credential(
    object: &serde_json::Map<String, Value>,
) -> anyhow::Result<Option<pb::ProviderCredential>> {
    Ok(match field(object, "credential") {
        None | Some(Value::Null) => None,
        Some(Value::Object(credential)) => Some(pb::ProviderCredential {
            provider: string(credential, "provider")?,
            token: string(credential, "token")?,
            expires_at: field(credential, "expires_at")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            sealed: Vec::new(),
        }),
        Some(_) => bail!("credential must be an object"),
    })
}

fn invoke_request(value: &Value) -> anyhow::Result<pb::InvokeRequest> {
    let object = object(value, "the request")?;
    refuse_unknown(
        object,
        &[
            "tool",
            "action",
            "arguments",
            "tenant",
            "role",
            "request_id",
            "deadline_ms",
            "tenant_context",
            "input_responses",
            "state",
            "client_capabilities",
            "client_capabilities_known",
        ],
        "the Invoke request",
    )?;
    let structure = |name: &str| -> anyhow::Result<Option<prost_types::Struct>> {
        match field(object, name) {
            None | Some(Value::Null) => Ok(None),
            Some(value @ Value::Object(_)) => Ok(tp_proto::json::to_struct(value)),
            Some(_) => bail!("{name} must be an object"),
        }
    };
    let deadline_ms = match field(object, "deadline_ms") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => n.as_u64().context("deadline_ms must be a whole number")?,
        Some(Value::String(s)) => s.parse().context("deadline_ms must be a whole number")?,
        Some(_) => bail!("deadline_ms must be a number"),
    };
    let tenant_context = match field(object, "tenant_context") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let context = self::object(value, "tenant_context")?;
            refuse_unknown(context, &["lint_webhook", "tenant_uid"], "tenant_context")?;
            Some(pb::TenantContext {
                lint_webhook: string(context, "lint_webhook")?,
                tenant_uid: string(context, "tenant_uid")?,
            })
        }
    };
    let state = match field(object, "state") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .context("state must be base64")?,
        Some(_) => bail!("state must be a base64 string"),
    };
    let client_capabilities = match field(object, "client_capabilities") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .context("client_capabilities must be strings")?,
        Some(_) => bail!("client_capabilities must be an array"),
    };
    Ok(pb::InvokeRequest {
        tool: string(object, "tool")?,
        action: string(object, "action")?,
        arguments: structure("arguments")?,
        tenant: string(object, "tenant")?,
        role: string(object, "role")?,
        request_id: string(object, "request_id")?,
        deadline_ms,
        tenant_context,
        input_responses: structure("input_responses")?,
        state,
        client_capabilities,
        client_capabilities_known: field(object, "client_capabilities_known")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        credential: credential(object)?,
    })
}

fn purge_request(value: &Value) -> anyhow::Result<pb::PurgeTenantRequest> {
    let object = object(value, "the request")?;
    refuse_unknown(object, &["tenant", "tenant_uid"], "the PurgeTenant request")?;
    Ok(pb::PurgeTenantRequest {
        tenant: string(object, "tenant")?,
        tenant_uid: string(object, "tenant_uid")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_requests_sign_what_an_edge_would_send() {
        let json = serde_json::json!({"tool": "echo", "arguments": {"text": "hi"}, "tenant": "acme",
            "role": "collector", "requestId": "r1", "deadline_ms": "4102444800000"});
        let request = invoke_request(&json).unwrap();
        assert_eq!(request.request_id, "r1");
        assert_eq!(request.deadline_ms, 4_102_444_800_000);
        let key = ExecutorKey::generate();
        let signature = key.sign("Invoke", &request);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(
            tp_proto::invoke_auth::verify(&[key], "Invoke", Some(&signature), &request, now)
                .is_ok()
        );
        assert!(invoke_request(&serde_json::json!({"tol": "echo"})).is_err());
    }
}
