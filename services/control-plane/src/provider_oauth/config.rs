//! `[connections]`: the providers the control plane connects by OAuth, and its callback.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use reqwest::Url;
use serde::{Deserialize, Serialize};

/// `[connections]` as operators write it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawConnections {
    /// Where the OAuth callback (`GET /connections/callback`) listens; empty = nowhere, and
    /// `[[connections.oauth]]` must then be empty.
    pub callback_listen: String,
    /// The URL browsers reach the callback listener at (behind an ingress, its public URL);
    /// empty = `http://{callback_listen}`. Providers must list
    /// `{public_url}/connections/callback` as a redirect URI of the client.
    pub public_url: String,
    /// How long an authorization URL from `BeginConnect` stays good (seconds, 60 to 3600).
    pub authorization_ttl_secs: u64,
    /// How often connections are checked for access tokens to renew (seconds, 1 to 3600).
    pub refresh_check_secs: u64,
    /// The providers connected by OAuth.
    pub oauth: Vec<RawOAuthProvider>,
}

/// `[[connections.oauth]]`: one provider's authorization server and Toolplane's client there.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawOAuthProvider {
    /// The catalogue's provider it connects.
    pub provider: String,
    /// The authorization endpoint (https, or http on a loopback address).
    pub authorization_endpoint: String,
    /// The token endpoint (https, or http on a loopback address).
    pub token_endpoint: String,
    /// Toolplane's client id at the provider.
    pub client_id: String,
    /// A file holding the client secret (first line).
    pub client_secret_file: String,
    /// An environment variable holding the client secret.
    pub client_secret_env: String,
    /// How the client authenticates at the token endpoint.
    pub token_auth: TokenAuth,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// An RFC 8707 resource indicator sent with every token request (the API the tokens are
    /// for, when the provider issues tokens per resource); empty = none.
    pub resource: String,
    /// Extra parameters of the authorization URL, as some providers want them for a refresh
    /// token (Google: `access_type = "offline"`, `prompt = "consent"`).
    pub authorization_params: BTreeMap<String, String>,
}

/// Client authentication at the token endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuth {
    /// HTTP Basic with the client id and secret.
    #[default]
    ClientSecretBasic,
    /// The client id and secret in the form body.
    ClientSecretPost,
    /// A public client: the client id only (PKCE protects the code).
    None,
}

/// The validated `[connections]`, when OAuth connections are on.
#[derive(Debug, Clone)]
pub struct OAuthConnections {
    /// The callback listener.
    pub callback_listen: SocketAddr,
    /// `{public_url}/connections/callback`.
    pub redirect_uri: String,
    /// How long an authorization URL stays good.
    pub authorization_ttl: Duration,
    /// How often tokens due for renewal are looked for.
    pub refresh_check: Duration,
    /// The providers, by catalogue id.
    pub providers: BTreeMap<String, OAuthProvider>,
}

/// A client secret: never printed.
#[derive(Clone)]
pub struct ClientSecret(pub String);

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(***)")
    }
}

/// One provider, validated.
#[derive(Debug, Clone)]
pub struct OAuthProvider {
    /// Where users are sent to authorize the connection.
    pub authorization_endpoint: Url,
    /// Where codes and refresh tokens are exchanged for access tokens.
    pub token_endpoint: Url,
    /// The id the provider registered the control plane under.
    pub client_id: String,
    /// The client secret (`None` for a public client).
    pub client_secret: Option<ClientSecret>,
    /// How the client authenticates.
    pub token_auth: TokenAuth,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The resource indicator, if any.
    pub resource: Option<String>,
    /// Extra parameters of the authorization URL.
    pub authorization_params: BTreeMap<String, String>,
}

impl Default for RawConnections {
    fn default() -> Self {
        Self {
            callback_listen: String::new(),
            public_url: String::new(),
            authorization_ttl_secs: 600,
            refresh_check_secs: 30,
            oauth: Vec::new(),
        }
    }
}

