//! Connecting and disconnecting a tenant's providers (issue 35, ADR 0015).
//!
//! `connected_apis` follows connections: connecting adds the provider to a tenant's list and
//! disconnecting removes it, in the same write as the connection itself (one revision, one
//! change record). A tenant whose `connected_apis` is unset (every tool) keeps it unset:
//! connecting narrows nothing.

use super::*;
use crate::connection::Connection;

impl State {
    /// Records `connection` (its secret already sealed by the caller) and adds its provider to
    /// the tenant's `connected_apis`. A connection of the same tenant and provider is replaced
    /// (a new credential).
    pub fn connect(&self, connection: Connection) -> DomainResult<Vec<Change>> {
        let tenant = self.tenant(&connection.tenant)?;
        let mut v = Violations::default();
        connection.check_fields(&mut v);
        if !self.providers.contains_key(&connection.provider) {
            v.add(
                "connection.provider",
                format!(
                    "unknown provider {:?}: register it first",
                    connection.provider
                ),
            );
        }
        if connection.tenant_uid != tenant.uid {
            v.add(
                "connection.tenant_uid",
                "must be the tenant's current incarnation",
            );
        }
        v.finish()?;
        let mut changes = Vec::with_capacity(2);
        if let Some(apis) = &tenant.connected_apis
            && !apis.contains(&connection.provider)
        {
            let mut tenant = tenant.clone();
            let apis = tenant.connected_apis.get_or_insert_with(Vec::new);
            apis.push(connection.provider.clone());
            apis.sort();
            changes.extend(self.update_tenant(tenant)?);
        }
        changes.push(Change::put(Object::Connection(connection)));
        Ok(changes)
    }

    /// Removes `tenant`'s connection to `provider` and the provider from its `connected_apis`.
    pub fn disconnect(&self, tenant: &str, provider: &str) -> DomainResult<Vec<Change>> {
        let record = self.tenant(tenant)?;
        let key = Connection::key_of(tenant, provider);
        if !self.connections.contains_key(&key) {
            return Err(DomainError::not_found("connection", &key));
        }
        let mut changes = Vec::with_capacity(2);
        if let Some(apis) = &record.connected_apis
            && apis.iter().any(|api| api == provider)
        {
            let mut record = record.clone();
            if let Some(apis) = record.connected_apis.as_mut() {
                apis.retain(|api| api != provider);
            }
            changes.extend(self.update_tenant(record)?);
        }
        changes.push(Change::Delete {
            kind: ObjectKind::Connection,
            key,
        });
        Ok(changes)
    }

    /// The (tenant, provider) of every connection whose credential has expired at `now` (Unix
    /// seconds).
    pub fn expired_connections(&self, now: u64) -> Vec<(String, String)> {
        self.connections
            .values()
            .filter(|connection| !connection.usable_at(now))
            .map(|connection| (connection.tenant.clone(), connection.provider.clone()))
            .collect()
    }

    /// `tenant`'s connections, by provider.
    pub fn connections_of(&self, tenant: &str) -> impl Iterator<Item = &Connection> {
        let prefix = format!("{tenant}/");
        self.connections
            .range(prefix.clone()..)
            .take_while(move |(key, _)| key.starts_with(&prefix))
            .map(|(_, connection)| connection)
    }
}
