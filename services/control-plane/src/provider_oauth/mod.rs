//! Connecting providers by OAuth (ADR 0015): the control plane is the OAuth client of every
//! provider configured under `[[connections.oauth]]`.
//!
//! `BeginConnect` returns the provider's authorization URL (authorization-code flow, PKCE
//! S256). Its `state` is the pending flow itself — tenant, provider, PKCE verifier, deadline
//! and author — sealed with the connections' keys and bound to the tenant's incarnation, so
//! any replica can finish it and nothing is kept while the user decides. The provider sends
//! the browser back to the callback listener ([`callback`]), which exchanges the code, seals
//! the tokens and connects the provider in one write, as `ConnectProvider` does.
//!
//! [`run`] renews access tokens before they expire (see [`Connection::refresh_due_at`]). A
//! replica first claims the renewal in a write of its own (`renewing_until`), so two replicas
//! never spend one refresh token twice (a provider that rotates refresh tokens may revoke
//! the whole grant when one is replayed); the claim names the replica, and only it releases
//! the claim. A renewed credential that the store fails to take is written again a few times
//! (the provider may have retired the refresh token just spent). A provider that answers
//! `invalid_grant` twice in a row has revoked the grant: the connection is disconnected under
//! `system:connection-refresh-failed` and its tools vanish. Any other failure is retried with
//! back-off (doubling from the check period, at most five minutes); calls are refused once the
//! access token has expired.
//!
//! Each flow's `state` carries a nonce that the connection it makes records, and the time it
//! began: its link connects once, and never replaces a connection made after it began.

pub mod callback;
pub mod config;
mod error;
mod token;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use tp_registry::{Connection, ConnectionKind, DomainError, ErrorCode, Sealed};

pub use config::{OAuthConnections, OAuthProvider, RawConnections, TokenAuth};
pub use error::CallbackError;
use token::{TokenAnswer, TokenError};

use crate::engine::{Engine, EngineError, now_secs};
use crate::vault::{MAX_CREDENTIAL, Vault, fingerprint};

/// How long the token endpoint may take to answer (a renewal or a code exchange).
const TOKEN_REQUEST_SECS: u64 = 10;

/// How long a replica's claim on a renewal holds. The renewal must be over before it lapses:
/// once it has, another replica may claim the connection and spend the same refresh token a
/// second time, which a provider that rotates refresh tokens answers by refusing both (or by
/// revoking the grant). So the token request starts only with [`RENEWAL_NEEDS_SECS`] of the
/// claim left, and a failed store write is tried again only while the next try can end before
/// the claim lapses ([`may_try_again`]).
const CLAIM_SECS: u64 = 120;

/// The claim a renewal needs left before the token request starts: the request itself, then
/// one store write.
const RENEWAL_NEEDS_SECS: u64 = TOKEN_REQUEST_SECS + STORE_WRITE_SECS;

/// What one store write is taken to last at most (PostgreSQL's pool waits 10 s for a
/// connection before it fails).
const STORE_WRITE_SECS: u64 = 15;

/// Tries at storing a renewed credential (the provider may already have retired the refresh
/// token just spent).
const RECORD_TRIES: u32 = 4;

const _: () = assert!(CLAIM_SECS > RENEWAL_NEEDS_SECS + 3 * STORE_WRITE_SECS);

/// The author of disconnections after the provider revoked the grant.
pub const REFRESH_FAILED: &str = "system:connection-refresh-failed";

/// Renewals in flight at once.
const RENEWALS_AT_ONCE: usize = 8;

/// Longest wait between renewals of one connection that keep failing.
const MAX_BACKOFF_SECS: u64 = 300;

/// The control plane as providers' OAuth client.
#[derive(Debug)]
pub struct Connector {
    config: OAuthConnections,
    vault: Vault,
    engine: Arc<Engine>,
    http: reqwest::Client,
    /// Connections whose renewal failed: (failures in a row, Unix seconds of the next try).
    backoff: std::sync::Mutex<std::collections::HashMap<String, (u32, u64)>>,
    /// Connections whose last renewal the provider refused with `invalid_grant` (a second
    /// refusal in a row disconnects).
    refused: std::sync::Mutex<std::collections::HashSet<String>>,
    /// This replica's name in renewal claims.
    replica: String,
}

