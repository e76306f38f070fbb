//! Bearer-token interceptors: admin RPCs need the admin token, edge RPCs the edge token.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tonic::{Request, Status};

/// Which of an interceptor's tokens a request presented (its index in [`TokenCheck::new`]'s
/// list: 0 is the service's own token, the others are accepted for debugging).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedToken(pub usize);

/// Which tokens an interceptor accepts.
#[derive(Clone)]
pub struct TokenCheck {
    accepted: Arc<Vec<[u8; 32]>>,
    what: &'static str,
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCheck")
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

// === impl TokenCheck ===

impl TokenCheck {
    /// Accepts any of `tokens`; `what` names the token in errors ("admin", "edge").
    pub fn new(what: &'static str, tokens: &[&str]) -> TokenCheck {
        TokenCheck {
            accepted: Arc::new(tokens.iter().map(|t| digest(t)).collect()),
            what,
        }
    }

    /// The interceptor.
    pub fn check(&self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request.metadata().get("authorization").ok_or_else(|| {
            tp_proto::status::error(
                tp_registry::ErrorCode::Unauthenticated,
                format!("missing authorization: Bearer <{} token>", self.what),
            )
        })?;
        let presented = header
            .to_str()
            .ok()
            .and_then(tp_proto::keys::bearer)
            .ok_or_else(|| {
                tp_proto::status::error(
                    tp_registry::ErrorCode::Unauthenticated,
                    "authorization must be \"Bearer <token>\"",
                )
            })?;
        // Compare digests so the comparison time does not depend on the token's content.
        let presented = digest(presented.trim());
        let mut matched = None;
        for (index, token) in self.accepted.iter().enumerate() {
            if constant_time_eq(token, &presented) {
                matched = Some(index);
            }
        }
        if let Some(index) = matched {
            let mut request = request;
            request.extensions_mut().insert(MatchedToken(index));
            Ok(request)
        } else {
            Err(tp_proto::status::error(
                tp_registry::ErrorCode::Unauthenticated,
                format!("invalid {} token", self.what),
            ))
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Whether two digests are equal, in a time that does not depend on where they differ.
pub(crate) fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(header: Option<&str>) -> Request<()> {
        let mut request = Request::new(());
        if let Some(value) = header {
            request
                .metadata_mut()
                .insert("authorization", value.parse().unwrap());
        }
        request
    }

    #[test]
    fn tokens() {
        let check = TokenCheck::new("admin", &["secret-admin-token"]);
        assert!(
            check
                .check(request(Some("Bearer secret-admin-token")))
                .is_ok()
        );
        for bad in [
            None,
            Some("secret-admin-token"),
            Some("Bearer nope"),
            Some("Basic x"),
        ] {
            let status = check.check(request(bad)).unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
    }
}
