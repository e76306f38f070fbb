//! RFC 8693 token exchange at an MCP upstream's authorization server (ADR 0015): when an
//! executor names one (`token_exchange`), a tenant's connection token is not sent to the
//! upstream itself; it is the subject token of an exchange, and the token the authorization
//! server issues for the upstream (`resource` = the executor's endpoint) is sent instead.
//!
//! Issued tokens are kept in this process's memory, by the SHA-256 of the subject token, until
//! shortly before they expire; calls of one subject on a cold cache share one exchange. A
//! refused or failed exchange fails the call: the subject token is never sent in its place.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::Digest as _;
use tp_registry::{Executor, TokenExchange};

use crate::UpstreamError;

/// The grant type of RFC 8693.
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of an access token (RFC 8693 section 3).
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Longest answer read from the token endpoint.
const MAX_ANSWER: usize = 64 * 1024;
/// Longest token taken (it becomes a header value).
const MAX_TOKEN: usize = 8192;
/// Issued tokens kept at most; past it the cache is emptied.
const MAX_CACHED: usize = 1024;
/// How long an issued token is kept when the answer does not say when it expires.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// Longest an issued token is kept, whatever the answer says.
const MAX_LIFETIME: Duration = Duration::from_secs(3600);
/// How long one exchange may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Exchanges tenants' tokens for one executor.
pub(crate) struct Exchanger {
    settings: TokenExchange,
    /// The client secret from this process's environment, or why it is missing.
    secret: Result<Option<String>, String>,
    /// The upstream's URL, sent as `resource`.
    resource: String,
    http: reqwest::Client,
    issued: Mutex<HashMap<[u8; 32], (String, Instant)>>,
    /// Exchanges under way, by subject: callers that find one wait for its answer instead of
    /// sending their own (a cold cache under load sends one request per subject, not one per
    /// call).
    pending: Mutex<HashMap<[u8; 32], Arc<Flight>>>,
}

/// One exchange under way and the answer its waiters share (an error too: each waiter would
/// otherwise try again in turn, and a down endpoint would hold the last one for all the
/// timeouts before it).
type Flight = tokio::sync::OnceCell<Result<String, UpstreamError>>;

impl std::fmt::Debug for Exchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanger")
            .field("token_endpoint", &self.settings.token_endpoint)
            .finish_non_exhaustive()
    }
}

impl Exchanger {
    /// The exchanger of `info`, when it names a token exchange; the client secret is read
    /// from the environment variable it names, which must start with `prefix` (as executors'
    /// credentials).
    pub(crate) fn new(info: &Executor, prefix: &str, http: reqwest::Client) -> Option<Self> {
        let settings = info.token_exchange.clone()?;
        let secret = match settings.client_secret_env.as_str() {
            "" => Ok(None),
            name if !name.starts_with(prefix) || name.len() == prefix.len() => Err(format!(
                "MCP executor {:?} names token_exchange.client_secret_env {name:?}, but this edge only reads variables named {prefix}…",
                info.name
            )),
            name => std::env::var(name).map(Some).map_err(|_| {
                format!(
                    "the token exchange secret for MCP executor {:?} is not set: environment variable {name} is missing on this edge",
                    info.name
                )
            }),
        };
        Some(Exchanger {
            settings,
            secret,
            resource: info.endpoint.clone(),
            http,
            issued: Mutex::default(),
            pending: Mutex::default(),
        })
    }

    fn issued(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (String, Instant)>> {
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The upstream's token for `subject` (a tenant's connection token): the one kept while
    /// it is fresh, else a new exchange's — one per subject at a time, whose answer every
    /// caller waiting for the same subject shares.
    pub(crate) async fn exchange(&self, subject: &str) -> Result<String, UpstreamError> {
        let key: [u8; 32] = sha2::Sha256::digest(subject.as_bytes()).into();
        if let Some(token) = self.cached(&key) {
            return Ok(token);
        }
        let flight = Arc::clone(
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key)
                .or_default(),
        );
        // Whoever runs the flight stores its token before the waiters wake; a flight whose
        // runner was cancelled is taken over by the next waiter (OnceCell's rule).
        let answer = flight
            .get_or_init(|| async {
                if let Some(token) = self.cached(&key) {
                    return Ok(token);
                }
                let (token, lifetime) = self.request(subject).await?;
                self.store(key, &token, lifetime);
                Ok(token)
            })
            .await
            .clone();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.get(&key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            pending.remove(&key);
        }
        answer
    }

