//! `connections list | connect | disconnect | status` (and the older `tenants connect |
//! disconnect | connections`): what is printed of connections (never a credential: no answer
//! of the control plane holds one).

use tp_client::Admin;
use tp_proto::pb;

use super::ConnectionsCmd;

/// `connections …`.
pub(super) async fn run(
    mut admin: Admin,
    cmd: ConnectionsCmd,
    json_out: bool,
) -> anyhow::Result<i32> {
    match cmd {
        ConnectionsCmd::List { id } => list(&mut admin, id, json_out).await,
        ConnectionsCmd::Connect {
            id,
            provider,
            credential: Some(credential),
            expires_at,
            user,
        } => {
            let request = pb::ConnectProviderRequest {
                tenant: id,
                provider,
                credential,
                expires_at: expires_at.unwrap_or(0),
                user: user.unwrap_or_default(),
            };
            connect(&mut admin, request, json_out).await
        }
        ConnectionsCmd::Connect {
            id,
            provider,
            credential: None,
            expires_at,
            user,
        } => {
            if expires_at.is_some() {
                anyhow::bail!(
                    "--expires-at goes with a credential; an OAuth connection expires when the provider's tokens do"
                );
            }
            let request = pb::BeginConnectRequest {
                tenant: id,
                provider,
                user: user.unwrap_or_default(),
            };
            begin(&mut admin, request, json_out).await
        }
        ConnectionsCmd::Disconnect { id, provider, user } => {
            let request = pb::DisconnectProviderRequest {
                tenant: id,
                provider,
                user: user.unwrap_or_default(),
            };
            disconnect(&mut admin, request, json_out).await
        }
        ConnectionsCmd::Status { id, provider, user } => {
            status(&mut admin, id, provider, user.unwrap_or_default(), json_out).await
        }
    }
}

/// `connections connect` without a credential: the provider's authorization URL.
async fn begin(
    admin: &mut Admin,
    request: pb::BeginConnectRequest,
    json_out: bool,
) -> anyhow::Result<i32> {
    let (tenant, provider) = (request.tenant.clone(), request.provider.clone());
    let whose = if request.user.is_empty() {
        format!("tenant {tenant}")
    } else {
        format!("{} of tenant {tenant} (their calls only)", request.user)
    };
    let answer = admin.tenants.begin_connect(request).await?.into_inner();
    if json_out {
        println!(
            "{}",
            serde_json::json!({
                "authorization_url": answer.authorization_url,
                "expires_at": answer.expires_at,
            })
        );
    } else {
        println!(
            "Open this URL in a browser and authorize Toolplane at {provider}; the account that consents is connected to {whose}.\nIt connects once, until {} (Unix seconds); share it only with who should connect that account.\n\n{}",
            answer.expires_at, answer.authorization_url
        );
    }
    Ok(0)
}

/// `connections status`: exit 0 with a usable connection, 1 without.
async fn status(
    admin: &mut Admin,
    tenant: String,
    provider: String,
    user: String,
    json_out: bool,
) -> anyhow::Result<i32> {
    let request = pb::ListConnectionsRequest {
        tenant: tenant.clone(),
    };
    let answer = admin.tenants.list_connections(request).await?.into_inner();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let found = answer
        .connections
        .into_iter()
        .find(|c| c.provider == provider && c.user == user);
    let whose = if user.is_empty() {
        tenant.clone()
    } else {
        format!("{user} of {tenant}")
    };
    let Some(connection) = found else {
        if json_out {
            println!("{}", serde_json::json!({"connected": false}));
        } else {
            println!("{whose} is not connected to {provider}");
        }
        return Ok(1);
    };
    let usable = connection.expires_at == 0 || now < connection.expires_at;
    if json_out {
        let mut row = row(&connection);
        row["connected"] = serde_json::json!(true);
        row["usable"] = serde_json::json!(usable);
        println!("{row}");
    } else {
        print_status(&whose, &provider, &connection, now);
    }
    Ok(if usable { 0 } else { 1 })
}

/// `connections status` in words.
fn print_status(whose: &str, provider: &str, connection: &pb::Connection, now: u64) {
    let expiry = match connection.expires_at {
        0 => "never expires".to_owned(),
        at if at > now => format!("expires in {} s", at - now),
        at => format!("EXPIRED {} s ago: calls to its tools are refused", now - at),
    };
    let renewal = if connection.refreshable {
        "renewed by the control plane before it expires"
    } else {
        "not renewed (connect again before it expires)"
    };
    println!(
        "{whose} → {provider}: {} connection, credential {}, {expiry}, {renewal}",
        connection.kind, connection.fingerprint
    );
    if !connection.scopes.is_empty() {
        println!("scopes: {}", connection.scopes.join(" "));
    }
    println!(
        "connected at {} by {}; credential obtained at {}; sealed under key {}",
        connection.created_at, connection.created_by, connection.issued_at, connection.kek_id
    );
}

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

/// `tenants disconnect`: the tenant's own connection.
pub(super) async fn disconnect_tenant(
    admin: &mut Admin,
    tenant: String,
    provider: String,
    json_out: bool,
) -> anyhow::Result<i32> {
    let request = pb::DisconnectProviderRequest {
        tenant,
        provider,
        user: String::new(),
    };
    disconnect(admin, request, json_out).await
}

/// `connections disconnect`.
pub(super) async fn disconnect(
    admin: &mut Admin,
    request: pb::DisconnectProviderRequest,
    json_out: bool,
) -> anyhow::Result<i32> {
    let (tenant, provider) = (request.tenant.clone(), request.provider.clone());
    let whose = if request.user.is_empty() {
        tenant.clone()
    } else {
        format!("{} of {tenant}", request.user)
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
            "disconnected {provider} from {whose} (revision {})",
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
        let rows: Vec<serde_json::Value> = connections.iter().map(row).collect();
        println!("{}", serde_json::Value::Array(rows));
        return;
    }
    if connections.is_empty() {
        println!("no connections");
        return;
    }
    println!(
        "{:<16} {:<16} {:<15} {:<13} {:<12} {:<17} {:<16} USER",
        "TENANT", "PROVIDER", "KIND", "FINGERPRINT", "EXPIRES", "KEY", "CREATED BY"
    );
    for c in connections {
        let expires = if c.expires_at == 0 {
            "never".to_owned()
        } else {
            c.expires_at.to_string()
        };
        let user = if c.user.is_empty() {
            "(tenant)"
        } else {
            &c.user
        };
        println!(
            "{:<16} {:<16} {:<15} {:<13} {:<12} {:<17} {:<16} {user}",
            c.tenant, c.provider, c.kind, c.fingerprint, expires, c.kek_id, c.created_by
        );
    }
}

/// One connection as JSON.
fn row(c: &pb::Connection) -> serde_json::Value {
    serde_json::json!({
        "tenant": c.tenant,
        "provider": c.provider,
        "kind": c.kind,
        "fingerprint": c.fingerprint,
        "created_at": c.created_at,
        "created_by": c.created_by,
        "expires_at": c.expires_at,
        "kek_id": c.kek_id,
        "scopes": c.scopes,
        "refreshable": c.refreshable,
        "issued_at": c.issued_at,
        "user": c.user,
    })
}
