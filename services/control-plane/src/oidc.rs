//! OAuth access tokens (JWTs) presented to edges by MCP clients: verified against the signing
//! keys of the issuers tenants trust, then mapped to (tenant, role) by the tenant's settings
//! (`tp_registry::tokens`).
//!
//! - Only issuers some tenant trusts are ever contacted: a token's `iss` picks among them and
//!   never makes the control plane fetch an address a caller chose.
//! - Asymmetric algorithms only (RS*, PS*, ES*, EdDSA); `none` and HMAC never verify, and the
//!   key must be of the algorithm's family.
//! - `exp` and `aud` are required, `nbf` is honoured (30 s leeway); the audience is the
//!   tenant's configured one or else the edge's resource URL (RFC 8707), so a token minted for
//!   another service is refused.
//! - Key sets are cached 10 minutes; an unknown `kid` (the provider rotated) refetches at most
//!   once per 30 s per key set, so random `kid`s cannot make the control plane hammer a
//!   provider. Metadata and key-set responses are bounded (1 MiB, 5 s, no redirects).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tp_registry::{State, TokenIssuer};

use crate::engine::Engine;

/// Algorithms accepted in access tokens.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

const KEYS_FRESH_FOR: Duration = Duration::from_secs(600);
const METADATA_FRESH_FOR: Duration = Duration::from_secs(3600);
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
const LEEWAY_SECS: u64 = 30;

/// Who a verified token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCaller {
    /// The tenant the token's claims map to.
    pub tenant: String,
    /// The mapped role.
    pub role: String,
    /// `<issuer>#<subject>`: the caller in audit records.
    pub subject: String,
    /// `exp`, unix seconds.
    pub expires_at: u64,
    /// The state revision the mapping was made at.
    pub revision: u64,
    /// The providers the token's scopes narrow the caller to (the trust's
    /// `provider_scope_prefix`); `None` = no narrowing.
    pub providers: Option<Vec<String>>,
}

/// Why a token was refused (logged at debug; callers get one answer for all).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Malformed, unsigned, or an algorithm not allowed.
    #[error("malformed token or algorithm not allowed: {0}")]
    Malformed(String),
    /// No tenant trusts the issuer, or the claims do not map.
    #[error("{0}")]
    NotTrusted(String),
    /// The issuer's keys could not be fetched.
    #[error("cannot fetch the issuer's keys: {0}")]
    Keys(String),
    /// Signature, expiry or audience check failed.
    #[error("verification failed: {0}")]
    Invalid(String),
}

/// Cached key sets and issuer metadata.
#[derive(Debug)]
pub struct TokenVerifier {
    http: reqwest::Client,
    /// Issuer → its `jwks_uri`, discovered.
    discovered: Mutex<HashMap<String, (String, Instant)>>,
    /// Key-set URL → the keys.
    key_sets: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<KeySet>>>>>,
    /// Least time between fetches of one key set for unknown key ids.
    refetch_after: Duration,
    /// Whether non-public addresses may be fetched.
    allow_private: bool,
}

#[derive(Debug)]
struct KeySet {
    keys: JwkSet,
    fetched: Instant,
}

impl TokenVerifier {
    /// A verifier with empty caches that refetches a key set for an unknown key id at most
    /// every `refetch_after`, and fetches from public addresses only.
    pub fn new(refetch_after: Duration) -> Self {
        Self::with_addresses(refetch_after, false)
    }

