//! `tenants …`.

use super::*;

/// `args` written into `tenant`; the fields it sets, as `UpdateTenantRequest.update_mask`
/// paths (only those change: everything else keeps its value).
pub(super) fn apply_tenant_args(
    tenant: &mut pb::Tenant,
    args: TenantArgs,
) -> anyhow::Result<Vec<String>> {
    let approvals = (args.no_approvals || !args.approvals.is_empty())
        .then(|| approval_rules(&args))
        .transpose()?;
    let mut paths = Vec::new();
    let mut set = |path: &str| paths.push(path.to_owned());
    if let Some(name) = args.name {
        tenant.display_name = name;
        set("display_name");
    }
    if let Some(apis) = args.connected_apis {
        tenant.connected_apis = Some(pb::ConnectedApis {
            providers: split_list(&apis),
            all: false,
        });
        set("connected_apis");
    }
    if args.all_apis {
        tenant.connected_apis = Some(pb::ConnectedApis {
            providers: Vec::new(),
            all: true,
        });
        set("connected_apis");
    }
    if let Some(roles) = args.roles {
        tenant.roles = split_list(&roles);
        set("roles");
    }
    let disclosure = tenant.disclosure.get_or_insert_with(Default::default);
    if let Some(mode) = args.disclosure {
        disclosure.mode = disclosure_mode(&mode)? as i32;
        set("disclosure.mode");
    }
    if let Some(threshold) = args.threshold {
        disclosure.threshold = threshold;
        set("disclosure.threshold");
    }
    if let Some(pinned) = args.pinned {
        disclosure.pinned = split_list(&pinned);
        set("disclosure.pinned");
    }
    if let Some(rate) = args.rate_limit {
        tenant.rate_limit_per_minute = rate;
        set("rate_limit_per_minute");
    }
    if let Some(webhook) = args.lint_webhook {
        tenant.lint_webhook = webhook;
        set("lint_webhook");
    }
    if let Some(rules) = approvals {
        tenant.approvals = rules;
        set("approvals");
    }
    Ok(paths)
}

/// The disclosure mode of `--disclosure` (`full`, `progressive` or `auto`).
fn disclosure_mode(mode: &str) -> anyhow::Result<pb::DisclosureMode> {
    Ok(match mode {
        "full" => pb::DisclosureMode::Full,
        "progressive" => pb::DisclosureMode::Progressive,
        "auto" => pb::DisclosureMode::Auto,
        other => bail!("unknown disclosure mode {other:?} (full, progressive, auto)"),
    })
}

/// `--approval TOOL[:ACTION]=REASON` rules, with the shared roles, shown arguments and timeout
/// (none for `--no-approvals`).
fn approval_rules(args: &TenantArgs) -> anyhow::Result<Vec<pb::ApprovalRule>> {
    let roles = args.approval_roles.as_deref();
    let show = args.approval_show.as_deref();
    let timeout = args.approval_timeout;
    args.approvals
        .iter()
        .map(|spec| {
            let (target, when, reason) = approval_spec(spec)?;
            let (tool, action) = target.split_once(':').unwrap_or((target, ""));
            let (when_argument, when_equals) = when.unwrap_or(("", ""));
            Ok(pb::ApprovalRule {
                tool: tool.trim().to_owned(),
                action: action.trim().to_owned(),
                roles: roles.map(split_list).unwrap_or_default(),
                reason: reason.trim().to_owned(),
                timeout_secs: timeout.unwrap_or(0),
                show: show.map(split_list).unwrap_or_default(),
                when_argument: when_argument.trim().to_owned(),
                when_equals: when_equals.trim().to_owned(),
            })
        })
        .collect()
}

/// One `--approval`: the tool (and action), the condition `(ARG, JSON)`, and the reason.
type ApprovalSpec<'a> = (&'a str, Option<(&'a str, &'a str)>, &'a str);

/// `TOOL[:ACTION][[ARG=JSON]]=REASON` as (target, condition, reason).
fn approval_spec(spec: &str) -> anyhow::Result<ApprovalSpec<'_>> {
    let usage = || {
        anyhow::anyhow!(
            "--approval {spec:?}: write TOOL=REASON, TOOL:ACTION=REASON or TOOL:ACTION[ARG=JSON]=REASON"
        )
    };
    let equals = spec.find('=').ok_or_else(usage)?;
    match spec.find('[').filter(|&open| open < equals) {
        None => Ok((&spec[..equals], None, &spec[equals + 1..])),
        Some(open) => {
            let close = spec[open..].find(']').map(|c| open + c).ok_or_else(usage)?;
            let condition = spec[open + 1..close].split_once('=').ok_or_else(usage)?;
            let reason = spec[close + 1..].strip_prefix('=').ok_or_else(usage)?;
            Ok((&spec[..open], Some(condition), reason))
        }
    }
}

