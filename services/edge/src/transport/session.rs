//! Session ids that carry their session (MCP 2025-03-26 to 2025-11-25).
//!
//! A legacy client's `initialize` gets an `Mcp-Session-Id`, as the protocol expects, but the
//! edge stores nothing: the id *is* the session — the protocol version and client capabilities
//! of the `initialize`, sealed with HMAC-SHA256 under a key every edge derives from the fleet's
//! shared secret, bound to the caller (tenant, role and key id) and valid for
//! `mcp.session_ttl_secs`. Any replica opens it; a request with an id that fails (changed,
//! expired, another caller's) is answered 404, which tells the client to initialize again.
//! Requests without an id stay valid (the edge does not require sessions).

use std::time::Duration;

use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest as _;

use crate::identity::Identity;

/// `Mcp-Session-Id` (2025-xx sessions).
pub const SESSION_ID: axum::http::HeaderName =
    axum::http::HeaderName::from_static("mcp-session-id");

/// Longest session id accepted.
pub const MAX_SESSION_ID: usize = 8 * 1024;

/// What a session id holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Session {
    /// The protocol version the client asked for at `initialize`.
    #[serde(rename = "v")]
    pub protocol_version: String,
    /// Which of the capabilities an executor may ask for the client declared (only those: the
    /// id stays small whatever else the client declares).
    #[serde(rename = "c")]
    pub declared: Vec<String>,
}

impl Session {
    /// A session for an `initialize` with these params.
    pub fn from_initialize(protocol_version: &str, capabilities: &Value) -> Session {
        Session {
            protocol_version: protocol_version.chars().take(32).collect(),
            declared: ["elicitation", "sampling", "roots"]
                .into_iter()
                .filter(|c| capabilities.get(*c).is_some_and(|v| !v.is_null()))
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The capabilities an executor may ask for that the client declared.
    pub fn declared(&self) -> Vec<&'static str> {
        ["elicitation", "sampling", "roots"]
            .into_iter()
            .filter(|c| self.declared.iter().any(|d| d == c))
            .collect()
    }
}

/// Issues and opens session ids.
pub struct SessionSeal {
    codec: RequestStateCodec,
    ttl: Duration,
}

impl std::fmt::Debug for SessionSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSeal")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn binding(identity: &Identity) -> Vec<u8> {
    let mut out = Vec::new();
    for part in [&identity.tenant, &identity.role, &identity.key_id] {
        out.extend_from_slice(part.as_bytes());
        out.push(0);
    }
    out
}

impl SessionSeal {
    /// A seal keyed by the fleet's shared secret (a key of its own, derived apart from the
    /// `requestState` key).
    pub fn new(secret: &[u8], ttl: Duration) -> SessionSeal {
        let mut hasher = sha2::Sha256::new();
        hasher.update(b"toolplane/session/v1\0");
        hasher.update(secret);
        let key: [u8; 32] = hasher.finalize().into();
        SessionSeal {
            // A 32-byte derived key: RequestStateCodec::MIN_KEY_LENGTH exactly.
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            ttl,
        }
    }

    /// A session id for `identity`.
    pub fn issue(&self, identity: &Identity, session: &Session) -> String {
        self.codec
            .seal_json_with(
                session,
                &SealOptions::new()
                    .associated_data(&binding(identity))
                    .ttl(self.ttl),
            )
            .expect("a session serialises")
    }

    /// The session an id holds, if it is intact, current and `identity`'s.
    pub fn open(&self, identity: &Identity, id: &str) -> Option<Session> {
        if id.len() > MAX_SESSION_ID {
            return None;
        }
        self.codec.open_json_with(id, &binding(identity)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn identity(tenant: &str, key_id: &str) -> Identity {
        Identity {
            tenant: tenant.into(),
            role: "collector".into(),
            key_id: key_id.into(),
            expires_at: 0,
            revision: 1,
            confirmed_at_ms: 0,
            providers: None,
        }
    }

    #[test]
    fn a_session_opens_only_for_its_caller_and_unchanged() {
        let seal = SessionSeal::new(b"fleet-secret-fleet-secret", Duration::from_secs(60));
        let session = Session::from_initialize(
            "2025-11-25",
            &json!({"sampling": {}, "roots": {"listChanged": true}, "experimental": {"x": "y".repeat(20_000)}}),
        );
        let id = seal.issue(&identity("acme", "k1"), &session);
        assert!(
            id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "visible ASCII: {id}"
        );
        assert!(
            id.len() < 512,
            "small whatever the client declares: {}",
            id.len()
        );
        assert_eq!(
            seal.open(&identity("acme", "k1"), &id),
            Some(session.clone())
        );
        assert_eq!(session.declared(), vec!["sampling", "roots"]);
        assert!(seal.open(&identity("acme", "k2"), &id).is_none());
        assert!(seal.open(&identity("globex", "k1"), &id).is_none());
        let mut changed = id.clone();
        changed.pop();
        assert!(seal.open(&identity("acme", "k1"), &changed).is_none());
        let other = SessionSeal::new(b"another-fleet-secret-xx", Duration::from_secs(60));
        assert!(other.open(&identity("acme", "k1"), &id).is_none());
        assert!(
            seal.open(&identity("acme", "k1"), &"a".repeat(MAX_SESSION_ID + 1))
                .is_none()
        );
    }
}