    /// [`TokenVerifier::new`], fetching from non-public addresses too when `allow_private`
    /// (`auth.private_issuers`).
    pub fn with_addresses(refetch_after: Duration, allow_private: bool) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(3))
            .redirect(reqwest::redirect::Policy::none())
            // Every address a name resolves to is checked when connecting (no rebinding).
            .dns_resolver(Arc::new(tp_net::egress::GuardedResolver { allow_private }))
            .user_agent(concat!(
                "toolplane-control-plane/",
                env!("CARGO_PKG_VERSION")
            ))
            .build()
            .unwrap_or_default();
        Self {
            http,
            discovered: Mutex::new(HashMap::new()),
            key_sets: Mutex::new(HashMap::new()),
            refetch_after,
            allow_private,
        }
    }

    /// Verifies `token` for an edge whose resource URL is `resource`, reading tenants'
    /// trusts from `engine` twice: first to select the one trust the token claims to belong
    /// to (its key set and audience are the only ones the token is verified with), then to
    /// map the verified claims, which must select the same trust.
    pub async fn verify(
        &self,
        token: &str,
        resource: &str,
        engine: &Engine,
    ) -> Result<TokenCaller, TokenError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Malformed(e.to_string()))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenError::Malformed(format!(
                "algorithm {:?} is not allowed",
                header.alg
            )));
        }
        // Unverified: only to choose the trust to verify with.
        let unverified: Value = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|e| TokenError::Malformed(e.to_string()))?;
        let issuer = unverified
            .get("iss")
            .and_then(Value::as_str)
            .ok_or_else(|| TokenError::Malformed("no iss".into()))?
            .to_owned();
        let selected: TokenIssuer = engine
            .read(|state: &State| {
                state
                    .select_trust(&issuer, &unverified)
                    .map(|(_, trust)| trust.clone())
            })
            .await
            .map_err(|refusal| TokenError::NotTrusted(refusal.to_string()))?;
        let Some(audience) = selected.audience.clone().or_else(|| non_empty(resource)) else {
            return Err(TokenError::NotTrusted(
                "this edge has no resource URL (oauth.resource), so it takes no access tokens"
                    .into(),
            ));
        };
        let claims = self
            .verified_claims(
                token,
                &header,
                &issuer,
                vec![selected.jwks_uri.clone()],
                std::slice::from_ref(&audience),
            )
            .await?;
        let expires_at = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        engine
            .read(|state: &State| {
                let (tenant, role) = state
                    .map_token(&issuer, &claims)
                    .map_err(|refusal| TokenError::NotTrusted(refusal.to_string()))?;
                // The verified claims must select the trust the token was verified with (the
                // state may also have changed between the two reads).
                let trust = tenant.token_issuers.iter().find(|t| t.issuer == issuer);
                let same = trust.is_some_and(|trust| {
                    trust.jwks_uri == selected.jwks_uri
                        && trust.audience.clone().or_else(|| non_empty(resource))
                            == Some(audience.clone())
                });
                if !same {
                    return Err(TokenError::NotTrusted(
                        "the trust changed during verification".into(),
                    ));
                }
                Ok(TokenCaller {
                    tenant: tenant.id.clone(),
                    role,
                    subject: format!("{issuer}#{subject}"),
                    expires_at,
                    revision: state.revision,
                    providers: trust.and_then(|trust| trust.scoped_providers(&claims)),
                })
            })
            .await
    }

    /// The claims of `token` (whose header is `header`) once its signature verifies with a key
    /// of `issuer` — from one of `sources` (a key-set URL, or `None` for the issuer's
    /// discovered one) — and `iss`, one of `audiences`, `exp`, `nbf` and `sub` hold.
    pub async fn verified_claims(
        &self,
        token: &str,
        header: &jsonwebtoken::Header,
        issuer: &str,
        mut sources: Vec<Option<String>>,
        audiences: &[String],
    ) -> Result<Value, TokenError> {
        if !ALGORITHMS.contains(&header.alg) {
            return Err(TokenError::Malformed(format!(
                "algorithm {:?} is not allowed",
                header.alg
            )));
        }
        sources.sort();
        sources.dedup();
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[issuer]);
        validation.set_audience(audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        let mut last_error = None;
        for source in sources {
            let jwks_uri = match source {
                Some(uri) => uri,
                None => self.discover(issuer).await?,
            };
            let key = match self.key(&jwks_uri, header.kid.as_deref(), header.alg).await {
                Ok(key) => key,
                Err(error) => {
                    last_error = Some(error);
                    continue;
                }
            };
            match jsonwebtoken::decode::<Value>(token, &key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(error) => last_error = Some(TokenError::Invalid(error.to_string())),
            }
        }
        Err(last_error.unwrap_or_else(|| TokenError::Invalid("no key".into())))
    }

    /// The issuer's `jwks_uri`, from its OpenID or OAuth metadata (the document must name the
    /// same issuer: RFC 8414 §3.3).
    async fn discover(&self, issuer: &str) -> Result<String, TokenError> {
        if let Some((uri, at)) = self.discovered.lock().expect("poisoned").get(issuer)
            && at.elapsed() < METADATA_FRESH_FOR
        {
            return Ok(uri.clone());
        }
        let trimmed = issuer.trim_end_matches('/');
        let (origin, path) = match trimmed.find("://").map(|i| i + 3) {
            Some(start) => match trimmed[start..].find('/') {
                Some(i) => trimmed.split_at(start + i),
                None => (trimmed, ""),
            },
            None => (trimmed, ""),
        };
        let candidates = [
            format!("{trimmed}/.well-known/openid-configuration"),
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
        ];
        let mut last = String::new();
        for url in candidates {
            match self.fetch_json(&url).await {
                Ok(document) => {
                    if document.get("issuer").and_then(Value::as_str) != Some(issuer) {
                        last = format!("{url} names another issuer");
                        continue;
                    }
                    let Some(uri) = document.get("jwks_uri").and_then(Value::as_str) else {
                        last = format!("{url} has no jwks_uri");
                        continue;
                    };
                    tp_registry::tokens::check_issuer_url(uri).map_err(TokenError::Keys)?;
                    self.discovered
                        .lock()
                        .expect("poisoned")
                        .insert(issuer.to_owned(), (uri.to_owned(), Instant::now()));
                    return Ok(uri.to_owned());
                }
                Err(error) => last = error,
            }
        }
        Err(TokenError::Keys(last))
    }

    /// The key for `kid` (or the only key of the algorithm's type when the token names none).
    async fn key(
        &self,
        jwks_uri: &str,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, TokenError> {
        let slot = Arc::clone(
            self.key_sets
                .lock()
                .expect("poisoned")
                .entry(jwks_uri.to_owned())
                .or_default(),
        );
        let mut slot = slot.lock().await;
        let cached = slot.as_ref().and_then(|set| {
            let fresh = set.fetched.elapsed() < KEYS_FRESH_FOR;
            let found = pick(&set.keys, kid, alg);
            // An unknown kid may mean the provider rotated: refetch, but not more often
            // than every `refetch_after`.
            (fresh && (found.is_some() || set.fetched.elapsed() < self.refetch_after))
                .then_some(found)
        });
        let found = match cached {
            Some(found) => found,
            None => {
                let document = self.fetch_json(jwks_uri).await.map_err(TokenError::Keys)?;
                let keys =
                    key_set(document).map_err(|e| TokenError::Keys(format!("{jwks_uri}: {e}")))?;
                let found = pick(&keys, kid, alg);
                tracing::info!(
                    jwks_uri,
                    keys = keys.keys.len(),
                    "fetched an issuer's signing keys"
                );
                *slot = Some(KeySet {
                    keys,
                    fetched: Instant::now(),
                });
                found
            }
        };
        found.ok_or_else(|| TokenError::Invalid(format!("no key {kid:?} for {alg:?}")))
    }

    async fn fetch_json(&self, url: &str) -> Result<Value, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
        if let Some(reason) = tp_net::egress::literal_refusal(&parsed, self.allow_private) {
            return Err(format!(
                "{url}: {reason} (set auth.private_issuers to fetch from the operator's own network)"
            ));
        }
        let response = self
            .http
            .get(parsed)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(format!("{url}: larger than 1 MiB"));
        }
        let bytes = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url}: larger than 1 MiB"));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("{url}: {e}"))
    }
}

