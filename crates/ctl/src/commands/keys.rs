//! `keys …`: API keys.

use super::*;

pub(super) fn print_keys(keys: &[pb::ApiKeyInfo], json_out: bool) {
    if json_out {
        let values: Vec<Value> = keys
            .iter()
            .map(|k| json!({"id": k.id, "tenant": k.tenant, "role": k.role, "label": k.label, "created_at": k.created_at, "expires_at": k.expires_at, "revoked_at": k.revoked_at}))
            .collect();
        out!("{}", pretty(&Value::Array(values)));
        return;
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let state = if k.revoked_at > 0 { "revoked" } else { "live" };
            vec![
                k.id.clone(),
                k.tenant.clone(),
                k.role.clone(),
                state.into(),
                if k.expires_at == 0 {
                    "never".into()
                } else {
                    crate::output::when(k.expires_at * 1000, crate::output::now_ms())
                },
                or_dash(&k.label),
            ]
        })
        .collect();
    out!(
        "{}",
        table(
            &["ID", "TENANT", "ROLE", "STATE", "EXPIRES_AT", "LABEL"],
            &rows
        )
    );
}

pub(super) async fn keys(mut admin: Admin, cmd: KeysCmd, json_out: bool) -> anyhow::Result<i32> {
    match cmd {
        KeysCmd::Issue {
            tenant,
            role,
            label,
            ttl,
        } => {
            let issued = admin
                .tenants
                .issue_api_key(pb::IssueApiKeyRequest {
                    tenant,
                    role,
                    label,
                    ttl_seconds: ttl,
                })
                .await?
                .into_inner();
            let info = issued.info.unwrap_or_default();
            if json_out {
                out!(
                    "{}",
                    pretty(
                        &json!({"key": issued.key, "id": info.id, "tenant": info.tenant, "role": info.role, "expires_at": info.expires_at})
                    )
                );
            } else {
                out!("{}", issued.key);
                eprintln!(
                    "key {} for tenant {} as {} — shown once; store it now",
                    info.id, info.tenant, info.role
                );
            }
        }
        KeysCmd::List { tenant } => {
            let keys = admin
                .tenants
                .list_api_keys(pb::ListApiKeysRequest { tenant })
                .await?
                .into_inner()
                .keys;
            print_keys(&keys, json_out);
        }
        KeysCmd::Revoke { id } => {
            let key = admin
                .tenants
                .revoke_api_key(pb::RevokeApiKeyRequest { id })
                .await?
                .into_inner();
            print_keys(&[key], json_out);
        }
    }
    Ok(0)
}
