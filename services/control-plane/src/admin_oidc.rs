//! Admins signing in with their organisation's OpenID provider (`[admin_oidc]`): an access
//! token (a JWT) from one configured issuer, for one configured audience, stands for an admin
//! whose scope comes from the groups in a claim — the way Kubernetes' API server takes OIDC
//! tokens. The configured admin token and issued admin tokens keep working beside it.
//!
//! - Keys come from the configured issuer only (its discovered `jwks_uri`, or the configured
//!   one), cached and rotated by the same verifier edges' tokens use ([`TokenVerifier`]):
//!   asymmetric algorithms only, `exp`/`iss`/`aud`/`sub` required, `nbf` honoured.
//! - Groups map to scopes: any of `full_groups` gives `full`; otherwise the union of the
//!   tenants the caller's `tenant_admin_groups` name gives `tenant_admin`; otherwise any of
//!   `read_only_groups` gives `read_only`. A verified token in no mapped group is refused
//!   (`PERMISSION_DENIED`), so signing in at the provider grants nothing by itself.
//! - The caller is named `oidc:<name_claim value>` (default the subject), and that name is
//!   recorded as the author of every write it makes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tonic::Status;
use tp_registry::{AdminCaller, AdminScope};

use crate::oidc::{TokenError, TokenVerifier};

/// Longest caller name taken from a token (it is stored with every write).
const MAX_NAME_BYTES: usize = 200;

/// `[admin_oidc]` as written in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawAdminOidc {
    /// The OpenID provider's issuer URL (the tokens' `iss`); empty = off.
    pub issuer: String,
    /// The audience admin tokens must carry (`aud`), e.g. `toolplane-admin`.
    pub audience: String,
    /// The issuer's key-set URL; empty = discovered from the issuer's metadata.
    pub jwks_uri: String,
    /// The claim naming the caller's groups (an array of strings, or one space-separated
    /// string); empty = `groups`.
    pub groups_claim: String,
    /// The claim naming the caller in the change log; empty = `sub`.
    pub name_claim: String,
    /// Groups whose members have scope `full`.
    pub full_groups: Vec<String>,
    /// Groups whose members have scope `read_only`.
    pub read_only_groups: Vec<String>,
    /// Group → the tenants its members administer (scope `tenant_admin`).
    pub tenant_admin_groups: BTreeMap<String, Vec<String>>,
}

impl RawAdminOidc {
    /// Checks the section; `None` when it is off.
    pub fn validate(self) -> Result<Option<RawAdminOidc>, String> {
        if self.issuer.is_empty() {
            if self != RawAdminOidc::default() {
                return Err(
                    "admin_oidc: settings without an issuer (set admin_oidc.issuer)".into(),
                );
            }
            return Ok(None);
        }
        tp_registry::tokens::check_issuer_url(&self.issuer)
            .map_err(|e| format!("admin_oidc.issuer: {e}"))?;
        if !self.jwks_uri.is_empty() {
            tp_registry::tokens::check_issuer_url(&self.jwks_uri)
                .map_err(|e| format!("admin_oidc.jwks_uri: {e}"))?;
        }
        if self.audience.trim().is_empty() {
            return Err(
                "admin_oidc.audience: required (the aud admin tokens are minted for)".into(),
            );
        }
        if self.full_groups.is_empty()
            && self.read_only_groups.is_empty()
            && self.tenant_admin_groups.is_empty()
        {
            return Err("admin_oidc: map at least one group (full_groups, read_only_groups or tenant_admin_groups)".into());
        }
        let groups = self
            .full_groups
            .iter()
            .chain(&self.read_only_groups)
            .chain(self.tenant_admin_groups.keys());
        for group in groups {
            if group.trim().is_empty() || group.len() > 256 {
                return Err(format!(
                    "admin_oidc: group {group:?} must be 1 to 256 characters"
                ));
            }
        }
        for (group, tenants) in &self.tenant_admin_groups {
            if tenants.is_empty() {
                return Err(format!(
                    "admin_oidc.tenant_admin_groups.{group}: name at least one tenant"
                ));
            }
            for tenant in tenants {
                tp_registry::ident::check_slug(tenant).map_err(|e| {
                    format!("admin_oidc.tenant_admin_groups.{group}: {tenant:?}: {e}")
                })?;
            }
        }
        Ok(Some(self))
    }

