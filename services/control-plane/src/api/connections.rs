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
    }
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
    let authorization = connector
        .begin(&request.tenant, &request.provider, author)
        .await
        .map_err(domain)?;
    tracing::info!(tenant = %request.tenant, provider = %request.provider, %author, "OAuth connection started");
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
    let now = now_secs();
    if request.expires_at != 0 && request.expires_at <= now {
        return Err(domain(DomainError::invalid("expires_at", "is in the past")));
    }
    let sealer = vault(sealer)?;
    let uid = engine
        .read(|state| state.tenant(&request.tenant).map(|t| t.uid.clone()))
        .await
        .map_err(domain)?;
    // Sealed outside the write: the write may run again after a conflict, and each seal draws
    // fresh keys.
    let secret = sealer
        .seal(
            &request.credential,
            &request.tenant,
            &uid,
            &request.provider,
        )
        .map_err(seal_failed)?;
    let connection = Connection {
        id: Connection::key_of(&request.tenant, &request.provider),
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
        flow: None,
    };
    engine
        .write(author, |state| Ok((state.connect(connection.clone())?, ())))
        .await
        .map_err(status)?;
    tracing::info!(
        tenant = %connection.tenant,
        provider = %connection.provider,
        fingerprint = %connection.fingerprint,
        "provider connected"
    );
    Ok(connection_pb(&connection))
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
    let written = engine
        .write(author, |state| {
            Ok((state.disconnect(&request.tenant, &request.provider)?, ()))
        })
        .await
        .map_err(status)?;
    tracing::info!(tenant = %request.tenant, provider = %request.provider, "provider disconnected");
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

/// `Registry/GetCredential`: the tenant's usable credential for `provider`, opened.
pub async fn credential(
    engine: &Engine,
    opener: Option<&Vault>,
    request: pb::GetCredentialRequest,
) -> Result<pb::Credential, Status> {
    required("tenant", &request.tenant)?;
    required("provider", &request.provider)?;
    let key = Connection::key_of(&request.tenant, &request.provider);
    let (connection, revision) = engine
        .read(|state| {
            let connection = state
                .connections
                .get(&key)
                .filter(|c| {
                    state
                        .tenants
                        .get(&c.tenant)
                        .is_some_and(|t| t.uid == c.tenant_uid)
                })
                .cloned();
            (connection, state.revision)
        })
        .await;
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
            &connection.provider,
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
    })
}
