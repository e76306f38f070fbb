//! Connections (ADR 0015): `Tenants/ConnectProvider`, `DisconnectProvider`,
//! `ListConnections`, and the edges' `Registry/GetCredential`.
//!
//! A credential is sealed as soon as it arrives and is opened only for an edge's
//! `GetCredential`; every other answer shows the connection without it.

use tonic::Status;
use tp_proto::pb;
use tp_registry::{AdminCaller, Connection, ConnectionKind, DomainError, ErrorCode};

use super::{domain, required, status};
use crate::admin_auth::check_tenant;
use crate::engine::{Engine, now_secs};
use crate::vault::{MAX_CREDENTIAL, Vault, fingerprint};

/// A connection as reads show it: no secret, the id of the key that wraps it.
pub fn connection_pb(connection: &Connection) -> pb::Connection {
    pb::Connection {
        tenant: connection.tenant.clone(),
        provider: connection.provider.clone(),
        kind: connection.kind.as_str().into(),
        fingerprint: connection.fingerprint.clone(),
        created_at: connection.created_at,
        created_by: connection.created_by.clone(),
        expires_at: connection.expires_at.unwrap_or(0),
        kek_id: connection.secret.kek_id.clone(),
        scopes: connection.scopes.clone(),
        refreshable: connection.refreshable(),
        issued_at: connection.issued_at.unwrap_or(connection.created_at),
        user: connection.user.clone().unwrap_or_default(),
    }
}

/// What a tenant's registry says of its connections, by provider: the tenant's credential's
/// fingerprint and expiry, and each user's who has one of their own (no secret).
pub fn connected_providers(
    state: &tp_registry::State,
    tenant: &tp_registry::Tenant,
) -> Vec<pb::ConnectedProvider> {
    let mut by_provider = std::collections::BTreeMap::<&str, pb::ConnectedProvider>::new();
    for connection in state
        .connections_of(&tenant.id)
        .filter(|c| c.tenant_uid == tenant.uid)
        // An object whose user does not match its key (an older replica's write) is left out.
        .filter(|c| c.id == Connection::key_for(&c.tenant, &c.provider, c.user.as_deref()))
    {
        let entry =
            by_provider
                .entry(&connection.provider)
                .or_insert_with(|| pb::ConnectedProvider {
                    provider: connection.provider.clone(),
                    ..pb::ConnectedProvider::default()
                });
        let expires_at = connection.expires_at.unwrap_or(0);
        match &connection.user {
            Some(user) => entry.users.push(pb::UserConnection {
                user: user.clone(),
                fingerprint: connection.fingerprint.clone(),
                expires_at,
            }),
            None => {
                entry.fingerprint.clone_from(&connection.fingerprint);
                entry.expires_at = expires_at;
            }
        }
    }
    by_provider.into_values().collect()
}

/// The user a request names (empty: the tenant), checked.
fn user_of(user: &str) -> Result<Option<&str>, Status> {
    if user.is_empty() {
        return Ok(None);
    }
    tp_registry::check_user(user).map_err(|why| domain(DomainError::invalid("user", why)))?;
    Ok(Some(user))
}

/// `Tenants/BeginConnect`: the provider's authorization URL for the tenant.
pub async fn begin(
    connector: Option<&crate::provider_oauth::Connector>,
    author: &str,
    who: &AdminCaller,
    request: pb::BeginConnectRequest,
) -> Result<pb::BeginConnectResponse, Status> {
    required("tenant", &request.tenant)?;
    check_tenant(who, &request.tenant)?;
    required("provider", &request.provider)?;
    let connector = connector.ok_or_else(|| {
        domain(DomainError::new(
            ErrorCode::FailedPrecondition,
            format!(
                "no provider is configured for OAuth: add [connections] callback_listen and a [[connections.oauth]] section for {:?} to the control plane's configuration, or connect it with an API credential (ConnectProvider)",
                request.provider
            ),
        ))
    })?;
    let user = user_of(&request.user)?;
    let authorization = connector
        .begin(&request.tenant, &request.provider, user, author)
        .await
        .map_err(domain)?;
    tracing::info!(tenant = %request.tenant, provider = %request.provider, user = user.unwrap_or(""), %author, "OAuth connection started");
    Ok(pb::BeginConnectResponse {
        authorization_url: authorization.url,
        expires_at: authorization.expires_at,
    })
}

