//! `tenants …`.

use super::*;

pub(super) fn apply_tenant_args(tenant: &mut pb::Tenant, args: TenantArgs) -> anyhow::Result<()> {
    if let Some(name) = args.name {
        tenant.display_name = name;
    }
    if let Some(apis) = args.connected_apis {
        tenant.connected_apis = Some(pb::ConnectedApis {
            providers: split_list(&apis),
        });
    }
    if args.all_apis {
        tenant.connected_apis = None;
    }
    if let Some(roles) = args.roles {
        tenant.roles = split_list(&roles);
    }
    let disclosure = tenant.disclosure.get_or_insert_with(Default::default);
    if let Some(mode) = args.disclosure {
        disclosure.mode = match mode.as_str() {
            "full" => pb::DisclosureMode::Full,
            "progressive" => pb::DisclosureMode::Progressive,
            "auto" => pb::DisclosureMode::Auto,
            other => bail!("unknown disclosure mode {other:?} (full, progressive, auto)"),
        } as i32;
    }
    if let Some(threshold) = args.threshold {
        disclosure.threshold = threshold;
    }
    if let Some(pinned) = args.pinned {
        disclosure.pinned = split_list(&pinned);
    }
    if let Some(rate) = args.rate_limit {
        tenant.rate_limit_per_minute = rate;
    }
    if let Some(webhook) = args.lint_webhook {
        tenant.lint_webhook = webhook;
    }
    Ok(())
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
        TenantsCmd::Create(args) => {
            let mut tenant = pb::Tenant {
                id: args.id.clone(),
                ..Default::default()
            };
            apply_tenant_args(&mut tenant, args)?;
            admin
                .tenants
                .create_tenant(pb::CreateTenantRequest {
                    tenant: Some(tenant),
                })
                .await?
                .into_inner()
        }
        TenantsCmd::Update(args) => {
            let mut tenant = admin
                .tenants
                .get_tenant(pb::GetTenantRequest {
                    id: args.id.clone(),
                })
                .await?
                .into_inner();
            apply_tenant_args(&mut tenant, args)?;
            admin
                .tenants
                .update_tenant(pb::UpdateTenantRequest {
                    tenant: Some(tenant),
                })
                .await?
                .into_inner()
        }
        TenantsCmd::Delete { id } => {
            let deleted = admin
                .tenants
                .delete_tenant(pb::DeleteTenantRequest { id: id.clone() })
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
            return Ok(0);
        }
    };
    print_tenants(&[tenant], json_out);
    Ok(0)
}
