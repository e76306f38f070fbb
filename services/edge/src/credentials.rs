//! Tenants' provider credentials on this edge (ADR 0015). Whether a tenant connected a
//! provider comes with its registry (provider, fingerprint, expiry: no secret), so a call to
//! a provider's tool needs no question to the control plane unless the tenant connected that
//! provider. The credential itself is asked for (`GetCredential`) on the first call that needs
//! it, kept in this process's memory only — never in Redis, logs or audit — and asked again
//! when the registry names another fingerprint (once for all the calls that need it at the
//! same moment). While the control plane is unreachable, the
//! credential already held keeps serving, like the registry it came with.
//!
//! A user of the tenant may hold a connection of their own (the registry lists them, with
//! fingerprints): their calls carry that credential, kept apart from the tenant's under the
//! user's name. A caller without one uses the tenant's; with neither, the call is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tonic::Status;
use tp_proto::pb;

use crate::control::Directory;

/// Entries kept at most; past it the map is emptied (they are asked for again).
const MAX_ENTRIES: usize = 10_000;

/// The in-memory credential cache: (tenant, provider, user — empty for the tenant's) → the
/// credential and its fingerprint.
#[derive(Default)]
pub struct Credentials {
    entries: Mutex<HashMap<Key, (String, pb::ProviderCredential)>>,
    /// Questions to the control plane under way, by connection and fingerprint: calls that
    /// need the same credential wait for the one answer instead of each asking.
    pending: Mutex<HashMap<(Key, String), Arc<Question>>>,
}

/// (tenant, provider, user — empty for the tenant's).
type Key = (String, String, String);

/// One `GetCredential` under way and the answer (an error too) its waiters share.
type Question = tokio::sync::OnceCell<Result<pb::ProviderCredential, Status>>;

/// Which connection a call uses: the caller's own, or the tenant's.
#[derive(Debug, Clone, Copy)]
pub struct Chosen<'a> {
    /// The provider whose connection the call's credential comes from.
    pub provider: &'a str,
    /// The user whose connection it is; empty for the tenant's.
    pub user: &'a str,
    /// The credential's fingerprint, as the registry lists it.
    pub fingerprint: &'a str,
    /// Unix seconds; 0 = none known.
    pub expires_at: u64,
}

impl<'a> Chosen<'a> {
    /// The connection a call of `caller` (Identity.key_id) to `connected`'s provider uses:
    /// the caller's own when the registry lists one, else the tenant's; `None` when neither
    /// exists (only other users connected the provider).
    pub fn for_caller(connected: &'a pb::ConnectedProvider, caller: &'a str) -> Option<Self> {
        if let Some(own) = connected
            .users
            .iter()
            .find(|user| !caller.is_empty() && user.user == caller)
        {
            return Some(Chosen {
                provider: &connected.provider,
                user: &own.user,
                fingerprint: &own.fingerprint,
                expires_at: own.expires_at,
            });
        }
        (!connected.fingerprint.is_empty()).then_some(Chosen {
            provider: &connected.provider,
            user: "",
            fingerprint: &connected.fingerprint,
            expires_at: connected.expires_at,
        })
    }

    /// Whether the credential has expired at `now` (Unix seconds).
    pub fn expired_at(&self, now: u64) -> bool {
        self.expires_at != 0 && now >= self.expires_at
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

impl Credentials {
    /// `tenant`'s credential of the `chosen` connection (from its registry): the one held
    /// when its fingerprint is the registry's, else the control plane's answer — asked once
    /// for all the calls that need it at the same moment.
    pub async fn get(
        &self,
        directory: &dyn Directory,
        tenant: &str,
        chosen: Chosen<'_>,
    ) -> Result<pb::ProviderCredential, Status> {
        let key = (
            tenant.to_owned(),
            chosen.provider.to_owned(),
            chosen.user.to_owned(),
        );
        if let Some(credential) = self.held(&key, chosen.fingerprint) {
            return Ok(credential);
        }
        let asked = (key, chosen.fingerprint.to_owned());
        let question = Arc::clone(
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(asked.clone())
                .or_default(),
        );
        let answer = question
            .get_or_init(|| async {
                if let Some(credential) = self.held(&asked.0, chosen.fingerprint) {
                    return Ok(credential);
                }
                self.ask(directory, asked.0.clone(), chosen).await
            })
            .await
            .clone();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending
            .get(&asked)
            .is_some_and(|q| Arc::ptr_eq(q, &question))
        {
            pending.remove(&asked);
        }
        answer
    }

    /// The credential held for `key` when its fingerprint is `fingerprint`.
    fn held(&self, key: &Key, fingerprint: &str) -> Option<pb::ProviderCredential> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(held, _)| held == fingerprint)
            .map(|(_, credential)| credential.clone())
    }

