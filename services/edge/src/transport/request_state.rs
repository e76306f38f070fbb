//! Input-required results (MCP 2026-07-28, SEP-2322): an executor that needs the client to
//! answer something (elicitation, sampling, roots) before it can finish returns
//! `InputRequired`; the edge turns it into an `InputRequiredResult`, and the client retries the
//! call with `inputResponses` and the `requestState` it got.
//!
//! The edge keeps nothing between the rounds, so the retry may land on any replica. The
//! executor's own state travels inside `requestState`, sealed with HMAC-SHA256 under a key every
//! edge of the fleet derives from the same secret, and bound to the caller's tenant and role,
//! the tool and its arguments, with an expiry. A `requestState` that fails any of these checks is
//! refused with -32602 before the executor sees anything, so an executor may trust the state it
//! gets back.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::{InputRequests, RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest as _;

/// Largest executor state carried through the client.
pub const MAX_EXECUTOR_STATE: usize = 16 * 1024;
/// Largest `requestState` accepted back (the sealed form of [`MAX_EXECUTOR_STATE`] and more).
pub const MAX_REQUEST_STATE: usize = 64 * 1024;
/// Most rounds of questions a 2025-xx call is put through before it fails.
pub const MAX_ROUNDS: usize = 10;
/// Most input requests in one `InputRequiredResult`.
pub const MAX_INPUT_REQUESTS: usize = 16;

/// Seals and opens `requestState` values.
pub struct StateSeal {
    codec: RequestStateCodec,
    ttl: Duration,
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateSeal")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// What a `requestState` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    /// The executor's state, base64url.
    s: String,
    /// Where the call's approval stands (ADR 0013), for a call an approval rule covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<ApprovalSeal>,
}

/// Where a call's approval stands, carried sealed between the rounds of a 2026-07-28 call:
/// only an edge can have written it, for these arguments, so a retry cannot claim an approval
/// nobody gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalSeal {
    /// The client approved (`false`: it was asked and has not answered yet).
    pub granted: bool,
    /// Until when (Unix milliseconds) the question is open, or the approval valid.
    pub until_ms: u64,
    /// When the client approved (Unix milliseconds), 0 before.
    #[serde(default)]
    pub at_ms: u64,
}

/// Why a retried call's `requestState` was refused.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Too long to be one of ours.
    #[error("requestState is longer than {MAX_REQUEST_STATE} bytes")]
    TooLong,
    /// Forged, changed, expired, or issued for another caller, tool or arguments.
    #[error(
        "requestState failed its integrity check: it was changed, has expired, or was issued for another tenant, tool or arguments"
    )]
    Invalid,
}

impl StateSeal {
    /// A seal keyed by `secret` (the fleet's shared secret: every edge must derive the same key).
    pub fn new(secret: &[u8], ttl: Duration) -> StateSeal {
        let key = hmac_key(secret);
        StateSeal {
            // A 32-byte derived key: RequestStateCodec::MIN_KEY_LENGTH exactly.
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            ttl,
        }
    }

    /// Seals an executor's state for one caller, tool and arguments.
    pub fn seal(&self, binding: &[u8], executor_state: &[u8]) -> String {
        self.seal_with(binding, executor_state, None)
    }

    /// Seals an executor's state and where the call's approval stands.
    pub fn seal_with(
        &self,
        binding: &[u8],
        executor_state: &[u8],
        approval: Option<ApprovalSeal>,
    ) -> String {
        let sealed = Sealed {
            s: URL_SAFE_NO_PAD.encode(executor_state),
            a: approval,
        };
        // A state carrying an approval lives as long as the approval's own clock, at least.
        let ttl = approval.map_or(self.ttl, |a| {
            let left = a.until_ms.saturating_sub(tp_proto::clock::now_ms());
            self.ttl.max(Duration::from_millis(left))
        });
        self.codec
            .seal_json_with(
                &sealed,
                &SealOptions::new().associated_data(binding).ttl(ttl),
            )
            .expect("the sealed state serialises")
    }

    /// Opens a `requestState` for the same caller, tool and arguments; the executor's state.
    pub fn open(&self, binding: &[u8], request_state: &str) -> Result<Vec<u8>, StateError> {
        self.open_with(binding, request_state)
            .map(|(state, _)| state)
    }

    /// Opens a `requestState`: the executor's state and where the call's approval stands.
    pub fn open_with(
        &self,
        binding: &[u8],
        request_state: &str,
    ) -> Result<(Vec<u8>, Option<ApprovalSeal>), StateError> {
        if request_state.len() > MAX_REQUEST_STATE {
            return Err(StateError::TooLong);
        }
        let sealed: Sealed = self
            .codec
            .open_json_with(request_state, binding)
            .map_err(|_| StateError::Invalid)?;
        let state = URL_SAFE_NO_PAD
            .decode(sealed.s)
            .map_err(|_| StateError::Invalid)?;
        Ok((state, sealed.a))
    }
}

/// The key, derived so the shared secret itself never signs anything.
fn hmac_key(secret: &[u8]) -> [u8; 32] {
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"toolplane/request-state/v1\0");
    hasher.update(secret);
    hasher.finalize().into()
}

/// What a `requestState` is bound to: tenant, role, tool and the arguments (canonical JSON).
pub fn binding(tenant: &str, role: &str, tool: &str, arguments: &Value) -> Vec<u8> {
    // aws-lc's SHA-256: every call computes this, and the portable one cost 3.5 k instructions.
    let mut hasher = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    canonical(arguments, &mut hasher);
    let digest = hasher.finish();
    let mut out = Vec::with_capacity(tenant.len() + role.len() + tool.len() + 3 + 32);
    for part in [tenant, role, tool] {
        out.extend_from_slice(part.as_bytes());
        out.push(0);
    }
    out.extend_from_slice(digest.as_ref());
    out
}

