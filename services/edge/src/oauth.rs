//! The edge as an OAuth 2.1 resource server (MCP authorization, 2025-06-18 and later): the
//! protected-resource metadata of RFC 9728, and the `WWW-Authenticate` challenge that points
//! clients at it. Access tokens themselves are verified by the control plane against the
//! key sets of the issuers tenants trust (`Authenticate` with the edge's resource URL), so
//! every edge agrees on them and caches them like API keys.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

/// `oauth` in the edge's configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawOAuth {
    /// The MCP endpoint's public URL, as clients reach it (e.g. `https://mcp.example.com/mcp`):
    /// the audience access tokens must name. Empty: OAuth is off (API keys only).
    pub resource: String,
    /// The authorization servers clients are sent to (issuer URLs).
    pub authorization_servers: Vec<String>,
    /// Scopes clients should ask for (optional): advertised in the metadata and in the 401's
    /// `scope` (MCP 2025-11-25 scope selection). Clients that register dynamically need some
    /// (e.g. the MCP Inspector registers with the advertised ones).
    pub scopes_supported: Vec<String>,
    /// A human-readable name for the metadata (optional).
    pub resource_name: String,
}

/// Validated OAuth settings, with the metadata document built once.
#[derive(Debug, Clone)]
pub struct OAuth {
    /// The resource URL.
    pub resource: String,
    /// Where the metadata is (`resource_metadata` in challenges).
    pub metadata_url: String,
    /// The path the metadata is served at, on the MCP listener.
    pub metadata_path: String,
    /// The scopes to ask for, space-separated (`scope` in challenges); empty for none.
    pub scope: String,
    document: String,
}

// === impl RawOAuth ===

impl RawOAuth {
    /// Checks the settings; `None` when OAuth is off.
    pub fn validate(self) -> anyhow::Result<Option<OAuth>> {
        if self.resource.is_empty() {
            if !self.authorization_servers.is_empty() {
                anyhow::bail!("oauth.authorization_servers: set oauth.resource too");
            }
            return Ok(None);
        }
        tp_registry::ident::check_http_url(&self.resource)
            .map_err(|e| anyhow::anyhow!("oauth.resource: {e}"))?;
        if self.resource.contains('#') || self.resource.contains('?') {
            anyhow::bail!("oauth.resource: no query or fragment (RFC 8707)");
        }
        if self.authorization_servers.is_empty() {
            anyhow::bail!("oauth.authorization_servers: name at least one issuer URL");
        }
        for server in &self.authorization_servers {
            tp_registry::tokens::check_issuer_url(server)
                .map_err(|e| anyhow::anyhow!("oauth.authorization_servers: {e}"))?;
        }
        let (origin, path) = split_url(&self.resource);
        // RFC 9728 §3.1: the well-known segment goes between the host and the path.
        let metadata_path = format!(
            "/.well-known/oauth-protected-resource{}",
            path.trim_end_matches('/')
        );
        let mut document = serde_json::json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        for scope in &self.scopes_supported {
            // RFC 6749 §3.3 scope-token: printable ASCII without space, `"` or `\`.
            if scope.is_empty()
                || scope.len() > 128
                || !scope
                    .bytes()
                    .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
            {
                anyhow::bail!("oauth.scopes_supported: {scope:?} is not a scope token");
            }
        }
        if !self.scopes_supported.is_empty() {
            document["scopes_supported"] = serde_json::json!(self.scopes_supported);
        }
        if !self.resource_name.is_empty() {
            document["resource_name"] = serde_json::json!(self.resource_name);
        }
        Ok(Some(OAuth {
            metadata_url: format!("{origin}{metadata_path}"),
            metadata_path,
            resource: self.resource,
            scope: self.scopes_supported.join(" "),
            document: document.to_string(),
        }))
    }
}

/// A URL's `scheme://authority` and its path (`""` for none).
fn split_url(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => url.split_at(after_scheme + i),
        None => (url, ""),
    }
}

// === impl OAuth ===

