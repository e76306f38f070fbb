//! Which OAuth access tokens a tenant trusts, and how a verified token's claims become a
//! (tenant, role): the issuer, the audience, an optional claim that tells this tenant's users
//! apart from other tenants' users of the same issuer, and the group → role mapping.
//!
//! Signature, expiry and audience checks happen where the token is verified (the control
//! plane's `oidc` module); this module only decides, from claims already verified, who the
//! caller is. Pure: no I/O, no clock.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Violations;
use crate::ident::check_http_url;
use crate::ident::{MAX_LINK, check_text};

/// Most token issuers per tenant.
pub const MAX_TOKEN_ISSUERS: usize = 8;
/// Most group → role entries per issuer.
pub const MAX_GROUP_ROLES: usize = 64;
/// Longest claim name or claim value in a mapping.
pub const MAX_CLAIM_TEXT: usize = 256;

/// One identity provider a tenant trusts for MCP access tokens (JWTs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIssuer {
    /// The issuer (`iss`), exactly as the provider writes it; https, or http on a loopback
    /// host.
    pub issuer: String,
    /// The audience a token must name; `None` = the edge's resource URL (RFC 8707), which is
    /// what an MCP client asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Where the provider's signing keys are; `None` = discovered from the issuer's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// A claim whose value must be `tenant_value` for a token to be this tenant's (needed when
    /// several tenants trust the same issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_claim: Option<String>,
    /// The value `tenant_claim` must hold (a string, or one element of an array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_value: Option<String>,
    /// The claim that carries the caller's groups (a string or an array of strings).
    #[serde(default = "default_role_claim")]
    pub role_claim: String,
    /// Group → role, in order: the first group the token holds decides the role.
    #[serde(default)]
    pub group_roles: Vec<GroupRole>,
    /// The role of a token holding none of the groups; `None` = such a token is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_role: Option<String>,
    /// Scopes naming providers: `provider:hubspot` with the prefix `provider:` (ADR 0015,
    /// phase 3). A token holding such scopes sees only those providers' tools (and platform
    /// tools); `None` = scopes never narrow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_scope_prefix: Option<String>,
}

/// One entry of [`TokenIssuer::group_roles`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRole {
    /// A value of the role claim.
    pub group: String,
    /// The role it grants.
    pub role: String,
}

fn default_role_claim() -> String {
    "groups".to_owned()
}

/// Why a verified token does not map to a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenRefusal {
    /// No tenant trusts the token's issuer (with a matching tenant claim).
    UnknownIssuer,
    /// Several tenants' mappings accept the token (a configuration error).
    Ambiguous(Vec<String>),
    /// The token holds no mapped group and the issuer has no default role.
    NoRole,
    /// The mapped role is not one the tenant allows.
    RoleNotAllowed(String),
}

impl std::fmt::Display for TokenRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownIssuer => f.write_str("no tenant trusts this token's issuer"),
            Self::Ambiguous(tenants) => write!(
                f,
                "the token maps to several tenants ({}); set tenant_claim",
                tenants.join(", ")
            ),
            Self::NoRole => f.write_str("the token holds no group mapped to a role"),
            Self::RoleNotAllowed(role) => write!(f, "role {role:?} is not allowed for the tenant"),
        }
    }
}

// === impl TokenIssuer ===

impl TokenIssuer {
    /// A trust of `issuer` giving every token `default_role`.
    pub fn new(issuer: impl Into<String>, default_role: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: None,
            jwks_uri: None,
            tenant_claim: None,
            tenant_value: None,
            role_claim: default_role_claim(),
            group_roles: Vec::new(),
            default_role: Some(default_role.into()),
            provider_scope_prefix: None,
        }
    }

    /// The providers `claims`' scopes name under this trust's prefix (`scope`, a space-separated
    /// string, or `scp`, an array); `None` when the trust has no prefix or the token names no
    /// provider, and then nothing is narrowed.
    pub fn scoped_providers(&self, claims: &Value) -> Option<Vec<String>> {
        let prefix = self.provider_scope_prefix.as_deref()?;
        let scope = claims
            .get("scope")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut providers: Vec<String> = scope
            .split_whitespace()
            .chain(claim_values(claims, "scp"))
            .filter_map(|s| s.strip_prefix(prefix))
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        providers.sort();
        providers.dedup();
        (!providers.is_empty()).then_some(providers)
    }

    /// Whether a token with `claims` belongs to this trust's tenant (the issuer already
    /// matched).
    pub fn selects(&self, claims: &Value) -> bool {
        match (&self.tenant_claim, &self.tenant_value) {
            (Some(claim), Some(value)) => claim_values(claims, claim).any(|v| v == value),
            _ => true,
        }
    }

    /// The role `claims` take under this trust: the first mapped group they hold, else the
    /// default role.
    pub fn role(&self, claims: &Value) -> Option<&str> {
        let groups: Vec<&str> = claim_values(claims, &self.role_claim).collect();
        self.group_roles
            .iter()
            .find(|entry| groups.contains(&entry.group.as_str()))
            .map(|entry| entry.role.as_str())
            .or(self.default_role.as_deref())
    }

    pub(crate) fn check_fields(&mut self, v: &mut Violations, at: &str) {
        v.check(&format!("{at}.issuer"), check_issuer_url(&self.issuer));
        if let Some(uri) = &self.jwks_uri {
            v.check(&format!("{at}.jwks_uri"), check_issuer_url(uri));
        }
        if let Some(audience) = &self.audience {
            v.check(
                &format!("{at}.audience"),
                check_text(audience, MAX_LINK, true),
            );
        }
        match (&self.tenant_claim, &self.tenant_value) {
            (None, None) => {}
            (Some(claim), Some(value)) => {
                v.check(
                    &format!("{at}.tenant_claim"),
                    check_text(claim, MAX_CLAIM_TEXT, true),
                );
                v.check(
                    &format!("{at}.tenant_value"),
                    check_text(value, MAX_CLAIM_TEXT, true),
                );
            }
            _ => v.add(
                format!("{at}.tenant_claim"),
                "tenant_claim and tenant_value go together",
            ),
        }
        v.check(
            &format!("{at}.role_claim"),
            check_text(&self.role_claim, MAX_CLAIM_TEXT, true),
        );
        if self.group_roles.len() > MAX_GROUP_ROLES {
            v.add(
                format!("{at}.group_roles"),
                format!("at most {MAX_GROUP_ROLES} entries"),
            );
        }
        for entry in &self.group_roles {
            v.check(
                &format!("{at}.group_roles"),
                check_text(&entry.group, MAX_CLAIM_TEXT, true),
            );
        }
        if let Some(prefix) = &self.provider_scope_prefix {
            v.check(&format!("{at}.provider_scope_prefix"), check_prefix(prefix));
        }
        if self.group_roles.is_empty() && self.default_role.is_none() {
            v.add(
                format!("{at}.group_roles"),
                "map at least one group to a role, or set default_role",
            );
        }
    }

    pub(crate) fn roles(&self) -> impl Iterator<Item = &str> {
        self.group_roles
            .iter()
            .map(|entry| entry.role.as_str())
            .chain(self.default_role.as_deref())
    }
}