    /// The token issued for the subject whose digest is `key`, while it is valid.
    fn cached(&self, key: &[u8; 32]) -> Option<String> {
        self.issued()
            .get(key)
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(token, _)| token.clone())
    }

    /// Keeps `token` until a tenth of its `lifetime` (a minute at most) before it ends.
    fn store(&self, key: [u8; 32], token: &str, lifetime: Duration) {
        let lifetime = lifetime.min(MAX_LIFETIME);
        let margin = (lifetime / 10).min(Duration::from_secs(60));
        let mut issued = self.issued();
        if issued.len() >= MAX_CACHED {
            issued.clear();
        }
        issued.insert(key, (token.to_owned(), Instant::now() + lifetime - margin));
    }

    async fn request(&self, subject: &str) -> Result<(String, Duration), UpstreamError> {
        let secret = self.secret.clone().map_err(UpstreamError::Unreachable)?;
        let settings = &self.settings;
        let body = self.form(subject, secret.is_none());
        let mut request = self
            .http
            .post(&settings.token_endpoint)
            .timeout(TIMEOUT)
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            );
        if let Some(secret) = secret {
            // RFC 6749 2.3.1: both form-encoded before they are joined.
            let encode =
                |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(&settings.client_id),
                encode(&secret)
            ));
            request = request.header(http::header::AUTHORIZATION, format!("Basic {basic}"));
        }
        let mut response = request.body(body).send().await.map_err(|e| {
            UpstreamError::Unreachable(format!("the upstream's token endpoint is unreachable: {e}"))
        })?;
        let status = response.status();
        if status.is_redirection() {
            // The client follows no redirect (`http_client`): the body holds the subject token.
            return Err(UpstreamError::Unreachable(format!(
                "the upstream's token endpoint answered a redirect (HTTP {status}); the subject token was not sent on: set token_exchange.token_endpoint to its final URL"
            )));
        }
        let answer = read_bounded(&mut response)
            .await
            .map_err(UpstreamError::Unreachable)?;
        if status.is_client_error() && answer["error"].is_string() {
            // The server refused this subject (revoked, expired, not allowed): the caller's
            // connection, not the upstream, is at fault.
            return Err(UpstreamError::CredentialRefused(refusal(status, &answer)));
        }
        if !status.is_success() {
            return Err(UpstreamError::Unreachable(refusal(status, &answer)));
        }
        issued_token(&answer).map_err(UpstreamError::Unreachable)
    }

    /// The request's form (`with_client_id`: a public client names itself in it).
    fn form(&self, subject: &str, with_client_id: bool) -> String {
        let settings = &self.settings;
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", GRANT_TYPE)
            .append_pair("subject_token", subject)
            .append_pair("subject_token_type", ACCESS_TOKEN)
            .append_pair("requested_token_type", ACCESS_TOKEN)
            .append_pair("resource", &self.resource);
        if !settings.audience.is_empty() {
            form.append_pair("audience", &settings.audience);
        }
        if !settings.scope.is_empty() {
            form.append_pair("scope", &settings.scope);
        }
        if with_client_id {
            form.append_pair("client_id", &settings.client_id);
        }
        form.finish()
    }
}

/// The answer's JSON, at most [`MAX_ANSWER`] bytes read (`null` when it is not JSON).
async fn read_bounded(response: &mut reqwest::Response) -> Result<serde_json::Value, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading the token exchange's answer: {e}"))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ANSWER {
            return Err(format!(
                "the token exchange's answer exceeds {MAX_ANSWER} bytes"
            ));
        }
    }
    Ok(serde_json::from_slice(&body).unwrap_or_default())
}