/// What `BeginConnect` hands out.
#[derive(Debug)]
pub struct Authorization {
    /// The provider's authorization URL.
    pub url: String,
    /// Unix seconds after which the callback refuses it.
    pub expires_at: u64,
}

/// The flow while the user decides, sealed into `state`.
#[derive(Serialize, Deserialize)]
struct Pending {
    verifier: String,
    expires_at: u64,
    author: String,
    /// Names the flow: the connection it makes records it, so the link connects once.
    nonce: String,
    /// Unix seconds the flow began: a connection made after it is never replaced by it.
    started_at: u64,
}

/// What a renewal keeps from the credential it replaces when the provider's answer does not
/// say: the refresh token (resealed under the current key) and the token's lifetime.
#[derive(Clone, Copy)]
struct Kept<'a> {
    refresh_token: &'a str,
    lifetime: Option<u64>,
}

/// The `state` parameter: the tenant and provider in clear (they name the binding), the rest
/// sealed.
#[derive(Serialize, Deserialize)]
struct StateParam {
    t: String,
    p: String,
    /// The user connecting (absent: the tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    u: Option<String>,
    s: Sealed,
}

/// The refresh token's binding (`binding`: the connection's, [`Connection::binding`]): a
/// sealed refresh token never opens as an access credential.
fn refresh_binding(binding: &str) -> String {
    format!("{binding}\0refresh")
}

/// The pending flow's binding.
fn state_binding(binding: &str) -> String {
    format!("{binding}\0oauth-state")
}