pub(super) fn print_tenants(tenants: &[pb::Tenant], json_out: bool) {
    if json_out {
        let values: Vec<Value> = tenants
            .iter()
            .map(|t| {
                // try_tenant reads a tenant as input (no revision); show the stored one.
                json!(try_tenant(Some(t.clone())).ok().map(|mut tenant| {
                    tenant.revision = t.revision;
                    tenant
                }))
            })
            .collect();
        out!("{}", pretty(&Value::Array(values)));
        return;
    }
    let rows: Vec<Vec<String>> = tenants
        .iter()
        .map(|t| {
            let apis = match &t.connected_apis {
                None => "(all)".to_owned(),
                Some(c) if c.all => "(all)".to_owned(),
                Some(c) if c.providers.is_empty() => "(none)".to_owned(),
                Some(c) => c.providers.join(","),
            };
            let disclosure = t.disclosure.clone().unwrap_or_default();
            let mode = pb::DisclosureMode::try_from(disclosure.mode)
                .map(|m| m.as_str_name())
                .unwrap_or("?");
            vec![
                t.id.clone(),
                apis,
                if t.roles.is_empty() {
                    "all".into()
                } else {
                    t.roles.join(",")
                },
                mode.trim_start_matches("DISCLOSURE_MODE_").to_lowercase(),
                t.rate_limit_per_minute.to_string(),
                t.display_name.clone(),
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &[
                "ID",
                "CONNECTED_APIS",
                "ROLES",
                "DISCLOSURE",
                "RATE/MIN",
                "NAME"
            ],
            &rows
        )
    );
}

pub(super) async fn tenants(
    mut admin: Admin,
    cmd: TenantsCmd,
    json_out: bool,
) -> anyhow::Result<i32> {
    let tenant = match cmd {
        TenantsCmd::List => {
            let tenants = admin
                .tenants
                .list_tenants(pb::ListTenantsRequest {})
                .await?
                .into_inner()
                .tenants;
            print_tenants(&tenants, json_out);
            return Ok(0);
        }
        TenantsCmd::Get { id } => admin
            .tenants
            .get_tenant(pb::GetTenantRequest { id })
            .await?
            .into_inner(),
        TenantsCmd::Create(args) => create(&mut admin, args).await?,
        TenantsCmd::Update(args) => {
            let mut tenant = pb::Tenant {
                id: args.id.clone(),
                ..Default::default()
            };
            let paths = apply_tenant_args(&mut tenant, args)?;
            if paths.is_empty() {
                bail!("nothing to change: give at least one of the flags (see --help)");
            }
            admin
                .tenants
                .update_tenant(pb::UpdateTenantRequest {
                    tenant: Some(tenant),
                    update_mask: Some(prost_types::FieldMask { paths }),
                })
                .await?
                .into_inner()
        }
        TenantsCmd::Delete { id } => return delete(&mut admin, &id, json_out).await,
        TenantsCmd::Connect(args) => {
            return super::connections::connect(&mut admin, args.into(), json_out).await;
        }
        TenantsCmd::Disconnect { id, provider } => {
            return super::connections::disconnect_tenant(&mut admin, id, provider, json_out).await;
        }
        TenantsCmd::Connections { id } => {
            return super::connections::list(&mut admin, id, json_out).await;
        }
        TenantsCmd::Trust(args) => {
            let trust = token_issuer(&args)?;
            change(&mut admin, &args.id, |tenant| {
                tenant.token_issuers.retain(|t| t.issuer != trust.issuer);
                tenant.token_issuers.push(trust);
                Ok(())
            })
            .await?
        }
        TenantsCmd::Untrust { id, issuer } => {
            change(&mut admin, &id, |tenant| {
                let before = tenant.token_issuers.len();
                tenant.token_issuers.retain(|t| t.issuer != issuer);
                if tenant.token_issuers.len() == before {
                    bail!("tenant {id} does not trust {issuer:?}");
                }
                Ok(())
            })
            .await?
        }
    };
    print_tenants(std::slice::from_ref(&tenant), json_out);
    if !json_out {
        print_trusts(&tenant);
    }
    Ok(0)
}

/// `tenants create`: what the tenant sees must be said, never left to a default.
async fn create(admin: &mut Admin, args: TenantArgs) -> anyhow::Result<pb::Tenant> {
    if args.connected_apis.is_none() && !args.all_apis {
        bail!(
            "say which tools tenant {} sees: --connected-apis PROVIDERS (comma-separated; \"\" for platform tools only) or --all-apis (every tool)",
            args.id
        );
    }
    let mut tenant = pb::Tenant {
        id: args.id.clone(),
        ..Default::default()
    };
    apply_tenant_args(&mut tenant, args)?;
    Ok(admin
        .tenants
        .create_tenant(pb::CreateTenantRequest {
            tenant: Some(tenant),
        })
        .await?
        .into_inner())
}

/// `tenants delete`: the tenant and its keys.
async fn delete(admin: &mut Admin, id: &str, json_out: bool) -> anyhow::Result<i32> {
    let deleted = admin
        .tenants
        .delete_tenant(pb::DeleteTenantRequest { id: id.to_owned() })
        .await?
        .into_inner();
    if json_out {
        out!(
            "{}",
            pretty(
                &json!({"deleted": id, "keys_deleted": deleted.keys_deleted, "revision": deleted.revision})
            )
        );
    } else {
        out!(
            "deleted tenant {id} and {} keys (revision {})",
            deleted.keys_deleted,
            deleted.revision
        );
    }
    Ok(0)
}

/// The issuers a tenant trusts, one line each: the claims read and the group mapping.
fn print_trusts(tenant: &pb::Tenant) {
    for trust in &tenant.token_issuers {
        let mapping: Vec<String> = trust
            .group_roles
            .iter()
            .map(|g| format!("{}={}", g.group, g.role))
            .chain((!trust.default_role.is_empty()).then(|| format!("*={}", trust.default_role)))
            .collect();
        let selector = if trust.tenant_claim.is_empty() {
            String::new()
        } else {
            format!(" where {}={}", trust.tenant_claim, trust.tenant_value)
        };
        out!(
            "trusts {}{selector}: {} {}",
            trust.issuer,
            trust.role_claim,
            mapping.join(" ")
        );
    }
}

/// Reads tenant `id`'s trusts, changes them with `edit`, and writes them back (only them, and
/// only if the tenant has not changed since it was read).
async fn change(
    admin: &mut Admin,
    id: &str,
    edit: impl FnOnce(&mut pb::Tenant) -> anyhow::Result<()>,
) -> anyhow::Result<pb::Tenant> {
    let mut tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: id.to_owned() })
        .await?
        .into_inner();
    edit(&mut tenant)?;
    Ok(admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest {
            tenant: Some(tenant),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["token_issuers".to_owned()],
            }),
        })
        .await?
        .into_inner())
}