impl OAuth {
    /// The protected-resource metadata response (cacheable, readable cross-origin: browser
    /// clients such as the MCP Inspector fetch it from their own origin).
    pub fn metadata(&self) -> Response {
        let mut response = (StatusCode::OK, self.document.clone()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        response
    }
}

/// The `WWW-Authenticate` value of a 401 (RFC 6750 §3, RFC 9728 §5.1): no `error` when the
/// request carried no credentials, `invalid_token` otherwise; `resource_metadata` when OAuth
/// is on, and `scope` when scopes are configured. Values are quoted strings with `"` and `\` escaped.
pub fn challenge(oauth: Option<&OAuth>, error: Option<&str>) -> HeaderValue {
    let mut params = vec![("realm", "toolplane".to_owned())];
    if let Some(description) = error {
        params.push(("error", "invalid_token".to_owned()));
        params.push(("error_description", description.to_owned()));
    }
    if let Some(oauth) = oauth {
        params.push(("resource_metadata", oauth.metadata_url.clone()));
        if !oauth.scope.is_empty() {
            params.push(("scope", oauth.scope.clone()));
        }
    }
    let text = params
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", quote(value)))
        .collect::<Vec<_>>()
        .join(", ");
    HeaderValue::from_str(&format!("Bearer {text}"))
        .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"toolplane\""))
}

/// A quoted-string's content (RFC 9110 §5.6.4): `"` and `\` escaped, control characters and
/// non-ASCII dropped.
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(resource: &str) -> OAuth {
        RawOAuth {
            resource: resource.into(),
            authorization_servers: vec!["https://id.example.com".into()],
            ..RawOAuth::default()
        }
        .validate()
        .unwrap()
        .unwrap()
    }

    #[test]
    fn the_metadata_url_inserts_the_well_known_segment_before_the_path() {
        let o = oauth("https://mcp.example.com/mcp");
        assert_eq!(
            o.metadata_url,
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(o.metadata_path, "/.well-known/oauth-protected-resource/mcp");
        let root = oauth("https://mcp.example.com");
        assert_eq!(
            root.metadata_url,
            "https://mcp.example.com/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn challenges_are_well_formed_quoted_strings() {
        let o = oauth("https://mcp.example.com/mcp");
        let value = challenge(Some(&o), Some("say \"hi\" \\ bye\n"));
        assert_eq!(
            value.to_str().unwrap(),
            "Bearer realm=\"toolplane\", error=\"invalid_token\", error_description=\"say \\\"hi\\\" \\\\ bye\", resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            challenge(None, None).to_str().unwrap(),
            "Bearer realm=\"toolplane\""
        );
    }

    #[test]
    fn settings_are_checked() {
        let bad = |raw: RawOAuth| raw.validate().unwrap_err().to_string();
        assert!(
            bad(RawOAuth {
                authorization_servers: vec!["https://id.example.com".into()],
                ..RawOAuth::default()
            })
            .contains("set oauth.resource")
        );
        assert!(
            bad(RawOAuth {
                resource: "https://mcp.example.com/mcp".into(),
                ..RawOAuth::default()
            })
            .contains("at least one issuer")
        );
        assert!(
            bad(RawOAuth {
                resource: "https://mcp.example.com/mcp".into(),
                authorization_servers: vec!["http://id.example.com".into()],
                ..RawOAuth::default()
            })
            .contains("https")
        );
        for scope in ["", "two words", "quo\"te", "back\\slash", "caf\u{e9}"] {
            assert!(
                bad(RawOAuth {
                    resource: "https://mcp.example.com/mcp".into(),
                    authorization_servers: vec!["https://id.example.com".into()],
                    scopes_supported: vec![scope.into()],
                    ..RawOAuth::default()
                })
                .contains("scope token"),
                "{scope:?}"
            );
        }
        assert!(RawOAuth::default().validate().unwrap().is_none());
    }

    #[test]
    fn configured_scopes_are_advertised_in_the_metadata_and_the_challenge() {
        let o = RawOAuth {
            resource: "https://mcp.example.com/mcp".into(),
            authorization_servers: vec!["https://id.example.com".into()],
            scopes_supported: vec!["mcp".into(), "mcp:tools".into()],
            ..RawOAuth::default()
        }
        .validate()
        .unwrap()
        .unwrap();
        let value = challenge(Some(&o), None);
        assert!(
            value
                .to_str()
                .unwrap()
                .ends_with(", scope=\"mcp mcp:tools\""),
            "{value:?}"
        );
        let document: serde_json::Value = serde_json::from_str(&o.document).unwrap();
        assert_eq!(
            document["scopes_supported"],
            serde_json::json!(["mcp", "mcp:tools"])
        );
    }
}