/// A scope prefix: 1 to [`MAX_CLAIM_TEXT`] characters without spaces.
fn check_prefix(prefix: &str) -> Result<(), String> {
    check_text(prefix, MAX_CLAIM_TEXT, true)?;
    if prefix.chars().any(char::is_whitespace) {
        return Err("a scope prefix has no spaces".into());
    }
    Ok(())
}

/// The string values of `claim` in `claims`: the value itself, or each string of an array.
pub fn claim_values<'a>(claims: &'a Value, claim: &str) -> impl Iterator<Item = &'a str> {
    let value = claims.get(claim);
    let single = value.and_then(Value::as_str);
    let many = value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    single.into_iter().chain(many)
}

/// An issuer or key-set URL: https, or http only on a loopback host (a provider started next
/// to the edge, as in tests and local stacks).
pub fn check_issuer_url(url: &str) -> Result<(), String> {
    check_http_url(url)?;
    if let Some(rest) = url.strip_prefix("http://") {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
        if !matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
            return Err(format!(
                "must use https (http only on a loopback host; got {url:?})"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trust() -> TokenIssuer {
        TokenIssuer {
            group_roles: vec![
                GroupRole {
                    group: "admins".into(),
                    role: "operator".into(),
                },
                GroupRole {
                    group: "staff".into(),
                    role: "collector".into(),
                },
            ],
            default_role: None,
            ..TokenIssuer::new("https://id.example.com", "x")
        }
    }

    #[test]
    fn the_first_mapped_group_decides_the_role() {
        let t = trust();
        assert_eq!(
            t.role(&json!({"groups": ["staff", "admins"]})),
            Some("operator")
        );
        assert_eq!(t.role(&json!({"groups": "staff"})), Some("collector"));
        assert_eq!(t.role(&json!({"groups": ["guests"]})), None);
        assert_eq!(t.role(&json!({})), None);
        let with_default = TokenIssuer {
            default_role: Some("viewer".into()),
            ..trust()
        };
        assert_eq!(with_default.role(&json!({"groups": 7})), Some("viewer"));
    }

    #[test]
    fn the_tenant_claim_selects_the_tenant() {
        let t = TokenIssuer {
            tenant_claim: Some("org".into()),
            tenant_value: Some("acme".into()),
            ..trust()
        };
        assert!(t.selects(&json!({"org": "acme"})));
        assert!(t.selects(&json!({"org": ["globex", "acme"]})));
        assert!(!t.selects(&json!({"org": "globex"})));
        assert!(!t.selects(&json!({})));
        assert!(trust().selects(&json!({})));
    }

    #[test]
    fn issuers_use_https_except_on_loopback() {
        assert!(check_issuer_url("https://id.example.com").is_ok());
        assert!(check_issuer_url("http://127.0.0.1:9000").is_ok());
        assert!(check_issuer_url("http://localhost:9000/realms/x").is_ok());
        assert!(check_issuer_url("http://id.example.com").is_err());
        assert!(check_issuer_url("http://127.0.0.1.evil.com").is_err());
        assert!(check_issuer_url("ftp://id.example.com").is_err());
    }

    #[test]
    fn field_checks_refuse_half_a_tenant_claim_and_no_role_at_all() {
        use crate::model::{Tenant, check_issuers};
        let mut tenant = Tenant::new("acme");
        tenant.token_issuers = vec![TokenIssuer {
            tenant_claim: Some("org".into()),
            group_roles: Vec::new(),
            ..trust()
        }];
        let mut v = Violations::default();
        check_issuers(&mut tenant, &mut v);
        let message = v.finish().unwrap_err().to_string();
        assert!(message.contains("go together"), "{message}");
        assert!(message.contains("default_role"), "{message}");
    }
}