/// Why the authorization server did not issue a token.
fn refusal(status: http::StatusCode, answer: &serde_json::Value) -> String {
    match answer["error"].as_str() {
        Some(error) => {
            let description = answer["error_description"].as_str().unwrap_or_default();
            let description: String = description.chars().take(200).collect();
            format!(
                "the upstream's authorization server refused the token exchange: {error} {description}"
            )
            .trim_end()
            .to_owned()
        }
        None => format!("the upstream's token endpoint answered HTTP {status}"),
    }
}

/// The token of a successful answer, and how long it lives: a bearer token of printable
/// ASCII, at most [`MAX_TOKEN`] bytes.
fn issued_token(answer: &serde_json::Value) -> Result<(String, Duration), String> {
    let token = answer["access_token"].as_str().unwrap_or_default();
    if token.is_empty()
        || token.len() > MAX_TOKEN
        || !token.bytes().all(|b| (0x21..0x7f).contains(&b))
    {
        return Err(
            "the token exchange's answer holds no usable access_token (empty, too long or not printable ASCII)"
                .into(),
        );
    }
    let token_type = answer["token_type"].as_str().unwrap_or("bearer");
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "the token exchange issued a {token_type:?} token; only bearer tokens can be sent"
        ));
    }
    let lifetime = match &answer["expires_in"] {
        serde_json::Value::Number(secs) => secs.as_u64(),
        serde_json::Value::String(secs) => secs.trim().parse().ok(),
        _ => None,
    }
    .filter(|secs| *secs > 0)
    .map_or(DEFAULT_LIFETIME, Duration::from_secs);
    Ok((token.to_owned(), lifetime))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The test executor, exchanging tokens at `token_endpoint` as client `edge` with the
    /// secret in `secret_env` (none when empty).
    fn exchanging(token_endpoint: &str, secret_env: &str) -> Executor {
        Executor {
            token_exchange: Some(TokenExchange {
                token_endpoint: token_endpoint.into(),
                client_id: "edge".into(),
                client_secret_env: secret_env.into(),
                audience: String::new(),
                scope: String::new(),
            }),
            ..crate::test_executor()
        }
    }

    #[test]
    fn only_a_bearer_token_of_printable_ascii_is_taken() {
        let (token, lifetime) = issued_token(
            &json!({"access_token": "t", "token_type": "Bearer", "expires_in": "120"}),
        )
        .unwrap();
        assert_eq!((token.as_str(), lifetime), ("t", Duration::from_secs(120)));
        let (_, lifetime) = issued_token(&json!({"access_token": "t"})).unwrap();
        assert_eq!(lifetime, DEFAULT_LIFETIME);
        for bad in [
            json!({}),
            json!({"access_token": ""}),
            json!({"access_token": "a b"}),
            json!({"access_token": "t", "token_type": "DPoP"}),
            json!({"access_token": "x".repeat(MAX_TOKEN + 1)}),
        ] {
            assert!(issued_token(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_client_secret_is_read_only_from_a_variable_of_the_prefix() {
        let executor = |secret_env: &str| exchanging("http://127.0.0.1:1/token", secret_env);
        let http = reqwest::Client::new();
        // PATH exists in every environment: it must never be sent as a client secret.
        for name in ["PATH", "TOOLPLANE_CRED_"] {
            let exchanger = Exchanger::new(&executor(name), "TOOLPLANE_CRED_", http.clone());
            let error = exchanger.unwrap().secret.unwrap_err();
            assert!(error.contains("only reads variables named"), "{error}");
        }
        let missing = Exchanger::new(
            &executor("TOOLPLANE_CRED_NOT_SET_ANYWHERE"),
            "TOOLPLANE_CRED_",
            http.clone(),
        );
        assert!(missing.unwrap().secret.unwrap_err().contains("is missing"));
        let public = Exchanger::new(&executor(""), "TOOLPLANE_CRED_", http.clone());
        assert_eq!(public.unwrap().secret, Ok(None));
        let mut plain = executor("");
        plain.token_exchange = None;
        assert!(Exchanger::new(&plain, "TOOLPLANE_CRED_", http).is_none());
    }

    /// A token endpoint that answers 307 to another listener: the subject token must not
    /// reach it.
    #[tokio::test]
    async fn a_redirect_is_not_followed_with_the_subject_token() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let target = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target_port = target.local_addr().unwrap().port();
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&reached);
        tokio::spawn(async move {
            if target.accept().await.is_ok() {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let endpoint = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = endpoint.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = endpoint.accept().await {
                let mut buffer = vec![0u8; 16 * 1024];
                let _ = stream.read(&mut buffer).await;
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{target_port}/steal\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        let info = exchanging(&format!("http://127.0.0.1:{port}/token"), "");
        let http = crate::http_client("", "", "").unwrap();
        let exchanger = Exchanger::new(&info, "TOOLPLANE_CRED_", http).unwrap();
        let error = exchanger.exchange("subject-token").await.unwrap_err();
        assert!(
            matches!(&error, UpstreamError::Unreachable(m) if m.contains("redirect (HTTP 307")),
            "{error:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !reached.load(std::sync::atomic::Ordering::SeqCst),
            "the redirect was followed"
        );
    }

    /// A token endpoint on a free port that answers every request after `delay`, with
    /// `status` and a token named after the request count; the count is returned.
    async fn counting_endpoint(
        status: u16,
        delay: Duration,
    ) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&count);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let counted = std::sync::Arc::clone(&counted);
                tokio::spawn(async move {
                    let mut buffer = vec![0u8; 16 * 1024];
                    while let Ok(n) = stream.read(&mut buffer).await {
                        if n == 0 {
                            return;
                        }
                        let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                        tokio::time::sleep(delay).await;
                        let body = if status == 200 {
                            format!(
                                r#"{{"access_token":"issued-{n}","token_type":"Bearer","expires_in":300}}"#
                            )
                        } else {
                            r#"{"note":"down"}"#.to_owned()
                        };
                        let answer = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (port, count)
    }

    /// Fifty calls of one subject on a cold cache send one exchange and share its token; a
    /// second subject sends its own; a failing endpoint's error is shared too (one request,
    /// not fifty in turn), and is not kept: the next call tries again.
    #[tokio::test]
    async fn concurrent_calls_of_one_subject_share_one_exchange() {
        let (port, count) = counting_endpoint(200, Duration::from_millis(200)).await;
        let info = exchanging(&format!("http://127.0.0.1:{port}/token"), "");
        let http = crate::http_client("", "", "").unwrap();
        let exchanger = Exchanger::new(&info, "TOOLPLANE_CRED_", http.clone()).unwrap();
        let calls = (0..50).map(|i| {
            let subject = if i % 10 == 9 {
                "subject-b"
            } else {
                "subject-a"
            };
            exchanger.exchange(subject)
        });
        let tokens: Vec<String> = futures::future::join_all(calls)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
        let a: std::collections::HashSet<&String> = tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 10 != 9)
            .map(|(_, t)| t)
            .collect();
        assert_eq!(a.len(), 1, "{tokens:?}");
        assert!(!a.contains(&tokens[9]), "{tokens:?}");
        assert!(exchanger.pending.lock().unwrap().is_empty());

        let (port, count) = counting_endpoint(500, Duration::from_millis(200)).await;
        let info = exchanging(&format!("http://127.0.0.1:{port}/token"), "");
        let exchanger = Exchanger::new(&info, "TOOLPLANE_CRED_", http).unwrap();
        let answers =
            futures::future::join_all((0..50).map(|_| exchanger.exchange("subject-a"))).await;
        assert!(answers.iter().all(Result::is_err), "{answers:?}");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(exchanger.exchange("subject-a").await.is_err());
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn a_refusal_names_the_error_and_a_short_description() {
        let said = refusal(
            http::StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_grant", "error_description": "d".repeat(500)}),
        );
        assert!(said.contains("invalid_grant") && said.len() < 320, "{said}");
        let said = refusal(http::StatusCode::BAD_GATEWAY, &serde_json::Value::Null);
        assert!(said.contains("502"), "{said}");
    }
}
