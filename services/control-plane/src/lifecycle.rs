//! Tools whose sunset date has passed are retired by the control plane itself: a tool
//! deprecated "until" a date is removed the day after, without an operator remembering to.
//!
//! Every replica runs the check (at start, then every `lifecycle.sunset_check_secs`); the
//! engine's optimistic write makes it happen once: a replica that lost the race finds the tool
//! already retired and writes nothing. The retirement is one change per tool, announced to the
//! edges through the change stream like any other, and recorded under the author
//! `system:sunset` (`toolplanectl changes` shows it).
//!
//! The same check disconnects connections whose credential has expired (ADR 0015), one write
//! each under `system:connection-expired`: the provider leaves the tenant's `connected_apis`,
//! so its tools vanish from the tenant's registries and clients are told the list changed.
//! From the moment of expiry until then, edges refuse the tenant's calls to the provider's
//! tools (the control plane will not hand out an expired credential).

use std::sync::Arc;
use std::time::Duration;

use tp_registry::state::Change;

use crate::engine::Engine;

/// Retires the tools whose sunset is before today; returns how many.
pub async fn retire_due(engine: &Engine) -> anyhow::Result<usize> {
    let today = crate::engine::today();
    let written = engine
        .write("system:sunset", |state| {
            let changes = state.retire_sunsets(&today);
            let names = Change::tools_put(&changes);
            Ok((changes, names))
        })
        .await?;
    for name in &written.value {
        tracing::info!(tool = %name, revision = written.revision, "tool retired: its sunset date has passed");
    }
    Ok(written.value.len())
}

/// Disconnects the connections whose credential has expired and that cannot be renewed
/// (OAuth connections of `renewed` providers are left to the renewal); returns how many.
pub async fn disconnect_expired(
    engine: &Engine,
    renewed: &std::collections::BTreeSet<String>,
) -> anyhow::Result<usize> {
    let now = crate::engine::now_secs();
    let expired = engine
        .read(|state| state.expired_connections(now, |provider| renewed.contains(provider)))
        .await;
    let mut disconnected = 0;
    for expired in expired {
        let (key, tenant, provider) = (&expired.id, &expired.tenant, &expired.provider);
        let written = engine
            .write("system:connection-expired", |state| {
                // Another replica may have got there first, or the tenant may have connected
                // again since the list was read: only a connection still expired goes.
                if state.connections.get(key).is_none_or(|connection| {
                    connection.usable_at(now)
                        || (connection.refreshable() && renewed.contains(&connection.provider))
                }) {
                    return Ok((Vec::new(), false));
                }
                Ok((
                    state.disconnect_user(tenant, provider, expired.user.as_deref())?,
                    true,
                ))
            })
            .await?;
        if written.value {
            disconnected += 1;
            tracing::info!(%tenant, %provider, user = expired.user.as_deref().unwrap_or(""), revision = written.revision, "connection disconnected: its credential expired");
        }
    }
    Ok(disconnected)
}

/// Checks every `every` until `stopping`.
pub async fn run(
    engine: Arc<Engine>,
    every: Duration,
    renewed: std::collections::BTreeSet<String>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        if let Err(error) = retire_due(&engine).await {
            tracing::warn!(%error, "retiring tools past their sunset failed; will retry");
        }
        if let Err(error) = disconnect_expired(&engine, &renewed).await {
            tracing::warn!(%error, "disconnecting expired connections failed; will retry");
        }
    }
}

#[cfg(test)]
mod tests {
    use tp_registry::{Connection, ConnectionKind, Sealed};
    use tp_store::SqliteStore;

    use super::*;

    fn connection(uid: &str, provider: &str, expires_at: Option<u64>) -> Connection {
        Connection {
            id: Connection::key_of("initech", provider),
            tenant: "initech".into(),
            provider: provider.into(),
            tenant_uid: uid.into(),
            kind: ConnectionKind::ApiCredential,
            secret: Sealed {
                kek_id: "k".into(),
                wrapped_key: "w".into(),
                ciphertext: "c".into(),
            },
            fingerprint: "0123456789ab".into(),
            created_at: 1,
            created_by: "admin".into(),
            expires_at,
            refresh: None,
            scopes: Vec::new(),
            issued_at: None,
            renewing_until: None,
            renewing_by: None,
            user: None,
            flow: None,
        }
    }

    #[tokio::test]
    async fn an_expired_connection_is_disconnected_once_in_a_write_of_its_own() {
        let engine = Engine::open(Arc::new(SqliteStore::in_memory().await.unwrap()))
            .await
            .unwrap();
        engine
            .seed(&tp_registry::demo::DemoWorld::load())
            .await
            .unwrap();
        let uid = engine.read(|s| s.tenants["initech"].uid.clone()).await;
        let now = crate::engine::now_secs();
        for (provider, expires_at) in [("aws", Some(now - 1)), ("google", Some(now + 3600))] {
            let connection = connection(&uid, provider, expires_at);
            engine
                .write("admin", |s| Ok((s.connect(connection.clone())?, ())))
                .await
                .unwrap();
        }
        let before = engine.revision().await;
        assert_eq!(
            disconnect_expired(&engine, &Default::default())
                .await
                .unwrap(),
            1
        );
        assert_eq!(engine.revision().await, before + 1, "one write");
        let (apis, left) = engine
            .read(|s| {
                (
                    s.tenants["initech"].connected_apis.clone(),
                    s.connections.keys().cloned().collect::<Vec<_>>(),
                )
            })
            .await;
        assert_eq!(apis, Some(vec!["google".to_owned()]));
        assert_eq!(left, vec!["initech/google".to_owned()]);
        // Nothing more to do: no write.
        assert_eq!(
            disconnect_expired(&engine, &Default::default())
                .await
                .unwrap(),
            0
        );
        assert_eq!(engine.revision().await, before + 1);
    }
}
