//! Tenants: disclosure settings, trusted token issuers and API keys.

use super::*;

fn try_disclosure(disclosure: Option<pb::Disclosure>) -> DomainResult<domain::Disclosure> {
    let disclosure = disclosure.unwrap_or_default();
    let mode = match pb::DisclosureMode::try_from(disclosure.mode) {
        Ok(pb::DisclosureMode::Unspecified | pb::DisclosureMode::Auto) => {
            domain::DisclosureMode::Auto
        }
        Ok(pb::DisclosureMode::Full) => domain::DisclosureMode::Full,
        Ok(pb::DisclosureMode::Progressive) => domain::DisclosureMode::Progressive,
        Err(_) => {
            return Err(DomainError::invalid(
                "tenant.disclosure.mode",
                format!("unknown value {}", disclosure.mode),
            ));
        }
    };
    Ok(domain::Disclosure {
        mode,
        threshold: if disclosure.threshold == 0 {
            domain::model::DEFAULT_AUTO_THRESHOLD
        } else {
            disclosure.threshold
        },
        pinned: disclosure.pinned,
    })
}

impl From<&domain::Disclosure> for pb::Disclosure {
    fn from(d: &domain::Disclosure) -> Self {
        let mode = match d.mode {
            domain::DisclosureMode::Full => pb::DisclosureMode::Full,
            domain::DisclosureMode::Progressive => pb::DisclosureMode::Progressive,
            domain::DisclosureMode::Auto => pb::DisclosureMode::Auto,
        };
        pb::Disclosure {
            mode: mode as i32,
            threshold: d.threshold,
            pinned: d.pinned.clone(),
        }
    }
}

impl From<&pb::Disclosure> for domain::Disclosure {
    fn from(d: &pb::Disclosure) -> Self {
        try_disclosure(Some(d.clone())).unwrap_or_default()
    }
}

/// Converts a submitted tenant.
pub fn try_tenant(tenant: Option<pb::Tenant>) -> DomainResult<domain::Tenant> {
    let tenant = tenant.ok_or_else(|| DomainError::invalid("tenant", "is required"))?;
    Ok(domain::Tenant {
        id: tenant.id,
        display_name: tenant.display_name,
        connected_apis: tenant.connected_apis.map(|c| c.providers),
        roles: tenant.roles,
        disclosure: try_disclosure(tenant.disclosure)?,
        rate_limit_per_minute: tenant.rate_limit_per_minute,
        lint_webhook: non_empty(&tenant.lint_webhook),
        token_issuers: tenant.token_issuers.iter().map(token_issuer).collect(),
        revision: 0,
        // Chosen by the control plane, never by the caller.
        uid: String::new(),
    })
}

impl From<&domain::Tenant> for pb::Tenant {
    fn from(t: &domain::Tenant) -> Self {
        pb::Tenant {
            id: t.id.clone(),
            display_name: t.display_name.clone(),
            connected_apis: t
                .connected_apis
                .as_ref()
                .map(|providers| pb::ConnectedApis {
                    providers: providers.clone(),
                }),
            roles: t.roles.clone(),
            disclosure: Some((&t.disclosure).into()),
            rate_limit_per_minute: t.rate_limit_per_minute,
            lint_webhook: t.lint_webhook.clone().unwrap_or_default(),
            revision: t.revision,
            uid: t.uid.clone(),
            token_issuers: t.token_issuers.iter().map(pb::TokenIssuer::from).collect(),
        }
    }
}

fn token_issuer(t: &pb::TokenIssuer) -> domain::TokenIssuer {
    domain::TokenIssuer {
        issuer: t.issuer.clone(),
        audience: non_empty(&t.audience),
        jwks_uri: non_empty(&t.jwks_uri),
        tenant_claim: non_empty(&t.tenant_claim),
        tenant_value: non_empty(&t.tenant_value),
        role_claim: non_empty(&t.role_claim).unwrap_or_else(|| "groups".to_owned()),
        group_roles: t
            .group_roles
            .iter()
            .map(|g| domain::GroupRole {
                group: g.group.clone(),
                role: g.role.clone(),
            })
            .collect(),
        default_role: non_empty(&t.default_role),
    }
}

impl From<&domain::TokenIssuer> for pb::TokenIssuer {
    fn from(t: &domain::TokenIssuer) -> Self {
        pb::TokenIssuer {
            issuer: t.issuer.clone(),
            audience: t.audience.clone().unwrap_or_default(),
            jwks_uri: t.jwks_uri.clone().unwrap_or_default(),
            tenant_claim: t.tenant_claim.clone().unwrap_or_default(),
            tenant_value: t.tenant_value.clone().unwrap_or_default(),
            role_claim: t.role_claim.clone(),
            group_roles: t
                .group_roles
                .iter()
                .map(|g| pb::GroupRole {
                    group: g.group.clone(),
                    role: g.role.clone(),
                })
                .collect(),
            default_role: t.default_role.clone().unwrap_or_default(),
        }
    }
}

impl From<&domain::ApiKey> for pb::ApiKeyInfo {
    fn from(k: &domain::ApiKey) -> Self {
        pb::ApiKeyInfo {
            id: k.id.clone(),
            tenant: k.tenant.clone(),
            role: k.role.clone(),
            label: k.label.clone(),
            created_at: k.created_at,
            expires_at: k.expires_at.unwrap_or(0),
            revoked_at: k.revoked_at.unwrap_or(0),
        }
    }
}