    /// One line saying who may sign in as what (for `--check-config`).
    pub fn summary(&self) -> String {
        let tenant_admins: Vec<String> = self
            .tenant_admin_groups
            .iter()
            .map(|(group, tenants)| format!("{group} -> {}", tenants.join("+")))
            .collect();
        format!(
            "admin sign-in: issuer {} audience {}; full: [{}]; tenant_admin: [{}]; read_only: [{}]",
            self.issuer,
            self.audience,
            self.full_groups.join(", "),
            tenant_admins.join(", "),
            self.read_only_groups.join(", "),
        )
    }
}

/// Verifies admin access tokens and maps them to admin callers.
#[derive(Debug)]
pub struct AdminOidc {
    settings: RawAdminOidc,
    verifier: Arc<TokenVerifier>,
}

impl AdminOidc {
    /// Admin sign-in with `settings` (validated), verifying with `verifier`.
    pub fn new(settings: RawAdminOidc, verifier: Arc<TokenVerifier>) -> AdminOidc {
        AdminOidc { settings, verifier }
    }

    /// Whether `token` has a JWT's shape (issued admin tokens and the bootstrap token never
    /// do: they hold no dots).
    pub fn is_jwt(token: &str) -> bool {
        token.starts_with("eyJ") && token.split('.').count() == 3
    }

    /// The admin `token` stands for.
    pub async fn caller(&self, token: &str) -> Result<AdminCaller, Status> {
        let refused = |error: TokenError| {
            tracing::debug!(%error, "admin access token refused");
            match error {
                TokenError::Keys(message) => tp_proto::status::error(
                    tp_registry::ErrorCode::Unavailable,
                    format!("cannot verify admin access tokens now: {message}"),
                ),
                _ => tp_proto::status::error(
                    tp_registry::ErrorCode::Unauthenticated,
                    "invalid admin access token",
                ),
            }
        };
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| refused(TokenError::Malformed(e.to_string())))?;
        let sources =
            vec![(!self.settings.jwks_uri.is_empty()).then(|| self.settings.jwks_uri.clone())];
        let claims = self
            .verifier
            .verified_claims(
                token,
                &header,
                &self.settings.issuer,
                sources,
                std::slice::from_ref(&self.settings.audience),
            )
            .await
            .map_err(refused)?;
        self.map(&claims)
    }

    /// The caller verified `claims` stand for, by their groups.
    pub fn map(&self, claims: &Value) -> Result<AdminCaller, Status> {
        let settings = &self.settings;
        let name_claim = non_empty_or(&settings.name_claim, "sub");
        let name = claims
            .get(name_claim)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                tp_proto::status::error(
                    tp_registry::ErrorCode::Unauthenticated,
                    format!("admin access token has no {name_claim:?} claim"),
                )
            })?;
        if name.len() > MAX_NAME_BYTES || name.chars().any(char::is_control) {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::Unauthenticated,
                format!("admin access token's {name_claim:?} claim is not a usable name"),
            ));
        }
        let groups_claim = non_empty_or(&settings.groups_claim, "groups");
        let groups: Vec<&str> = tp_registry::tokens::claim_values(claims, groups_claim)
            .flat_map(str::split_whitespace)
            .collect();
        let member = |list: &[String]| list.iter().any(|g| groups.contains(&g.as_str()));
        let name = format!("oidc:{name}");
        if member(&settings.full_groups) {
            return Ok(AdminCaller {
                name,
                scope: AdminScope::Full,
                tenants: Vec::new(),
            });
        }
        let mut tenants: Vec<String> = settings
            .tenant_admin_groups
            .iter()
            .filter(|(group, _)| groups.contains(&group.as_str()))
            .flat_map(|(_, tenants)| tenants.iter().cloned())
            .collect();
        tenants.sort();
        tenants.dedup();
        if !tenants.is_empty() {
            return Ok(AdminCaller {
                name,
                scope: AdminScope::TenantAdmin,
                tenants,
            });
        }
        if member(&settings.read_only_groups) {
            return Ok(AdminCaller {
                name,
                scope: AdminScope::ReadOnly,
                tenants: Vec::new(),
            });
        }
        Err(tp_proto::status::error(
            tp_registry::ErrorCode::PermissionDenied,
            format!(
                "{name} is in no group admin_oidc maps to an admin scope (claim {groups_claim:?})"
            ),
        ))
    }
}