impl Connector {
    /// A connector for `config`'s providers, sealing with `vault`.
    pub fn new(
        config: OAuthConnections,
        vault: Vault,
        engine: Arc<Engine>,
    ) -> anyhow::Result<Arc<Self>> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(TOKEN_REQUEST_SECS))
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Arc::new(Self {
            config,
            vault,
            engine,
            http,
            backoff: std::sync::Mutex::default(),
            refused: std::sync::Mutex::default(),
            replica: format!("cp-{}", hex::encode(rand::random::<[u8; 6]>())),
        }))
    }

    /// The validated settings.
    pub fn config(&self) -> &OAuthConnections {
        &self.config
    }

    /// Whether `provider` is connected by OAuth here (its tokens are renewed).
    pub fn renews(&self, provider: &str) -> bool {
        self.config.providers.contains_key(provider)
    }

    fn provider(&self, provider: &str) -> Result<&OAuthProvider, DomainError> {
        self.config.providers.get(provider).ok_or_else(|| {
            DomainError::new(
                ErrorCode::FailedPrecondition,
                format!(
                    "provider {provider:?} is not configured for OAuth: add a [[connections.oauth]] section for it, or connect it with an API credential (ConnectProvider)"
                ),
            )
        })
    }

    /// `BeginConnect`: the authorization URL for `tenant` (or its `user`) to connect
    /// `provider`.
    pub async fn begin(
        &self,
        tenant: &str,
        provider: &str,
        user: Option<&str>,
        author: &str,
    ) -> Result<Authorization, DomainError> {
        let settings = self.provider(provider)?;
        let uid = self
            .engine
            .read(|state| {
                if !state.providers.contains_key(provider) {
                    return Err(DomainError::not_found("provider", provider));
                }
                state.tenant(tenant).map(|t| t.uid.clone())
            })
            .await?;
        let verifier = B64URL.encode(rand::random::<[u8; 32]>());
        let challenge = B64URL.encode(Sha256::digest(verifier.as_bytes()));
        let started_at = now_secs();
        let expires_at = started_at + self.config.authorization_ttl.as_secs();
        let pending = Pending {
            verifier,
            expires_at,
            author: author.to_owned(),
            nonce: B64URL.encode(rand::random::<[u8; 16]>()),
            started_at,
        };
        let state = self.seal_state(tenant, &uid, provider, user, &pending)?;
        let url = self.authorization_url(settings, &state, &challenge);
        Ok(Authorization { url, expires_at })
    }

    /// The `state` parameter of a flow: `pending` sealed for (tenant, uid, provider).
    fn seal_state(
        &self,
        tenant: &str,
        uid: &str,
        provider: &str,
        user: Option<&str>,
        pending: &Pending,
    ) -> Result<String, DomainError> {
        let sealed = serde_json::to_string(pending)
            .map_err(anyhow::Error::from)
            .and_then(|json| {
                self.vault.seal(
                    &json,
                    tenant,
                    uid,
                    &state_binding(&Connection::binding_of(provider, user)),
                )
            })
            .map_err(|error| {
                tracing::error!(%error, "sealing an OAuth state failed");
                DomainError::new(ErrorCode::Internal, "the flow could not be sealed")
            })?;
        let param = StateParam {
            t: tenant.to_owned(),
            p: provider.to_owned(),
            u: user.map(str::to_owned),
            s: sealed,
        };
        Ok(B64URL.encode(serde_json::to_vec(&param).unwrap_or_default()))
    }

    /// The provider's authorization URL for one flow.
    fn authorization_url(&self, settings: &OAuthProvider, state: &str, challenge: &str) -> String {
        let mut url = settings.authorization_endpoint.clone();
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &settings.client_id)
                .append_pair("redirect_uri", &self.config.redirect_uri)
                .append_pair("state", state)
                .append_pair("code_challenge", challenge)
                .append_pair("code_challenge_method", "S256");
            if !settings.scopes.is_empty() {
                query.append_pair("scope", &settings.scopes.join(" "));
            }
            if let Some(resource) = &settings.resource {
                query.append_pair("resource", resource);
            }
            for (name, value) in &settings.authorization_params {
                query.append_pair(name, value);
            }
        }
        url.into()
    }

    /// The callback: `state` opened, `code` exchanged, the provider connected.
    pub async fn complete(&self, code: &str, state: &str) -> Result<Connection, CallbackError> {
        let (param, uid, pending) = self.open_state(state).await?;
        let settings = self
            .provider(&param.p)
            .map_err(|e| CallbackError::bad(e.message))?;
        // A link that already connected is refused before the code is spent (the write in
        // `record` refuses it again, for two callbacks racing).
        self.refuse_used(
            &Connection::key_for(&param.t, &param.p, param.u.as_deref()),
            &pending.nonce,
        )
        .await?;
        let mut form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code.to_owned()),
            ("redirect_uri", self.config.redirect_uri.clone()),
            ("code_verifier", pending.verifier.clone()),
        ];
        if let Some(resource) = &settings.resource {
            form.push(("resource", resource.clone()));
        }
        let answer = token::request(&self.http, settings, form).await.map_err(|error| {
            tracing::warn!(tenant = %param.t, provider = %param.p, %error, "an OAuth code exchange failed");
            CallbackError::provider(exchange_failed(&error))
        })?;
        let now = now_secs();
        let connection = self
            .connection(
                &param.t,
                &uid,
                &param.p,
                param.u.as_deref(),
                settings,
                answer,
                None,
                now,
            )
            .map_err(CallbackError::provider)?;
        let started_at = pending.started_at;
        let connection = Connection {
            created_at: now,
            created_by: pending.author,
            flow: Some(pending.nonce),
            ..connection
        };
        self.record(&connection, started_at).await?;
        tracing::info!(
            tenant = %connection.tenant,
            provider = %connection.provider,
            fingerprint = %connection.fingerprint,
            expires_at = connection.expires_at.unwrap_or(0),
            refreshable = connection.refreshable(),
            "provider connected by OAuth"
        );
        Ok(connection)
    }

    /// Refuses a flow (`nonce`) that already made connection `key`.
    async fn refuse_used(&self, key: &str, nonce: &str) -> Result<(), CallbackError> {
        let used = self
            .engine
            .read(|state| {
                state
                    .connections
                    .get(key)
                    .is_some_and(|current| current.flow.as_deref() == Some(nonce))
            })
            .await;
        if used {
            tracing::warn!(connection = %key, "an OAuth callback link was used again; refused");
            return Err(CallbackError::bad(
                "this link was already used: it connects once",
            ));
        }
        Ok(())
    }

    /// Writes the connection a flow begun at `started_at` made.
    async fn record(&self, connection: &Connection, started_at: u64) -> Result<(), CallbackError> {
        self.engine
            .write(&connection.created_by, |state| {
                Ok((state.connect_by_flow(connection.clone(), started_at)?, ()))
            })
            .await
            .map(|_| ())
            .map_err(|error| match error {
                EngineError::Domain(refused) if refused.code == ErrorCode::FailedPrecondition => {
                    tracing::warn!(connection = %connection.id, reason = %refused.message, "an OAuth callback was refused");
                    CallbackError::bad(refused.message)
                }
                error => {
                    tracing::error!(connection = %connection.id, %error, "recording an OAuth connection failed");
                    CallbackError::store(
                        "the connection could not be recorded: start again in a moment",
                    )
                }
            })
    }

    /// The flow a callback's `state` holds, if it is one of ours, for a tenant that still
    /// exists, and not past its deadline; with the tenant's incarnation.
    async fn open_state(
        &self,
        state: &str,
    ) -> Result<(StateParam, String, Pending), CallbackError> {
        let param: StateParam = B64URL
            .decode(state)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| CallbackError::bad("this is not a link Toolplane made (bad state)"))?;
        // One answer for every link that does not open (unknown tenant, a past incarnation,
        // tampered with, another deployment's keys): the page tells nobody which tenants exist.
        let invalid = || {
            CallbackError::bad(
                "this link is not valid here (altered, or made for something that no longer exists): start again with `toolplanectl connections connect`",
            )
        };
        let Ok(uid) = self
            .engine
            .read(|state| state.tenant(&param.t).map(|t| t.uid.clone()))
            .await
        else {
            tracing::info!(tenant = %param.t, "an OAuth callback named a tenant that does not exist");
            return Err(invalid());
        };
        let Some(pending) = self
            .vault
            .open(
                &param.s,
                &param.t,
                &uid,
                &state_binding(&Connection::binding_of(&param.p, param.u.as_deref())),
            )
            .ok()
            .and_then(|json| serde_json::from_str::<Pending>(&json).ok())
        else {
            tracing::info!(tenant = %param.t, provider = %param.p, "an OAuth callback's state does not open (tampered with, another incarnation of the tenant, or keys no longer in force)");
            return Err(invalid());
        };
        if now_secs() >= pending.expires_at {
            return Err(CallbackError::bad(
                "this link has expired: start again with `toolplanectl connections connect`",
            ));
        }
        Ok((param, uid, pending))
    }

    /// A connection holding `answer`'s tokens (sealed); when renewing, what the answer does
    /// not say is `kept` from the credential it replaces (every token is sealed again, under
    /// the key in force).
    #[allow(clippy::too_many_arguments)]
    fn connection(
        &self,
        tenant: &str,
        uid: &str,
        provider: &str,
        user: Option<&str>,
        settings: &OAuthProvider,
        answer: TokenAnswer,
        kept: Option<Kept<'_>>,
        now: u64,
    ) -> Result<Connection, String> {
        answer.check()?;
        let access = &answer.access_token;
        let seal_failed = |error: anyhow::Error| {
            tracing::error!(%error, "sealing a token failed");
            "the tokens could not be sealed".to_owned()
        };
        let binding = Connection::binding_of(provider, user);
        let secret = self
            .vault
            .seal(access, tenant, uid, &binding)
            .map_err(seal_failed)?;
        let refresh = answer
            .refresh_token
            .as_deref()
            .filter(|token| !token.is_empty())
            .or(kept.map(|kept| kept.refresh_token))
            .filter(|token| token.len() <= MAX_CREDENTIAL)
            .map(|token| {
                self.vault
                    .seal(token, tenant, uid, &refresh_binding(&binding))
                    .map_err(seal_failed)
            })
            .transpose()?;
        let lifetime = answer.expires_in.or(kept.and_then(|kept| kept.lifetime));
        let scopes = match answer.scope.as_deref() {
            Some(granted) => granted.split_whitespace().map(str::to_owned).collect(),
            None => settings.scopes.clone(),
        };
        Ok(Connection {
            id: Connection::key_for(tenant, provider, user),
            tenant: tenant.to_owned(),
            provider: provider.to_owned(),
            tenant_uid: uid.to_owned(),
            kind: ConnectionKind::OAuth,
            secret,
            fingerprint: fingerprint(access),
            created_at: now,
            created_by: String::new(),
            expires_at: lifetime.map(|secs| now.saturating_add(secs)),
            refresh,
            scopes,
            issued_at: Some(now),
            renewing_until: None,
            renewing_by: None,
            user: user.map(str::to_owned),
            flow: None,
        })
    }

    /// Renews every access token due; returns how many were renewed. Once `stopped` says so,
    /// no further renewal starts; those under way finish (a provider that rotated a refresh
    /// token has to see the new one stored, or the connection is lost).
    pub async fn refresh_due(&self, stopped: impl Fn() -> bool) -> usize {
        use futures::StreamExt as _;
        let now = now_secs();
        let due = self
            .engine
            .read(|state| state.connections_due_for_refresh(now))
            .await;
        let due = due.into_iter().filter(|connection| {
            self.renews(&connection.provider)
                && connection.renewing_until.is_none_or(|until| until <= now)
                && self
                    .backoff()
                    .get(&connection.id)
                    .is_none_or(|&(_, next)| next <= now)
        });
        // A few at a time: one slow provider (10 s per request at most) does not hold back
        // every other renewal, and no provider gets a burst.
        futures::stream::iter(due)
            .take_while(|_| std::future::ready(!stopped()))
            .map(|connection| self.renew_one(connection))
            .buffer_unordered(RENEWALS_AT_ONCE)
            .filter(|renewed| std::future::ready(*renewed))
            .count()
            .await
    }

    /// Renews one connection; whether it was renewed. A failure is backed off and the claim
    /// released.
    async fn renew_one(&self, connection: Connection) -> bool {
        let key = connection.id.clone();
        let was = connection.fingerprint.clone();
        match self.refresh(connection).await {
            Ok(renewed) => {
                if renewed {
                    self.backoff().remove(&key);
                }
                renewed
            }
            Err(error) => {
                let wait = self.failed(&key, now_secs());
                tracing::warn!(connection = %key, %error, retry_in_secs = wait, "renewing a connection's token failed; will retry");
                let released = self
                    .engine
                    .write("system:connection-refresh", |state| {
                        Ok((state.release_renewal(&key, &was, &self.replica), ()))
                    })
                    .await;
                if let Err(error) = released {
                    tracing::warn!(connection = %key, %error, "releasing a renewal's claim failed; it lapses by itself");
                }
                false
            }
        }
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (u32, u64)>> {
        self.backoff.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a failed renewal of `key`; the seconds until the next try (doubling from the
    /// check period, at most [`MAX_BACKOFF_SECS`]).
    fn failed(&self, key: &str, now: u64) -> u64 {
        let mut backoff = self.backoff();
        let entry = backoff.entry(key.to_owned()).or_insert((0, now));
        entry.0 = entry.0.saturating_add(1);
        let wait = self
            .config
            .refresh_check
            .as_secs()
            .max(1)
            .saturating_mul(1 << entry.0.min(16))
            .min(MAX_BACKOFF_SECS);
        entry.1 = now + wait;
        wait
    }

    /// Claims, renews and records one connection's token; `Ok(false)` when another replica
    /// or a write of the tenant got there first.
    async fn refresh(&self, connection: Connection) -> anyhow::Result<bool> {
        let key = connection.id.clone();
        let was = connection.fingerprint.clone();
        let now = now_secs();
        let until = now + CLAIM_SECS;
        let claimed = self
            .engine
            .write("system:connection-refresh", |state| {
                state.claim_renewal(&key, &was, &self.replica, now, until)
            })
            .await?;
        if !claimed.value {
            return Ok(false);
        }
        if now_secs() + RENEWAL_NEEDS_SECS >= until {
            anyhow::bail!(
                "{key}: claiming the renewal took the store {} s; the token is not spent with too little of the claim left",
                now_secs().saturating_sub(now)
            );
        }
        let settings = self.provider(&connection.provider)?;
        let (refresh_token, answer) = self.spend_refresh_token(&connection, settings).await?;
        let Some(answer) = self.judge(&connection, answer).await? else {
            return Ok(false);
        };
        let now = now_secs();
        let kept = Kept {
            refresh_token: &refresh_token,
            lifetime: connection
                .expires_at
                .map(|at| at.saturating_sub(connection.issued_at.unwrap_or(connection.created_at))),
        };
        let renewed = self
            .connection(
                &connection.tenant,
                &connection.tenant_uid,
                &connection.provider,
                connection.user.as_deref(),
                settings,
                answer,
                Some(kept),
                now,
            )
            .map_err(|why| anyhow::anyhow!("{key}: {why}"))?;
        let renewed = Connection {
            created_at: connection.created_at,
            created_by: connection.created_by.clone(),
            flow: connection.flow.clone(),
            ..renewed
        };
        let written = self.record_renewal(&renewed, &was, until).await?;
        tracing::info!(
            connection = %key,
            fingerprint = %renewed.fingerprint,
            expires_at = renewed.expires_at.unwrap_or(0),
            revision = written.revision,
            "connection's access token renewed"
        );
        Ok(true)
    }

    /// The token endpoint's answer to a renewal of `connection`: the tokens, `None` when the
    /// provider revoked the grant (refused twice in a row: the connection is removed), or the
    /// failure to retry.
    async fn judge(
        &self,
        connection: &Connection,
        answer: Result<TokenAnswer, TokenError>,
    ) -> anyhow::Result<Option<TokenAnswer>> {
        let key = &connection.id;
        // Per credential: a refusal of an older credential (before a reconnection, or seen by
        // this replica before another renewed it) does not count towards this one's.
        let strike = format!("{key}\0{}", connection.fingerprint);
        match answer {
            Ok(answer) => {
                self.refused().remove(&strike);
                Ok(Some(answer))
            }
            // One refusal may be the provider's hiccup; a second in a row is a revoked grant.
            Err(TokenError::Refused { error, description }) if error == "invalid_grant" => {
                if self.refused().insert(strike.clone()) {
                    anyhow::bail!(
                        "{key}: the provider refused the refresh token once (invalid_grant: {description}); a second refusal disconnects"
                    );
                }
                self.refused().remove(&strike);
                self.disconnect_revoked(connection, &description).await?;
                Ok(None)
            }
            Err(error) => anyhow::bail!("{key}: {error}"),
        }
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.refused.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes a renewed credential. The provider may already have retired the refresh token
    /// just spent, so a failing store is tried again ([`RECORD_TRIES`] times, 1, 2, 4 s apart)
    /// while the claim, which lapses at `until`, still covers the next try; then the new tokens
    /// are given up. A connection changed meanwhile is not tried again (that write wins).
    async fn record_renewal(
        &self,
        renewed: &Connection,
        was: &str,
        until: u64,
    ) -> anyhow::Result<crate::engine::Written<()>> {
        let mut wait = Duration::from_secs(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .engine
                .write("system:connection-refresh", |state| {
                    Ok((state.refresh_connection(renewed.clone(), was)?, ()))
                })
                .await
            {
                Ok(written) => return Ok(written),
                Err(EngineError::Store(error))
                    if may_try_again(attempt, wait.as_secs(), now_secs(), until) =>
                {
                    tracing::warn!(connection = %renewed.id, %error, attempt, "storing a renewed token failed; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Err(error) => {
                    tracing::error!(connection = %renewed.id, %error, "a renewed token could not be stored; if the provider rotates refresh tokens the tenant must connect again");
                    return Err(error.into());
                }
            }
        }
    }

    /// The refresh token of `connection`, opened, and the token endpoint's answer to it (the
    /// outer error: the token could not be opened).
    async fn spend_refresh_token(
        &self,
        connection: &Connection,
        settings: &OAuthProvider,
    ) -> anyhow::Result<(String, Result<TokenAnswer, TokenError>)> {
        let Some(sealed) = &connection.refresh else {
            anyhow::bail!("{}: no refresh token", connection.id);
        };
        let refresh_token = self.vault.open(
            sealed,
            &connection.tenant,
            &connection.tenant_uid,
            &refresh_binding(&connection.binding()),
        )?;
        let mut form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh_token.clone()),
        ];
        if let Some(resource) = &settings.resource {
            form.push(("resource", resource.clone()));
        }
        Ok((
            refresh_token,
            token::request(&self.http, settings, form).await,
        ))
    }

    /// The provider revoked the grant: the connection goes (unless it changed meanwhile).
    async fn disconnect_revoked(
        &self,
        connection: &Connection,
        description: &str,
    ) -> anyhow::Result<()> {
        let key = connection.id.clone();
        let written = self
            .engine
            .write(REFRESH_FAILED, |state| {
                if state
                    .connections
                    .get(&key)
                    .is_none_or(|current| current.fingerprint != connection.fingerprint)
                {
                    return Ok((Vec::new(), false));
                }
                Ok((
                    state.disconnect_user(
                        &connection.tenant,
                        &connection.provider,
                        connection.user.as_deref(),
                    )?,
                    true,
                ))
            })
            .await?;
        if written.value {
            tracing::warn!(
                connection = %key,
                reason = %description,
                revision = written.revision,
                "connection disconnected: the provider refused to renew its token (invalid_grant); the tenant must connect again"
            );
        }
        Ok(())
    }
}

/// Whether a renewal's store write that failed at `now` (try `attempt`) is tried again after
/// `wait_secs`: fewer than [`RECORD_TRIES`] so far, and the next try ends (a write takes
/// [`STORE_WRITE_SECS`] at most) before the claim lapses at `until`.
fn may_try_again(attempt: u32, wait_secs: u64, now: u64, until: u64) -> bool {
    attempt < RECORD_TRIES && now + wait_secs + STORE_WRITE_SECS < until
}

/// What the person at the browser is told of a failed code exchange: the OAuth error code,
/// never the provider's words (the log has them).
fn exchange_failed(error: &TokenError) -> String {
    match error {
        TokenError::Refused { error, .. } if callback::is_error_code(error) => {
            format!("the provider refused to give tokens ({error}): start again")
        }
        _ => "the provider did not give tokens: start again in a moment".to_owned(),
    }
}

/// Renews tokens every `connector.config().refresh_check` until `stopping`. A stop in the middle
/// of a round starts no further renewal and returns when those under way are done (the server
/// waits for that, [`RENEWALS_DRAIN`] at most).
pub async fn run(connector: Arc<Connector>, mut stopping: tokio::sync::watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(connector.config.refresh_check);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
        let watching = stopping.clone();
        connector.refresh_due(|| *watching.borrow()).await;
    }
}

/// How long a stopping control plane waits for renewals under way (each request to a provider
/// takes 10 s at most; a stored result is retried for about 15 s).
pub const RENEWALS_DRAIN: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    /// The slowest renewal the rules allow: the claim's write takes all but
    /// [`RENEWAL_NEEDS_SECS`] of the claim, the token endpoint its whole timeout, and every
    /// store write [`STORE_WRITE_SECS`] before failing. Its last write still ends before the
    /// claim lapses, and a renewal that starts early gets all its tries.
    #[test]
    fn a_renewal_ends_before_its_claim_lapses() {
        let until = 1_000 + CLAIM_SECS;
        for claimed_at in [1_000, 1_030, until - RENEWAL_NEEDS_SECS - 1] {
            let mut now = claimed_at + TOKEN_REQUEST_SECS;
            let (mut attempt, mut wait) = (0, 1);
            loop {
                attempt += 1;
                now += STORE_WRITE_SECS;
                assert!(
                    now <= until,
                    "a write ending at {now}, claim lapses at {until}"
                );
                if !may_try_again(attempt, wait, now, until) {
                    break;
                }
                now += wait;
                wait *= 2;
            }
            if claimed_at == 1_000 {
                assert_eq!(attempt, RECORD_TRIES, "an early renewal gets every try");
            }
        }
        assert!(may_try_again(1, 1, 1_000, 1_000 + CLAIM_SECS));
        assert!(!may_try_again(RECORD_TRIES, 1, 1_000, 1_000 + CLAIM_SECS));
        assert!(!may_try_again(1, 1, until - STORE_WRITE_SECS - 1, until));
    }
}
