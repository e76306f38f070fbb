//! `tenants connect | disconnect | connections`: what is printed of connections (never a
//! credential: no answer of the control plane holds one).

use tp_client::Admin;
use tp_proto::pb;

/// `tenants connect`.
pub(super) async fn connect(
    admin: &mut Admin,
    request: pb::ConnectProviderRequest,
    json_out: bool,
) -> anyhow::Result<i32> {
    let connection = admin.tenants.connect_provider(request).await?.into_inner();
    print(std::slice::from_ref(&connection), json_out);
    Ok(0)
}

/// `tenants disconnect`.
pub(super) async fn disconnect(
    admin: &mut Admin,
    tenant: String,
    provider: String,
    json_out: bool,
) -> anyhow::Result<i32> {
    let request = pb::DisconnectProviderRequest {
        tenant: tenant.clone(),
        provider: provider.clone(),
    };
    let answer = admin
        .tenants
        .disconnect_provider(request)
        .await?
        .into_inner();
    if json_out {
        println!("{}", serde_json::json!({"revision": answer.revision}));
    } else {
        println!(
            "disconnected {provider} from {tenant} (revision {})",
            answer.revision
        );
    }
    Ok(0)
}

/// `tenants connections`.
pub(super) async fn list(admin: &mut Admin, tenant: String, json_out: bool) -> anyhow::Result<i32> {
    let request = pb::ListConnectionsRequest { tenant };
    let answer = admin.tenants.list_connections(request).await?.into_inner();
    print(&answer.connections, json_out);
    Ok(0)
}

/// Prints connections as a table, or as JSON lines' array with `--json`.
pub(super) fn print(connections: &[pb::Connection], json_out: bool) {
    if json_out {
        let rows: Vec<serde_json::Value> = connections
            .iter()
            .map(|c| {
                serde_json::json!({
                    "tenant": c.tenant,
                    "provider": c.provider,
                    "kind": c.kind,
                    "fingerprint": c.fingerprint,
                    "created_at": c.created_at,
                    "created_by": c.created_by,
                    "expires_at": c.expires_at,
                    "kek_id": c.kek_id,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return;
    }
    if connections.is_empty() {
        println!("no connections");
        return;
    }
    println!(
        "{:<16} {:<16} {:<15} {:<13} {:<12} {:<17} CREATED BY",
        "TENANT", "PROVIDER", "KIND", "FINGERPRINT", "EXPIRES", "KEY"
    );
    for c in connections {
        let expires = if c.expires_at == 0 {
            "never".to_owned()
        } else {
            c.expires_at.to_string()
        };
        println!(
            "{:<16} {:<16} {:<15} {:<13} {:<12} {:<17} {}",
            c.tenant, c.provider, c.kind, c.fingerprint, expires, c.kek_id, c.created_by
        );
    }
}
