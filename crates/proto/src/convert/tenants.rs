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

/// `connected_apis` as submitted: `all` (every tool), or the providers listed.
fn try_connected_apis(apis: pb::ConnectedApis) -> DomainResult<Option<Vec<String>>> {
    if apis.all {
        if !apis.providers.is_empty() {
            return Err(DomainError::invalid(
                "tenant.connected_apis",
                "set either all or providers, not both",
            ));
        }
        return Ok(None);
    }
    Ok(Some(apis.providers))
}

const CONNECTED_APIS_REQUIRED: &str = "is required: the providers whose tools the tenant sees \
     ({\"providers\": [\"google\"]}), an empty list for platform tools only ({\"providers\": []}), \
     or every tool ({\"all\": true})";

/// Converts a submitted tenant (to create): `connected_apis` must be given — a new tenant
/// never sees every tool by omission.
pub fn try_tenant(tenant: Option<pb::Tenant>) -> DomainResult<domain::Tenant> {
    let tenant = tenant.ok_or_else(|| DomainError::invalid("tenant", "is required"))?;
    let connected_apis = match tenant.connected_apis {
        Some(apis) => try_connected_apis(apis)?,
        None => {
            return Err(DomainError::invalid(
                "tenant.connected_apis",
                CONNECTED_APIS_REQUIRED,
            ));
        }
    };
    Ok(domain::Tenant {
        id: tenant.id,
        display_name: tenant.display_name,
        connected_apis,
        roles: tenant.roles,
        disclosure: try_disclosure(tenant.disclosure)?,
        rate_limit_per_minute: tenant.rate_limit_per_minute,
        lint_webhook: non_empty(&tenant.lint_webhook),
        token_issuers: tenant.token_issuers.iter().map(token_issuer).collect(),
        approvals: approval_rules(&tenant.approvals)?,
        revision: 0,
        // Chosen by the control plane, never by the caller.
        uid: String::new(),
    })
}

/// The fields of a tenant an update may name (`UpdateTenantRequest.update_mask`).
pub const TENANT_FIELDS: &[&str] = &[
    "display_name",
    "connected_apis",
    "roles",
    "disclosure",
    "disclosure.mode",
    "disclosure.threshold",
    "disclosure.pinned",
    "rate_limit_per_minute",
    "lint_webhook",
    "token_issuers",
    "approvals",
];

/// The fields an update without a mask changes: those `tenant` sets to a non-default value.
fn implied_mask(tenant: &pb::Tenant) -> Vec<&'static str> {
    let mut paths = Vec::new();
    if !tenant.display_name.is_empty() {
        paths.push("display_name");
    }
    if tenant.connected_apis.is_some() {
        paths.push("connected_apis");
    }
    if !tenant.roles.is_empty() {
        paths.push("roles");
    }
    if let Some(disclosure) = &tenant.disclosure {
        if disclosure.mode != 0 {
            paths.push("disclosure.mode");
        }
        if disclosure.threshold != 0 {
            paths.push("disclosure.threshold");
        }
        if !disclosure.pinned.is_empty() {
            paths.push("disclosure.pinned");
        }
    }
    if tenant.rate_limit_per_minute != 0 {
        paths.push("rate_limit_per_minute");
    }
    if !tenant.lint_webhook.is_empty() {
        paths.push("lint_webhook");
    }
    if !tenant.token_issuers.is_empty() {
        paths.push("token_issuers");
    }
    if !tenant.approvals.is_empty() {
        paths.push("approvals");
    }
    paths
}

/// The fields an update mask names (`*`: every top-level field); an unknown one is refused.
fn masked_paths(mask: &prost_types::FieldMask) -> DomainResult<Vec<String>> {
    let mut paths = Vec::new();
    let mut unknown = Vec::new();
    for path in &mask.paths {
        if path == "*" {
            paths.extend(
                TENANT_FIELDS
                    .iter()
                    .filter(|p| !p.contains('.'))
                    .map(|p| (*p).to_owned()),
            );
        } else if TENANT_FIELDS.contains(&path.as_str()) {
            paths.push(path.clone());
        } else {
            unknown.push(path.as_str());
        }
    }
    if !unknown.is_empty() {
        return Err(super::unknown_mask_fields(&unknown, TENANT_FIELDS));
    }
    Ok(paths)
}

