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

    /// Records `connection`, made by the OAuth flow `connection.flow` that began at
    /// `started_at` (Unix seconds), as [`State::connect`] does; refused when that flow already
    /// connected (its callback link replayed) or a connection made after the flow began holds
    /// the provider (an older link must not replace a newer credential).
    pub fn connect_by_flow(
        &self,
        connection: Connection,
        started_at: u64,
    ) -> DomainResult<Vec<Change>> {
        let Some(flow) = connection.flow.as_deref() else {
            return Err(DomainError::new(
                ErrorCode::InvalidArgument,
                "an OAuth connection names the flow that made it",
            ));
        };
        if let Some(current) = self.connections.get(&connection.id) {
            if current.flow.as_deref() == Some(flow) {
                return Err(DomainError::new(
                    ErrorCode::FailedPrecondition,
                    "this link was already used: it connects once",
                ));
            }
            if current.created_at > started_at {
                return Err(DomainError::new(
                    ErrorCode::FailedPrecondition,
                    "the provider was connected again after this link was made: the newer connection stays",
                ));
            }
        }
        self.connect(connection)
    }

    /// Removes `tenant`'s connection to `provider` and the provider from its `connected_apis`.
    pub fn disconnect(&self, tenant: &str, provider: &str) -> DomainResult<Vec<Change>> {
        self.disconnect_user(tenant, provider, None)
    }

    /// Removes the connection of `tenant` (or of its `user`) to `provider`; the provider
    /// leaves the tenant's `connected_apis` with the last of its connections (the tenant's and
    /// its users').
    pub fn disconnect_user(
        &self,
        tenant: &str,
        provider: &str,
        user: Option<&str>,
    ) -> DomainResult<Vec<Change>> {
        let record = self.tenant(tenant)?;
        let key = Connection::key_for(tenant, provider, user);
        if !self.connections.contains_key(&key) {
            return Err(DomainError::not_found("connection", &key));
        }
        let others = self
            .connections_of(tenant)
            .any(|other| other.provider == provider && other.id != key);
        let mut changes = Vec::with_capacity(2);
        if let Some(apis) = &record.connected_apis
            && !others
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

    /// Replaces a connection's credential with a renewed one (an OAuth refresh): only the
    /// connection object changes, `connected_apis` stays. Refused when the connection is gone
    /// or no longer holds the credential the renewal started from (`was`: its fingerprint):
    /// the tenant disconnected or connected again meanwhile, and that write wins.
    pub fn refresh_connection(
        &self,
        connection: Connection,
        was: &str,
    ) -> DomainResult<Vec<Change>> {
        let current = self
            .connections
            .get(&connection.id)
            .ok_or_else(|| DomainError::not_found("connection", &connection.id))?;
        if current.fingerprint != was || current.tenant_uid != connection.tenant_uid {
            return Err(DomainError::new(
                ErrorCode::FailedPrecondition,
                format!(
                    "the connection {} changed while its credential was renewed",
                    connection.id
                ),
            ));
        }
        let mut v = Violations::default();
        connection.check_fields(&mut v);
        v.finish()?;
        Ok(vec![Change::put(Object::Connection(connection))])
    }

    /// Claims the renewal of connection `key`'s credential until `until` (Unix seconds):
    /// `true` with the claim's change when the connection still holds credential `was` and no
    /// other claim holds at `now`; `false` and no change otherwise.
    pub fn claim_renewal(
        &self,
        key: &str,
        was: &str,
        by: &str,
        now: u64,
        until: u64,
    ) -> DomainResult<(Vec<Change>, bool)> {
        let Some(current) = self.connections.get(key) else {
            return Ok((Vec::new(), false));
        };
        if current.fingerprint != was || current.renewing_until.is_some_and(|at| at > now) {
            return Ok((Vec::new(), false));
        }
        let mut claimed = current.clone();
        claimed.renewing_until = Some(until);
        claimed.renewing_by = Some(by.to_owned());
        Ok((vec![Change::put(Object::Connection(claimed))], true))
    }

    /// Releases replica `by`'s claim on the renewal of connection `key` (the renewal failed
    /// and will be retried): no change when the connection no longer holds credential `was`,
    /// holds no claim, or another replica's (the first claim lapsed and another replica
    /// claimed it since).
    pub fn release_renewal(&self, key: &str, was: &str, by: &str) -> Vec<Change> {
        match self.connections.get(key) {
            Some(current)
                if current.fingerprint == was
                    && current.renewing_until.is_some()
                    && current
                        .renewing_by
                        .as_deref()
                        .is_none_or(|holder| holder == by) =>
            {
                let mut released = current.clone();
                released.renewing_until = None;
                released.renewing_by = None;
                vec![Change::put(Object::Connection(released))]
            }
            _ => Vec::new(),
        }
    }

    /// Every connection whose credential has expired at `now` (Unix seconds) and that the
    /// control plane cannot renew (`renewable` says which providers it renews: an OAuth
    /// connection with a refresh token for a configured provider is left to the renewal,
    /// which disconnects it when the provider refuses for good).
    pub fn expired_connections(
        &self,
        now: u64,
        renewable: impl Fn(&str) -> bool,
    ) -> Vec<Connection> {
        self.connections
            .values()
            .filter(|connection| !connection.usable_at(now))
            .filter(|connection| !(connection.refreshable() && renewable(&connection.provider)))
            .cloned()
            .collect()
    }

    /// The connections whose credential is due for renewal at `now`.
    pub fn connections_due_for_refresh(&self, now: u64) -> Vec<Connection> {
        self.connections
            .values()
            .filter(|connection| connection.refresh_due_at(now))
            .cloned()
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