/// A key set, keeping the keys this verifier understands (a provider may publish others, e.g.
/// encryption keys, which must not make the whole set unreadable).
fn key_set(document: Value) -> Result<JwkSet, String> {
    let Some(Value::Array(keys)) = document.get("keys") else {
        return Err("not a JWK set (no \"keys\" array)".into());
    };
    Ok(JwkSet {
        keys: keys
            .iter()
            .filter_map(|key| serde_json::from_value(key.clone()).ok())
            .collect(),
    })
}

/// The decoding key for `kid` and `alg` in `keys`: the key's declared algorithm (if any) must
/// be `alg`, its use (if declared) signing, and its type must fit `alg`'s family.
fn pick(keys: &JwkSet, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    use jsonwebtoken::jwk::PublicKeyUse;
    let fits = |jwk: &jsonwebtoken::jwk::Jwk| {
        jwk.common
            .key_algorithm
            .is_none_or(|declared| declared.to_string() == format!("{alg:?}"))
            && jwk
                .common
                .public_key_use
                .as_ref()
                .is_none_or(|usage| *usage == PublicKeyUse::Signature)
    };
    let candidates: Vec<_> = keys
        .keys
        .iter()
        .filter(|jwk| match kid {
            Some(kid) => jwk.common.key_id.as_deref() == Some(kid),
            None => true,
        })
        .filter(|jwk| fits(jwk))
        .filter_map(|jwk| DecodingKey::from_jwk(jwk).ok())
        .filter(|key| key.family() == alg.family())
        .collect();
    // Without a kid, only an unambiguous key is used.
    match (kid, candidates.len()) {
        (_, 0) => None,
        (None, n) if n > 1 => None,
        _ => candidates.into_iter().next(),
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}
impl tp_registry::HasErrorCode for TokenError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            TokenError::Malformed(_) | TokenError::NotTrusted(_) | TokenError::Invalid(_) => {
                tp_registry::ErrorCode::Unauthenticated
            }
            // The issuer is down or misconfigured: not the caller's fault; retry.
            TokenError::Keys(_) => tp_registry::ErrorCode::Unavailable,
        }
    }
}
