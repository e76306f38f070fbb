//! Requests to a provider's token endpoint (RFC 6749 section 3.2): the code exchange and the
//! refresh, with the client's authentication, bounded answers and the provider's refusals told
//! apart from failures to reach it.

use base64::Engine as _;
use serde::Deserialize;

use super::{OAuthProvider, TokenAuth};
use crate::vault::MAX_CREDENTIAL;

/// Longest answer read from a token endpoint.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;

/// Why a token request did not give tokens.
#[derive(Debug)]
pub(super) enum TokenError {
    /// The provider refused with an OAuth error (`invalid_grant`, …).
    Refused { error: String, description: String },
    /// The provider could not be reached or answered something else.
    Failed(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Refused { error, description } if description.is_empty() => {
                write!(f, "the provider refused: {error}")
            }
            TokenError::Refused { error, description } => {
                write!(f, "the provider refused: {error} ({description})")
            }
            TokenError::Failed(why) => f.write_str(why),
        }
    }
}

/// A token endpoint's answer.
#[derive(Deserialize)]
pub(super) struct TokenAnswer {
    pub(super) access_token: String,
    #[serde(default)]
    pub(super) token_type: String,
    /// Seconds; some providers send it as a string (`"3600"`).
    #[serde(default, deserialize_with = "seconds")]
    pub(super) expires_in: Option<u64>,
    #[serde(default)]
    pub(super) refresh_token: Option<String>,
    #[serde(default)]
    pub(super) scope: Option<String>,
}

/// `expires_in` as a number or a string of digits (`null` = not said).
fn seconds<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Seconds {
        Number(u64),
        Text(String),
    }
    match Option::<Seconds>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Seconds::Number(secs)) => Ok(Some(secs)),
        Some(Seconds::Text(text)) => text.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("expires_in {text:?} is not a number of seconds"))
        }),
    }
}

impl TokenAnswer {
    /// A bearer token Toolplane can inject: 1 to [`MAX_CREDENTIAL`] bytes of printable ASCII;
    /// a refresh token, when given, at most [`MAX_CREDENTIAL`] bytes (one dropped would end
    /// the renewals without a word).
    pub(super) fn check(&self) -> Result<(), String> {
        if self
            .refresh_token
            .as_ref()
            .is_some_and(|token| token.len() > MAX_CREDENTIAL)
        {
            return Err(format!(
                "the provider's refresh token exceeds {MAX_CREDENTIAL} bytes"
            ));
        }
        if !self.token_type.is_empty() && !self.token_type.eq_ignore_ascii_case("bearer") {
            return Err(format!(
                "the provider issued a {:?} token; only bearer tokens can be injected",
                self.token_type
            ));
        }
        let access = &self.access_token;
        if access.is_empty()
            || access.len() > MAX_CREDENTIAL
            || !access.bytes().all(|b| (0x21..0x7f).contains(&b))
        {
            return Err(
                "the provider's access token is empty, too long or not printable ASCII".into(),
            );
        }
        Ok(())
    }
}

/// A token endpoint's refusal (RFC 6749 5.2).
#[derive(Deserialize)]
struct TokenRefusal {
    error: String,
    #[serde(default)]
    error_description: String,
}

/// POSTs `form` to the provider's token endpoint with the client's authentication.
pub(super) async fn request(
    http: &reqwest::Client,
    settings: &OAuthProvider,
    mut form: Vec<(&'static str, String)>,
) -> Result<TokenAnswer, TokenError> {
    let request = http
        .post(settings.token_endpoint.clone())
        .header(http::header::ACCEPT, "application/json");
    let request = authenticated(request, settings, &mut form);
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let mut response = request
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|e| TokenError::Failed(format!("the token endpoint is unreachable: {e}")))?;
    let status = response.status();
    let bytes = read_bounded(&mut response).await?;
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(|e| {
            TokenError::Failed(format!("the token endpoint's answer is not a token: {e}"))
        });
    }
    match serde_json::from_slice::<TokenRefusal>(&bytes) {
        Ok(refusal) if status.is_client_error() => Err(TokenError::Refused {
            error: refusal.error,
            description: refusal.error_description,
        }),
        _ => Err(TokenError::Failed(format!(
            "the token endpoint answered HTTP {status}"
        ))),
    }
}

/// `request` with the client's authentication: HTTP Basic, or the id (and secret) in `form`.
fn authenticated(
    mut request: reqwest::RequestBuilder,
    settings: &OAuthProvider,
    form: &mut Vec<(&'static str, String)>,
) -> reqwest::RequestBuilder {
    match (settings.token_auth, &settings.client_secret) {
        (TokenAuth::ClientSecretBasic, Some(secret)) => {
            // RFC 6749 2.3.1: both form-encoded before they are joined.
            let encode =
                |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(&settings.client_id),
                encode(&secret.0)
            ));
            request = request.header(http::header::AUTHORIZATION, format!("Basic {basic}"));
        }
        (TokenAuth::ClientSecretPost, Some(secret)) => {
            form.push(("client_id", settings.client_id.clone()));
            form.push(("client_secret", secret.0.clone()));
        }
        _ => form.push(("client_id", settings.client_id.clone())),
    }
    request
}

/// The answer's body, at most [`MAX_TOKEN_ANSWER`] bytes.
async fn read_bounded(response: &mut reqwest::Response) -> Result<Vec<u8>, TokenError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| TokenError::Failed(format!("reading the token endpoint's answer: {e}")))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_TOKEN_ANSWER {
            return Err(TokenError::Failed(format!(
                "the token endpoint's answer exceeds {MAX_TOKEN_ANSWER} bytes"
            )));
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: &str) -> Result<TokenAnswer, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn expires_in_is_read_as_a_number_or_a_string() {
        let number = answer(r#"{"access_token":"a","expires_in":3600}"#).unwrap();
        assert_eq!(number.expires_in, Some(3600));
        let text = answer(r#"{"access_token":"a","expires_in":"60"}"#).unwrap();
        assert_eq!(text.expires_in, Some(60));
        let absent = answer(r#"{"access_token":"a","expires_in":null}"#).unwrap();
        assert_eq!(absent.expires_in, None);
        assert!(answer(r#"{"access_token":"a","expires_in":"soon"}"#).is_err());
        assert!(answer(r#"{"access_token":"a","expires_in":-5}"#).is_err());
    }

    #[test]
    fn an_oversized_refresh_token_is_refused_not_dropped() {
        let long = "r".repeat(MAX_CREDENTIAL + 1);
        let json = format!(r#"{{"access_token":"a","refresh_token":"{long}"}}"#);
        let error = answer(&json).unwrap().check().unwrap_err();
        assert!(error.contains("refresh token exceeds"), "{error}");
        assert!(
            answer(r#"{"access_token":"a","refresh_token":"r"}"#)
                .unwrap()
                .check()
                .is_ok()
        );
    }
}