/// Feeds a JSON value with object keys sorted (so key order does not matter).
fn canonical(value: &Value, hasher: &mut aws_lc_rs::digest::Context) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hasher.update(b"{");
            for key in keys {
                hasher.update(serde_json::to_string(key).unwrap_or_default().as_bytes());
                hasher.update(b":");
                canonical(&map[key], hasher);
                hasher.update(b",");
            }
            hasher.update(b"}");
        }
        Value::Array(items) => {
            hasher.update(b"[");
            for item in items {
                canonical(item, hasher);
                hasher.update(b",");
            }
            hasher.update(b"]");
        }
        other => hasher.update(other.to_string().as_bytes()),
    }
}

/// The client capability an input request needs.
pub fn capability_of(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Checks an executor's input requests and turns them into MCP's; `Err` names what is wrong
/// (the call then fails as an executor error).
pub fn input_requests(
    requests: &Value,
    declared: Option<&[&'static str]>,
) -> Result<InputRequests, String> {
    let Value::Object(requests) = requests else {
        return Err("input requests must be an object".into());
    };
    if requests.len() > MAX_INPUT_REQUESTS {
        return Err(format!(
            "{} input requests (at most {MAX_INPUT_REQUESTS})",
            requests.len()
        ));
    }
    let mut out = InputRequests::new();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let Some(capability) = capability_of(method) else {
            return Err(format!(
                "input request {key:?} has method {method:?}; MCP clients answer elicitation/create, sampling/createMessage and roots/list"
            ));
        };
        if let Some(declared) = declared
            && !declared.contains(&capability)
        {
            return Err(format!(
                "input request {key:?} needs the client capability {capability:?}, which the client did not declare"
            ));
        }
        let mut request = request.clone();
        if request.get("params").is_none()
            && let Value::Object(map) = &mut request
        {
            map.insert("params".into(), Value::Object(Default::default()));
        }
        let parsed = serde_json::from_value(request)
            .map_err(|e| format!("input request {key:?} is not a valid {method} request: {e}"))?;
        out.insert(key.clone(), parsed);
    }
    Ok(out)
}

impl tp_registry::HasErrorCode for StateError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            StateError::TooLong | StateError::Invalid => tp_registry::ErrorCode::InvalidArgument,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn state_round_trips_only_for_the_same_binding() {
        let seal = StateSeal::new(b"edge-token-shared-by-the-fleet", Duration::from_secs(60));
        let arguments = json!({"b": 1, "a": [1, {"y": 2, "x": 1}]});
        let binding = binding("acme", "collector", "tool", &arguments);
        let sealed = seal.seal(&binding, b"round=1");
        assert_eq!(seal.open(&binding, &sealed).unwrap(), b"round=1");
        // Key order of the arguments does not matter; their values do.
        let reordered = json!({"a": [1, {"x": 1, "y": 2}], "b": 1});
        assert_eq!(
            seal.open(
                &super::binding("acme", "collector", "tool", &reordered),
                &sealed
            )
            .unwrap(),
            b"round=1"
        );
        for other in [
            super::binding("globex", "collector", "tool", &arguments),
            super::binding("acme", "executor", "tool", &arguments),
            super::binding("acme", "collector", "other", &arguments),
            super::binding("acme", "collector", "tool", &json!({"b": 2})),
        ] {
            assert!(matches!(
                seal.open(&other, &sealed),
                Err(StateError::Invalid)
            ));
        }
        // Tampered, truncated, another fleet's key, too long.
        let mut tampered = sealed.clone();
        tampered.push('x');
        assert!(seal.open(&binding, &tampered).is_err());
        assert!(seal.open(&binding, &sealed[..sealed.len() - 2]).is_err());
        let other_fleet = StateSeal::new(b"another-fleet-secret-entirely", Duration::from_secs(60));
        assert!(other_fleet.open(&binding, &sealed).is_err());
        assert!(matches!(
            seal.open(&binding, &"a".repeat(MAX_REQUEST_STATE + 1)),
            Err(StateError::TooLong)
        ));
    }

    #[test]
    fn expired_state_is_refused() {
        let seal = StateSeal::new(b"edge-token-shared-by-the-fleet", Duration::from_millis(1));
        let binding = binding("acme", "collector", "tool", &json!({}));
        let sealed = seal.seal(&binding, b"x");
        std::thread::sleep(Duration::from_millis(5));
        assert!(seal.open(&binding, &sealed).is_err());
    }

    #[test]
    fn input_requests_are_checked() {
        let requests = json!({
            "name": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}}},
            "roots": {"method": "roots/list"}
        });
        let parsed = input_requests(&requests, None).unwrap();
        assert_eq!(parsed.len(), 2);
        let back = serde_json::to_value(&parsed).unwrap();
        assert_eq!(back["roots"]["method"], "roots/list");
        assert!(
            input_requests(&requests, Some(&["elicitation"]))
                .unwrap_err()
                .contains("roots")
        );
        assert!(input_requests(&json!({"x": {"method": "tools/call"}}), None).is_err());
        assert!(input_requests(&json!([1]), None).is_err());
        let many: serde_json::Map<String, Value> = (0..=MAX_INPUT_REQUESTS)
            .map(|i| (format!("k{i}"), json!({"method": "roots/list"})))
            .collect();
        assert!(input_requests(&Value::Object(many), None).is_err());
    }
}
