//! `Debug` of the messages that carry a secret (a provider credential, an API key or access
//! token): every field but the secret, so a `{:?}` in a log line or a panic message never
//! prints one. The build (build.rs) leaves these messages without a derived `Debug`.

use std::fmt;

use crate::pb;

/// How a secret field prints: whether it is set, and its length.
struct Redacted(usize);

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("\"\"")
        } else {
            write!(f, "<redacted, {} bytes>", self.0)
        }
    }
}

impl fmt::Debug for pb::Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("credential", &Redacted(self.credential.len()))
            .field("expires_at", &self.expires_at)
            .field("revision", &self.revision)
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl fmt::Debug for pb::ProviderCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderCredential")
            .field("provider", &self.provider)
            .field("token", &Redacted(self.token.len()))
            .field("expires_at", &self.expires_at)
            .field("sealed", &Redacted(self.sealed.len()))
            .finish()
    }
}

impl fmt::Debug for pb::ConnectProviderRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectProviderRequest")
            .field("tenant", &self.tenant)
            .field("provider", &self.provider)
            .field("credential", &Redacted(self.credential.len()))
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl fmt::Debug for pb::AuthenticateRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthenticateRequest")
            .field("key", &Redacted(self.key.len()))
            .field("resource", &self.resource)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let secret = "tpk_0123456789abcdef-secret";
        let printed = [
            format!(
                "{:?}",
                pb::Credential {
                    credential: secret.into(),
                    fingerprint: "0123456789ab".into(),
                    ..Default::default()
                }
            ),
            format!(
                "{:?}",
                pb::InvokeRequest {
                    credential: Some(pb::ProviderCredential {
                        provider: "crm".into(),
                        token: secret.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }
            ),
            format!(
                "{:#?}",
                pb::ConnectProviderRequest {
                    tenant: "acme".into(),
                    credential: secret.into(),
                    ..Default::default()
                }
            ),
            format!(
                "{:?}",
                pb::AuthenticateRequest {
                    key: secret.into(),
                    resource: "http://edge/mcp".into(),
                }
            ),
        ];
        for text in printed {
            assert!(!text.contains("secret"), "{text}");
            assert!(text.contains("redacted"), "{text}");
        }
    }
}
