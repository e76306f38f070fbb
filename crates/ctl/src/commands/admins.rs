//! `admin-tokens …`, `whoami` and `changes`: admin identities and who changed what.

use super::*;

fn scope_name(value: i32) -> &'static str {
    match pb::AdminScope::try_from(value) {
        Ok(pb::AdminScope::ReadOnly) => "read-only",
        Ok(pb::AdminScope::TenantAdmin) => "tenant-admin",
        Ok(pb::AdminScope::Full) => "full",
        Ok(pb::AdminScope::Unspecified) | Err(_) => "unspecified",
    }
}

fn scope_value(name: &str) -> pb::AdminScope {
    match name {
        "read-only" => pb::AdminScope::ReadOnly,
        "tenant-admin" => pb::AdminScope::TenantAdmin,
        "full" => pb::AdminScope::Full,
        _ => pb::AdminScope::Unspecified,
    }
}

fn token_json(t: &pb::AdminTokenInfo) -> Value {
    json!({"id": t.id, "label": t.label, "scope": scope_name(t.scope), "tenants": t.tenants,
        "created_at": t.created_at, "created_by": t.created_by, "expires_at": t.expires_at,
        "revoked_at": t.revoked_at})
}

pub(super) async fn admin_tokens(
    mut admin: Admin,
    cmd: AdminTokensCmd,
    json_out: bool,
) -> anyhow::Result<i32> {
    match cmd {
        AdminTokensCmd::Issue {
            scope,
            tenants,
            label,
            ttl,
        } => {
            let expires_at = ttl.map_or(0, |secs| crate::output::now_ms() / 1000 + secs);
            let issued = admin
                .admins
                .issue_admin_token(pb::IssueAdminTokenRequest {
                    scope: scope_value(&scope) as i32,
                    tenants,
                    label,
                    expires_at,
                })
                .await?
                .into_inner();
            let info = issued.info.unwrap_or_default();
            if json_out {
                let mut value = token_json(&info);
                value["token"] = json!(issued.token);
                out!("{}", pretty(&value));
            } else {
                out!("{}", issued.token);
                eprintln!(
                    "admin token {} ({}) — shown once; store it now",
                    info.id,
                    scope_name(info.scope)
                );
            }
        }
        AdminTokensCmd::List => {
            let tokens = admin
                .admins
                .list_admin_tokens(pb::ListAdminTokensRequest {})
                .await?
                .into_inner()
                .tokens;
            print_tokens(&tokens, json_out);
        }
        AdminTokensCmd::Revoke { id } => {
            let info = admin
                .admins
                .revoke_admin_token(pb::RevokeAdminTokenRequest { id })
                .await?
                .into_inner();
            if json_out {
                out!("{}", pretty(&token_json(&info)));
            } else {
                out!("revoked {}", info.id);
            }
        }
    }
    Ok(0)
}

/// Admin tokens as JSON or a table.
fn print_tokens(tokens: &[pb::AdminTokenInfo], json_out: bool) {
    if json_out {
        out!(
            "{}",
            pretty(&Value::Array(tokens.iter().map(token_json).collect()))
        );
    } else {
        let now = crate::output::now_ms();
        let rows: Vec<Vec<String>> = tokens
            .iter()
            .map(|t| {
                vec![
                    t.id.clone(),
                    scope_name(t.scope).to_owned(),
                    or_dash(&t.tenants.join(",")),
                    if t.revoked_at > 0 { "revoked" } else { "live" }.to_owned(),
                    if t.expires_at == 0 {
                        "never".to_owned()
                    } else {
                        crate::output::when(t.expires_at * 1000, now)
                    },
                    t.created_by.clone(),
                    or_dash(&t.label),
                ]
            })
            .collect();
        out!(
            "{}",
            table(
                &[
                    "ID",
                    "SCOPE",
                    "TENANTS",
                    "STATE",
                    "EXPIRES",
                    "CREATED BY",
                    "LABEL"
                ],
                &rows
            )
        );
    }
}

pub(super) async fn whoami(mut admin: Admin, json_out: bool) -> anyhow::Result<i32> {
    let me = admin
        .admins
        .who_am_i(pb::WhoAmIRequest {})
        .await?
        .into_inner();
    if json_out {
        out!(
            "{}",
            pretty(&json!({"name": me.name, "scope": scope_name(me.scope), "tenants": me.tenants}))
        );
    } else if me.tenants.is_empty() {
        out!("{} ({})", me.name, scope_name(me.scope));
    } else {
        out!(
            "{} ({}: {})",
            me.name,
            scope_name(me.scope),
            me.tenants.join(", ")
        );
    }
    Ok(0)
}

fn op_name(op: i32) -> &'static str {
    if op == pb::ChangeOp::Delete as i32 {
        "delete"
    } else {
        "put"
    }
}

fn kind_name(kind: i32) -> String {
    pb::ObjectKind::try_from(kind)
        .map(|k| {
            k.as_str_name()
                .trim_start_matches("OBJECT_KIND_")
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|_| kind.to_string())
}

pub(super) async fn changes(
    mut admin: Admin,
    args: crate::ChangesArgs,
    json_out: bool,
) -> anyhow::Result<i32> {
    let mut since = args.since_revision;
    let mut left = args.limit.map_or(usize::MAX, |n| n as usize);
    let mut rows = Vec::new();
    loop {
        let page = admin
            .admins
            .list_changes(pb::ListChangesRequest {
                since_revision: since,
                page_size: 1000,
                author: args.author.clone(),
            })
            .await?
            .into_inner();
        for change in page.changes.iter().take(left) {
            let items: Vec<String> = change
                .items
                .iter()
                .map(|i| {
                    let verb = if i.verb.is_empty() {
                        op_name(i.op)
                    } else {
                        i.verb.as_str()
                    };
                    format!("{verb} {} {}", kind_name(i.kind), i.key)
                })
                .collect();
            if json_out {
                let items: Vec<Value> = change
                    .items
                    .iter()
                    .map(|i| json!({"op": op_name(i.op), "verb": i.verb, "kind": kind_name(i.kind), "key": i.key, "tenant": i.tenant}))
                    .collect();
                out!(
                    "{}",
                    json!({"revision": change.revision, "at_ms": change.committed_at_ms,
                        "author": change.author, "items": items})
                );
            } else {
                rows.push(vec![
                    change.revision.to_string(),
                    crate::output::when(change.committed_at_ms, crate::output::now_ms()),
                    or_dash(&change.author),
                    items.join("; "),
                ]);
            }
        }
        left = left.saturating_sub(page.changes.len());
        if left == 0 || page.next_since_revision == 0 {
            break;
        }
        since = page.next_since_revision;
    }
    if !json_out {
        out!("{}", table(&["REVISION", "AT", "AUTHOR", "CHANGES"], &rows));
    }
    Ok(0)
}