impl RawConnections {
    /// Validated; `None` when no provider is connected by OAuth.
    pub fn validate(&self) -> anyhow::Result<Option<OAuthConnections>> {
        if !(60..=3600).contains(&self.authorization_ttl_secs) {
            bail!("connections.authorization_ttl_secs: must be between 60 and 3600");
        }
        if !(1..=3600).contains(&self.refresh_check_secs) {
            bail!("connections.refresh_check_secs: must be between 1 and 3600");
        }
        if self.oauth.is_empty() {
            return Ok(None);
        }
        if self.callback_listen.is_empty() {
            bail!(
                "connections.callback_listen: required when [[connections.oauth]] providers are configured (providers send browsers back to it)"
            );
        }
        let callback_listen: SocketAddr = self.callback_listen.parse().with_context(|| {
            format!(
                "connections.callback_listen: {:?} is not an address like 127.0.0.1:8091",
                self.callback_listen
            )
        })?;
        let public_url = if self.public_url.is_empty() {
            format!("http://{callback_listen}")
        } else {
            endpoint("connections.public_url", &self.public_url)?;
            self.public_url.trim_end_matches('/').to_owned()
        };
        let mut providers = BTreeMap::new();
        for (i, raw) in self.oauth.iter().enumerate() {
            let at = format!("connections.oauth[{i}]");
            let provider = raw.validate(&at)?;
            if providers.insert(raw.provider.clone(), provider).is_some() {
                bail!("{at}.provider: {:?} is configured twice", raw.provider);
            }
        }
        Ok(Some(OAuthConnections {
            callback_listen,
            redirect_uri: format!("{public_url}/connections/callback"),
            authorization_ttl: Duration::from_secs(self.authorization_ttl_secs),
            refresh_check: Duration::from_secs(self.refresh_check_secs),
            providers,
        }))
    }
}

impl RawOAuthProvider {
    fn validate(&self, at: &str) -> anyhow::Result<OAuthProvider> {
        tp_registry::ident::check_slug(&self.provider)
            .map_err(|e| anyhow::anyhow!("{at}.provider: {e}"))?;
        let authorization_endpoint = endpoint(
            &format!("{at}.authorization_endpoint"),
            &self.authorization_endpoint,
        )?;
        let token_endpoint = endpoint(&format!("{at}.token_endpoint"), &self.token_endpoint)?;
        if self.client_id.trim().is_empty() {
            bail!("{at}.client_id: required (the client registered at the provider)");
        }
        let client_secret = self.client_secret(at)?;
        match (&client_secret, self.token_auth) {
            (Some(secret), _) if secret.is_empty() => bail!("{at}: the client secret is empty"),
            (Some(_), TokenAuth::None) => {
                bail!("{at}: token_auth = \"none\" is a public client: give it no secret")
            }
            (None, TokenAuth::ClientSecretBasic | TokenAuth::ClientSecretPost) => bail!(
                "{at}: token_auth = {:?} needs client_secret_file or client_secret_env (or token_auth = \"none\" for a public client)",
                self.token_auth
            ),
            _ => {}
        }
        for scope in &self.scopes {
            if scope.is_empty()
                || !scope
                    .bytes()
                    .all(|b| (0x21..0x7f).contains(&b) && b != b'"' && b != b'\\')
            {
                bail!("{at}.scopes: {scope:?} is not a scope token (RFC 6749 3.3)");
            }
        }
        for name in self.authorization_params.keys() {
            if RESERVED.contains(&name.as_str()) {
                bail!("{at}.authorization_params: {name:?} is set by the control plane itself");
            }
        }
        Ok(OAuthProvider {
            authorization_endpoint,
            token_endpoint,
            client_id: self.client_id.clone(),
            client_secret: client_secret.map(ClientSecret),
            token_auth: self.token_auth,
            scopes: self.scopes.clone(),
            resource: (!self.resource.is_empty()).then(|| self.resource.clone()),
            authorization_params: self.authorization_params.clone(),
        })
    }
}