/// A trust from `tenants trust` flags.
fn token_issuer(args: &TrustArgs) -> anyhow::Result<pb::TokenIssuer> {
    let pair = |text: &str, what: &str| -> anyhow::Result<(String, String)> {
        match text.split_once('=') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_owned(), b.to_owned())),
            _ => bail!("{what}: expected NAME=VALUE, got {text:?}"),
        }
    };
    let group_roles = args
        .group_roles
        .iter()
        .map(|text| pair(text, "--group-role").map(|(group, role)| pb::GroupRole { group, role }))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (tenant_claim, tenant_value) = match &args.tenant_claim {
        Some(text) => pair(text, "--tenant-claim")?,
        None => Default::default(),
    };
    if group_roles.is_empty() && args.default_role.is_none() {
        bail!("give --group-role GROUP=ROLE or --default-role ROLE (or both)");
    }
    Ok(pb::TokenIssuer {
        issuer: args.issuer.clone(),
        audience: args.audience.clone().unwrap_or_default(),
        jwks_uri: args.jwks_uri.clone().unwrap_or_default(),
        tenant_claim,
        tenant_value,
        role_claim: args.role_claim.clone(),
        group_roles,
        default_role: args.default_role.clone().unwrap_or_default(),
        provider_scope_prefix: args.provider_scope_prefix.clone().unwrap_or_default(),
    })
}