/// `existing` changed as `submitted` and `mask` say (see `UpdateTenantRequest`): the fields the
/// mask names (or, without one, the fields `submitted` sets) take `submitted`'s values, every
/// other field keeps its own. Not validated yet (the state does that).
pub fn patch_tenant(
    existing: &domain::Tenant,
    submitted: pb::Tenant,
    mask: Option<&prost_types::FieldMask>,
) -> DomainResult<domain::Tenant> {
    let paths: Vec<String> = match mask {
        Some(mask) if !mask.paths.is_empty() => masked_paths(mask)?,
        _ => implied_mask(&submitted)
            .into_iter()
            .map(str::to_owned)
            .collect(),
    };
    let mut tenant = existing.clone();
    let named = |field: &str| paths.iter().any(|p| p == field);
    if named("display_name") {
        tenant.display_name = submitted.display_name.clone();
    }
    if named("connected_apis") {
        tenant.connected_apis = match submitted.connected_apis.clone() {
            Some(apis) => try_connected_apis(apis)?,
            None => {
                return Err(DomainError::invalid(
                    "tenant.connected_apis",
                    "named in update_mask but not given: give the providers, an empty list, \
                     or {\"all\": true} (every tool is never the result of an omission)",
                ));
            }
        };
    }
    if named("roles") {
        tenant.roles = submitted.roles.clone();
    }
    tenant.disclosure =
        patched_disclosure(&tenant.disclosure, submitted.disclosure.clone(), &named)?;
    if named("rate_limit_per_minute") {
        tenant.rate_limit_per_minute = submitted.rate_limit_per_minute;
    }
    if named("lint_webhook") {
        tenant.lint_webhook = non_empty(&submitted.lint_webhook);
    }
    if named("token_issuers") {
        tenant.token_issuers = submitted.token_issuers.iter().map(token_issuer).collect();
    }
    if named("approvals") {
        tenant.approvals = approval_rules(&submitted.approvals)?;
    }
    Ok(tenant)
}

/// A tenant's disclosure changed as the mask says: whole (`disclosure`) or field by field.
fn patched_disclosure(
    existing: &domain::Disclosure,
    submitted: Option<pb::Disclosure>,
    named: &dyn Fn(&str) -> bool,
) -> DomainResult<domain::Disclosure> {
    let submitted = submitted.unwrap_or_default();
    if named("disclosure") {
        return try_disclosure(Some(submitted));
    }
    let mut disclosure = pb::Disclosure::from(existing);
    if named("disclosure.mode") {
        disclosure.mode = submitted.mode;
    }
    if named("disclosure.threshold") {
        disclosure.threshold = submitted.threshold;
    }
    if named("disclosure.pinned") {
        disclosure.pinned = submitted.pinned;
    }
    try_disclosure(Some(disclosure))
}

/// The fields of a tenant only an operator (a `full` admin) may change: what the tenant may
/// reach and spend, and whose tokens it takes.
pub const OPERATOR_FIELDS: &[&str] = &[
    "connected_apis",
    "roles",
    "rate_limit_per_minute",
    "token_issuers",
    "approvals",
];

/// The operator's fields whose values differ between `a` and `b`.
pub fn operator_fields_changed(a: &domain::Tenant, b: &domain::Tenant) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if a.connected_apis != b.connected_apis {
        changed.push("connected_apis");
    }
    if a.roles != b.roles {
        changed.push("roles");
    }
    if a.rate_limit_per_minute != b.rate_limit_per_minute {
        changed.push("rate_limit_per_minute");
    }
    if a.token_issuers != b.token_issuers {
        changed.push("token_issuers");
    }
    if a.approvals != b.approvals {
        changed.push("approvals");
    }
    changed
}