/// A credential is 1 to [`MAX_CREDENTIAL`] bytes of printable ASCII: it becomes a header value.
fn check_credential(credential: &str) -> Result<(), Status> {
    if credential.is_empty() || credential.len() > MAX_CREDENTIAL {
        return Err(domain(DomainError::invalid(
            "credential",
            format!("must hold 1 to {MAX_CREDENTIAL} bytes"),
        )));
    }
    if !credential.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(domain(DomainError::invalid(
            "credential",
            "must be printable ASCII without spaces (it is sent as a bearer token)",
        )));
    }
    Ok(())
}

/// Without a vault, connections cannot be made or read.
fn vault(vault: Option<&Vault>) -> Result<&Vault, Status> {
    vault.ok_or_else(|| {
        domain(DomainError::new(
            ErrorCode::FailedPrecondition,
            "connections need the connections' keys: set auth.connections_keys_file or auth.connections_keys_env (every replica on PostgreSQL reads the same keys)",
        ))
    })
}

/// A credential that could not be sealed: logged, and refused without details.
fn seal_failed(error: anyhow::Error) -> Status {
    tracing::error!(%error, "sealing a credential failed");
    domain(DomainError::new(
        ErrorCode::Internal,
        "the credential could not be sealed",
    ))
}

/// `Tenants/ConnectProvider`.
pub async fn connect(
    engine: &Engine,
    sealer: Option<&Vault>,
    author: &str,
    who: &AdminCaller,
    request: pb::ConnectProviderRequest,
) -> Result<pb::Connection, Status> {
    required("tenant", &request.tenant)?;
    check_tenant(who, &request.tenant)?;
    required("provider", &request.provider)?;
    check_credential(&request.credential)?;
    let user = user_of(&request.user)?.map(str::to_owned);
    let now = now_secs();
    if request.expires_at != 0 && request.expires_at <= now {
        return Err(domain(DomainError::invalid("expires_at", "is in the past")));
    }
    let (uid, secret) = seal(engine, vault(sealer)?, &request, user.as_deref()).await?;
    let connection = Connection {
        id: Connection::key_for(&request.tenant, &request.provider, user.as_deref()),
        tenant: request.tenant,
        provider: request.provider,
        tenant_uid: uid,
        kind: ConnectionKind::ApiCredential,
        secret,
        fingerprint: fingerprint(&request.credential),
        created_at: now,
        created_by: author.to_owned(),
        expires_at: (request.expires_at != 0).then_some(request.expires_at),
        refresh: None,
        scopes: Vec::new(),
        issued_at: None,
        renewing_until: None,
        renewing_by: None,
        user,
        flow: None,
    };
    engine
        .write(author, |state| Ok((state.connect(connection.clone())?, ())))
        .await
        .map_err(status)?;
    tracing::info!(
        tenant = %connection.tenant,
        provider = %connection.provider,
        user = connection.user.as_deref().unwrap_or(""),
        fingerprint = %connection.fingerprint,
        "provider connected"
    );
    Ok(connection_pb(&connection))
}

/// The tenant's incarnation, and `request`'s credential sealed for its connection (outside
/// the write: the write may run again after a conflict, and each seal draws fresh keys).
async fn seal(
    engine: &Engine,
    sealer: &Vault,
    request: &pb::ConnectProviderRequest,
    user: Option<&str>,
) -> Result<(String, tp_registry::Sealed), Status> {
    let uid = engine
        .read(|state| state.tenant(&request.tenant).map(|t| t.uid.clone()))
        .await
        .map_err(domain)?;
    let secret = sealer
        .seal(
            &request.credential,
            &request.tenant,
            &uid,
            &Connection::binding_of(&request.provider, user),
        )
        .map_err(seal_failed)?;
    Ok((uid, secret))
}

/// `Tenants/DisconnectProvider`.
pub async fn disconnect(
    engine: &Engine,
    author: &str,
    who: &AdminCaller,
    request: pb::DisconnectProviderRequest,
) -> Result<pb::DisconnectProviderResponse, Status> {
    required("tenant", &request.tenant)?;
    check_tenant(who, &request.tenant)?;
    required("provider", &request.provider)?;
    let user = user_of(&request.user)?;
    let written = engine
        .write(author, |state| {
            Ok((
                state.disconnect_user(&request.tenant, &request.provider, user)?,
                (),
            ))
        })
        .await
        .map_err(status)?;
    tracing::info!(tenant = %request.tenant, provider = %request.provider, user = user.unwrap_or(""), "provider disconnected");
    Ok(pb::DisconnectProviderResponse {
        revision: written.revision,
    })
}