fn non_empty_or<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn settings() -> RawAdminOidc {
        RawAdminOidc {
            issuer: "https://idp.example.com".into(),
            audience: "toolplane-admin".into(),
            full_groups: vec!["platform".into()],
            read_only_groups: vec!["viewers".into()],
            tenant_admin_groups: BTreeMap::from([
                ("acme-admins".into(), vec!["acme".into()]),
                ("globex-admins".into(), vec!["globex".into(), "acme".into()]),
            ]),
            ..Default::default()
        }
    }

    fn oidc() -> AdminOidc {
        AdminOidc::new(
            settings().validate().unwrap().unwrap(),
            Arc::new(TokenVerifier::new(Duration::from_secs(30))),
        )
    }

    #[test]
    fn groups_map_to_the_strongest_scope_they_grant() {
        let oidc = oidc();
        let map = |claims: Value| oidc.map(&claims);
        let full = map(json!({"sub": "ann", "groups": ["viewers", "platform"]})).unwrap();
        assert_eq!(
            (full.name.as_str(), full.scope),
            ("oidc:ann", AdminScope::Full)
        );
        let tenants =
            map(json!({"sub": "bo", "groups": ["viewers", "acme-admins", "globex-admins"]}))
                .unwrap();
        assert_eq!(tenants.scope, AdminScope::TenantAdmin);
        assert_eq!(tenants.tenants, ["acme", "globex"]);
        // A space-separated string claim works too (e.g. `scope`).
        let viewer = map(json!({"sub": "cy", "groups": "staff viewers"})).unwrap();
        assert_eq!(viewer.scope, AdminScope::ReadOnly);
        // Signed in, but in no mapped group: refused, not a read-only default.
        let nobody = map(json!({"sub": "di", "groups": ["staff"]})).unwrap_err();
        assert_eq!(nobody.code(), tonic::Code::PermissionDenied);
        let no_groups = map(json!({"sub": "di"})).unwrap_err();
        assert_eq!(no_groups.code(), tonic::Code::PermissionDenied);
        // The name must be there and printable.
        for claims in [
            json!({"groups": ["platform"]}),
            json!({"sub": "", "groups": ["platform"]}),
            json!({"sub": "a\nb", "groups": ["platform"]}),
            json!({"sub": "x".repeat(500), "groups": ["platform"]}),
        ] {
            assert_eq!(
                map(claims).unwrap_err().code(),
                tonic::Code::Unauthenticated
            );
        }
    }

    #[test]
    fn the_name_claim_is_configurable() {
        let oidc = AdminOidc::new(
            RawAdminOidc {
                name_claim: "email".into(),
                groups_claim: "roles".into(),
                ..settings()
            },
            Arc::new(TokenVerifier::new(Duration::from_secs(30))),
        );
        let caller = oidc
            .map(&json!({"sub": "123", "email": "ann@example.com", "roles": ["platform"]}))
            .unwrap();
        assert_eq!(caller.name, "oidc:ann@example.com");
    }

    #[test]
    fn only_jwt_shaped_tokens_take_the_oidc_path() {
        assert!(AdminOidc::is_jwt(
            "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"
        ));
        assert!(!AdminOidc::is_jwt("adm_0123456789abcdef_secret"));
        assert!(!AdminOidc::is_jwt("eyJ.only-two"));
    }

    #[test]
    fn bad_sections_are_refused_and_an_empty_one_is_off() {
        assert_eq!(RawAdminOidc::default().validate(), Ok(None));
        let bad = [
            RawAdminOidc {
                issuer: String::new(),
                ..settings()
            },
            RawAdminOidc {
                issuer: "http://idp.example.com".into(),
                ..settings()
            },
            RawAdminOidc {
                audience: " ".into(),
                ..settings()
            },
            RawAdminOidc {
                full_groups: vec![],
                read_only_groups: vec![],
                tenant_admin_groups: BTreeMap::new(),
                ..settings()
            },
            RawAdminOidc {
                tenant_admin_groups: BTreeMap::from([("g".into(), vec![])]),
                ..settings()
            },
            RawAdminOidc {
                tenant_admin_groups: BTreeMap::from([("g".into(), vec!["Not A Slug".into()])]),
                ..settings()
            },
            RawAdminOidc {
                jwks_uri: "ftp://keys".into(),
                ..settings()
            },
        ];
        for section in bad {
            assert!(section.clone().validate().is_err(), "{section:?}");
        }
    }
}