impl From<&domain::Tenant> for pb::Tenant {
    fn from(t: &domain::Tenant) -> Self {
        pb::Tenant {
            id: t.id.clone(),
            display_name: t.display_name.clone(),
            // Absent (a tenant that predates the field) is every tool: said explicitly.
            connected_apis: Some(match &t.connected_apis {
                Some(providers) => pb::ConnectedApis {
                    providers: providers.clone(),
                    all: false,
                },
                None => pb::ConnectedApis {
                    providers: Vec::new(),
                    all: true,
                },
            }),
            roles: t.roles.clone(),
            disclosure: Some((&t.disclosure).into()),
            rate_limit_per_minute: t.rate_limit_per_minute,
            lint_webhook: t.lint_webhook.clone().unwrap_or_default(),
            revision: t.revision,
            uid: t.uid.clone(),
            token_issuers: t.token_issuers.iter().map(pb::TokenIssuer::from).collect(),
            approvals: t.approvals.iter().map(pb::ApprovalRule::from).collect(),
        }
    }
}

/// Approval rules as submitted (see [`approval_rule`]).
fn approval_rules(rules: &[pb::ApprovalRule]) -> DomainResult<Vec<domain::ApprovalRule>> {
    rules
        .iter()
        .enumerate()
        .map(|(index, rule)| approval_rule(index, rule))
        .collect()
}

/// The approval rule at `index` as submitted (0 seconds: the default timeout; `when_equals`
/// read as JSON).
pub fn approval_rule(index: usize, rule: &pb::ApprovalRule) -> DomainResult<domain::ApprovalRule> {
    let at = format!("tenant.approvals[{index}]");
    let when = match (rule.when_argument.is_empty(), rule.when_equals.is_empty()) {
        (true, true) => None,
        (false, false) => Some(domain::ApprovalCondition {
            argument: rule.when_argument.clone(),
            equals: serde_json::from_str(&rule.when_equals).map_err(|e| {
                DomainError::invalid(
                    format!("{at}.when_equals"),
                    format!("is not JSON ({e}): write true, 3 or \"send\""),
                )
            })?,
        }),
        _ => {
            return Err(DomainError::invalid(
                format!("{at}.when_argument"),
                "give when_argument and when_equals together",
            ));
        }
    };
    Ok(domain::ApprovalRule {
        tool: rule.tool.clone(),
        action: non_empty(&rule.action),
        roles: rule.roles.clone(),
        reason: rule.reason.clone(),
        timeout_secs: if rule.timeout_secs == 0 {
            domain::model::DEFAULT_APPROVAL_TIMEOUT_SECS
        } else {
            rule.timeout_secs
        },
        show: rule.show.clone(),
        when,
    })
}

impl From<&domain::ApprovalRule> for pb::ApprovalRule {
    fn from(rule: &domain::ApprovalRule) -> Self {
        pb::ApprovalRule {
            tool: rule.tool.clone(),
            action: rule.action.clone().unwrap_or_default(),
            roles: rule.roles.clone(),
            reason: rule.reason.clone(),
            timeout_secs: rule.timeout_secs,
            show: rule.show.clone(),
            when_argument: rule
                .when
                .as_ref()
                .map(|w| w.argument.clone())
                .unwrap_or_default(),
            when_equals: rule
                .when
                .as_ref()
                .map(|w| w.equals.to_string())
                .unwrap_or_default(),
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
        provider_scope_prefix: non_empty(&t.provider_scope_prefix),
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
            provider_scope_prefix: t.provider_scope_prefix.clone().unwrap_or_default(),
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

impl pb::UpdateTenantRequest {
    /// A request that sets every field of the tenant to `tenant`'s (mask `*`): what a
    /// read-modify-write of the whole tenant sends; refused if the tenant changed in between.
    pub fn replacing(tenant: pb::Tenant) -> Self {
        Self::changing(tenant, &["*"])
    }

    /// A request that changes only the fields `paths` names to `tenant`'s values.
    pub fn changing(tenant: pb::Tenant, paths: &[&str]) -> Self {
        pb::UpdateTenantRequest {
            tenant: Some(tenant),
            update_mask: Some(prost_types::FieldMask {
                paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            }),
        }
    }
}