/// `Tenants/ListConnections`.
pub async fn list(
    engine: &Engine,
    who: &AdminCaller,
    request: pb::ListConnectionsRequest,
) -> Result<pb::ListConnectionsResponse, Status> {
    required("tenant", &request.tenant)?;
    check_tenant(who, &request.tenant)?;
    engine
        .read(|state| {
            state.tenant(&request.tenant)?;
            Ok(pb::ListConnectionsResponse {
                connections: state
                    .connections_of(&request.tenant)
                    .map(connection_pb)
                    .collect(),
            })
        })
        .await
        .map_err(domain)
}

/// `Registry/GetCredential`: the usable credential of the tenant's user (when the request
/// names one) or of the tenant for `provider`, opened. A user's request never falls back to
/// the tenant's credential here: the edge asks for the tenant's when the registry lists no
/// connection of the user's, so a user's credential revoked meanwhile is refused, not swapped.
pub async fn credential(
    engine: &Engine,
    opener: Option<&Vault>,
    request: pb::GetCredentialRequest,
) -> Result<pb::Credential, Status> {
    required("tenant", &request.tenant)?;
    required("provider", &request.provider)?;
    let user = user_of(&request.user)?;
    refuse_older_edges(engine, &request).await?;
    let key = Connection::key_for(&request.tenant, &request.provider, user);
    let (connection, revision) = current(engine, &key, user).await;
    let Some(connection) = connection else {
        return Err(domain(DomainError::not_found("connection", &key)));
    };
    // An expired credential is not handed out, and the call does not fall back to the
    // executor's own credential either: the edge refuses it until the tenant reconnects.
    if !connection.usable_at(now_secs()) {
        return Err(domain(DomainError::new(
            ErrorCode::FailedPrecondition,
            format!("the credential of {key} has expired: connect the provider again"),
        )));
    }
    let credential = vault(opener)?
        .open(
            &connection.secret,
            &connection.tenant,
            &connection.tenant_uid,
            &connection.binding(),
        )
        .map_err(|error| {
            tracing::error!(%error, connection = %key, "a connection's secret does not open");
            domain(DomainError::new(
                ErrorCode::FailedPrecondition,
                format!(
                    "the credential of {key} cannot be opened with the connections' keys in force"
                ),
            ))
        })?;
    tracing::info!(connection = %key, fingerprint = %connection.fingerprint, "credential handed to an edge");
    Ok(pb::Credential {
        credential,
        expires_at: connection.expires_at.unwrap_or(0),
        revision,
        fingerprint: connection.fingerprint,
        user: connection.user.unwrap_or_default(),
    })
}

/// The connection at `key`, when it belongs to the tenant's current incarnation and to `user`
/// (an object whose user does not match its key — written by an older replica that did not
/// know users — is never handed out); the revision read.
async fn current(engine: &Engine, key: &str, user: Option<&str>) -> (Option<Connection>, u64) {
    engine
        .read(|state| {
            let connection = state
                .connections
                .get(key)
                .filter(|c| c.user.as_deref() == user)
                .filter(|c| {
                    state
                        .tenants
                        .get(&c.tenant)
                        .is_some_and(|t| t.uid == c.tenant_uid)
                })
                .cloned();
            (connection, state.revision)
        })
        .await
}

/// An edge that does not know a feature the credential depends on gets none (it would send
/// the tenant's token where a user's or an exchanged one belongs): during a rolling upgrade,
/// such calls fail until the edges are upgraded.
async fn refuse_older_edges(
    engine: &Engine,
    request: &pb::GetCredentialRequest,
) -> Result<(), Status> {
    let knows = |feature: &str| request.features.iter().any(|f| f == feature);
    let (personal, exchanged) = engine
        .read(|state| {
            let personal = state
                .connections_of(&request.tenant)
                .any(|c| c.provider == request.provider && c.user.is_some());
            let exchanged = state.tools.values().any(|tool| {
                tool.def.provider.as_deref() == Some(request.provider.as_str())
                    && state
                        .executors
                        .get(&tool.def.executor)
                        .is_some_and(|e| e.token_exchange.is_some())
            });
            (personal, exchanged)
        })
        .await;
    let missing = match (
        personal && !knows("user_connections"),
        exchanged && !knows("token_exchange"),
    ) {
        (true, _) => "user_connections",
        (_, true) => "token_exchange",
        _ => return Ok(()),
    };
    tracing::warn!(tenant = %request.tenant, provider = %request.provider, feature = missing, "a credential refused to an edge that predates a feature it needs; upgrade the edges");
    Err(domain(DomainError::new(
        ErrorCode::FailedPrecondition,
        format!(
            "this edge does not handle {missing}, which the credential of {}/{} needs: upgrade the edge",
            request.tenant, request.provider
        ),
    )))
}