impl RawOAuthProvider {
    /// The client secret, from its file (first line) or environment variable, if any.
    fn client_secret(&self, at: &str) -> anyhow::Result<Option<String>> {
        Ok(
            match (
                self.client_secret_file.as_str(),
                self.client_secret_env.as_str(),
            ) {
                ("", "") => None,
                (file, "") => {
                    crate::files::warn_if_shared(
                        std::path::Path::new(file),
                        "a client secret file",
                    );
                    let text = std::fs::read_to_string(file)
                        .with_context(|| format!("{at}.client_secret_file: reading {file}"))?;
                    Some(text.lines().next().unwrap_or_default().trim().to_owned())
                }
                ("", var) => Some(std::env::var(var).with_context(|| {
                    format!("{at}.client_secret_env: the environment variable {var} is not set")
                })?),
                _ => bail!("{at}: set client_secret_file or client_secret_env, not both"),
            },
        )
    }
}

/// Parameters of the authorization URL the flow sets itself.
const RESERVED: [&str; 8] = [
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
];

/// An https URL, or http on a loopback address (a provider on the operator's own machine).
fn endpoint(at: &str, value: &str) -> anyhow::Result<Url> {
    let url = Url::parse(value).with_context(|| format!("{at}: {value:?} is not a URL"))?;
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => bail!("{at}: {value:?} must be https (http only on a loopback address)"),
    }
    if url.fragment().is_some() {
        bail!("{at}: {value:?} must not have a fragment");
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> RawOAuthProvider {
        RawOAuthProvider {
            provider: "crm".into(),
            authorization_endpoint: "https://id.example.com/authorize".into(),
            token_endpoint: "https://id.example.com/token".into(),
            client_id: "toolplane".into(),
            token_auth: TokenAuth::None,
            ..Default::default()
        }
    }

    fn raw(providers: Vec<RawOAuthProvider>) -> RawConnections {
        RawConnections {
            callback_listen: "127.0.0.1:8091".into(),
            oauth: providers,
            ..Default::default()
        }
    }

    #[test]
    fn a_valid_provider_gets_the_callback_as_its_redirect() {
        let valid = raw(vec![provider()]).validate().unwrap().unwrap();
        assert_eq!(
            valid.redirect_uri,
            "http://127.0.0.1:8091/connections/callback"
        );
        assert!(valid.providers["crm"].client_secret.is_none());
        let none = RawConnections::default().validate().unwrap();
        assert!(none.is_none(), "no providers, no OAuth");
    }

    #[test]
    fn bad_settings_are_refused_with_the_field_named() {
        let cases: Vec<(RawConnections, &str)> = vec![
            (
                RawConnections {
                    callback_listen: String::new(),
                    ..raw(vec![provider()])
                },
                "connections.callback_listen",
            ),
            (
                raw(vec![RawOAuthProvider {
                    token_endpoint: "http://id.example.com/token".into(),
                    ..provider()
                }]),
                "token_endpoint",
            ),
            (
                raw(vec![RawOAuthProvider {
                    token_auth: TokenAuth::ClientSecretBasic,
                    ..provider()
                }]),
                "needs client_secret_file",
            ),
            (
                raw(vec![RawOAuthProvider {
                    client_secret_env: "TOOLPLANE_TEST_NO_SUCH_VARIABLE".into(),
                    token_auth: TokenAuth::ClientSecretPost,
                    ..provider()
                }]),
                "is not set",
            ),
            (raw(vec![provider(), provider()]), "configured twice"),
            (
                raw(vec![RawOAuthProvider {
                    scopes: vec!["two words".into()],
                    ..provider()
                }]),
                "scope token",
            ),
            (
                RawConnections {
                    refresh_check_secs: 0,
                    ..raw(vec![provider()])
                },
                "refresh_check_secs",
            ),
        ];
        for (raw, expected) in cases {
            let error = raw.validate().unwrap_err().to_string();
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }
}