    /// Asks the control plane for `key`'s credential and keeps it.
    async fn ask(
        &self,
        directory: &dyn Directory,
        key: Key,
        chosen: Chosen<'_>,
    ) -> Result<pb::ProviderCredential, Status> {
        let answer = directory
            .credential(&key.0, chosen.provider, chosen.user)
            .await?;
        // Only the connection asked for (a control plane predating users' connections would
        // answer the tenant's to a user's request).
        if answer.user != chosen.user {
            return Err(tp_proto::status::error(
                tp_registry::ErrorCode::Unavailable,
                "the control plane answered another connection's credential (an older version?)",
            ));
        }
        let credential = pb::ProviderCredential {
            provider: chosen.provider.to_owned(),
            token: answer.credential,
            expires_at: answer.expires_at,
            sealed: Vec::new(),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (answer.fingerprint, credential.clone()));
        Ok(credential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A control plane that answers every credential question after 100 ms (or refuses it),
    /// counting them.
    #[derive(Debug, Default)]
    struct Slow {
        asked: AtomicUsize,
        refuse: bool,
    }

    impl Directory for Slow {
        fn resource(&self) -> &str {
            ""
        }
        fn reachable(&self) -> bool {
            true
        }
        fn authenticate<'a>(
            &'a self,
            _key: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<pb::Identity, Status>> {
            Box::pin(async { Err(Status::unauthenticated("no")) })
        }
        fn resolve<'a>(
            &'a self,
            _tenant: &'a str,
            _role: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<pb::ResolvedRegistry, Status>> {
            Box::pin(async { Err(Status::not_found("no")) })
        }
        fn credential<'a>(
            &'a self,
            tenant: &'a str,
            provider: &'a str,
            user: &'a str,
        ) -> futures::future::BoxFuture<'a, Result<pb::Credential, Status>> {
            let n = self.asked.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                if self.refuse {
                    return Err(Status::unavailable("down"));
                }
                Ok(pb::Credential {
                    credential: format!("{tenant}/{provider}/{user}/{n}"),
                    fingerprint: "f1".into(),
                    user: user.to_owned(),
                    ..Default::default()
                })
            })
        }
    }

    fn chosen<'a>(user: &'a str) -> Chosen<'a> {
        Chosen {
            provider: "crm",
            user,
            fingerprint: "f1",
            expires_at: 0,
        }
    }

    /// Forty calls needing two connections' credentials at once ask the control plane twice,
    /// and each gets its own connection's; an error is shared and not kept.
    #[tokio::test]
    async fn calls_needing_one_credential_at_once_ask_once() {
        let credentials = Credentials::default();
        let directory = Slow::default();
        let calls = (0..40).map(|i| {
            let user = if i % 2 == 0 { "" } else { "alice" };
            credentials.get(&directory, "acme", chosen(user))
        });
        let answers = futures::future::join_all(calls).await;
        assert_eq!(directory.asked.load(Ordering::SeqCst), 2);
        for (i, answer) in answers.iter().enumerate() {
            let token = &answer.as_ref().unwrap().token;
            let user = if i % 2 == 0 { "" } else { "alice" };
            assert!(token.starts_with(&format!("acme/crm/{user}/")), "{token}");
        }
        assert!(credentials.pending.lock().unwrap().is_empty());
        // Held now: no further question.
        credentials
            .get(&directory, "acme", chosen("alice"))
            .await
            .unwrap();
        assert_eq!(directory.asked.load(Ordering::SeqCst), 2);

        let down = Slow {
            refuse: true,
            ..Slow::default()
        };
        let credentials = Credentials::default();
        let answers =
            futures::future::join_all((0..40).map(|_| credentials.get(&down, "acme", chosen(""))))
                .await;
        assert!(answers.iter().all(Result::is_err));
        assert_eq!(down.asked.load(Ordering::SeqCst), 1);
        assert!(credentials.get(&down, "acme", chosen("")).await.is_err());
        assert_eq!(down.asked.load(Ordering::SeqCst), 2);
    }
}
