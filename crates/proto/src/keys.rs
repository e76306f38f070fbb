//! API key hashing, shared by the control plane (which stores hashes) and edges (which cache
//! identities by hash, never by key).

/// Prefix of every Toolplane API key, so secret scanners can recognise them.
pub const KEY_PREFIX: &str = "tpk_";

/// The credential of an `Authorization` header value in the Bearer scheme: the scheme's name
/// matched without regard to case (RFC 9110 §11.1: `bearer`, `BEARER` and `Bearer` are one
/// scheme), the credential with surrounding whitespace trimmed; `None` for another scheme.
/// Every Toolplane process reads bearer credentials through this.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, credential) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credential.trim())
}

/// Hex SHA-256 of a key.
pub fn hash(key: &str) -> String {
    crate::digest::hex(&crate::digest::sha256(&[key.as_bytes()]))
}

/// Whether a string has the shape of a Toolplane key (cheap pre-check before any lookup).
pub fn looks_like_key(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX)
        .is_some_and(|rest| rest.len() == 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Longest access token accepted (bytes).
pub const MAX_TOKEN_BYTES: usize = 8192;

/// Whether a string has the shape of a signed JWT: three base64url segments, none empty
/// (an unsigned `alg: none` token has an empty third one), at most [`MAX_TOKEN_BYTES`].
pub fn looks_like_jwt(token: &str) -> bool {
    let segments: Vec<&str> = token.split('.').collect();
    token.len() <= MAX_TOKEN_BYTES
        && segments.len() == 3
        && segments.iter().all(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Whether a bearer credential is worth looking up: an API key or a signed JWT.
pub fn looks_like_credential(credential: &str) -> bool {
    looks_like_key(credential) || looks_like_jwt(credential)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case_and_nothing_else_is() {
        assert_eq!(super::bearer("Bearer tpk_abc"), Some("tpk_abc"));
        assert_eq!(super::bearer("bearer  tpk_abc "), Some("tpk_abc"));
        assert_eq!(super::bearer("BEARER tpk_abc"), Some("tpk_abc"));
        assert_eq!(super::bearer("Bearer "), Some(""));
        assert_eq!(super::bearer("Basic dXNlcjpwYXNz"), None);
        assert_eq!(super::bearer("Bearertpk_abc"), None);
        assert_eq!(super::bearer("Bearer"), None);
        assert_eq!(super::bearer(""), None);
    }

    #[test]
    fn jwt_shapes() {
        assert!(looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a.b+.c"));
        assert!(!looks_like_jwt(&format!(
            "a.{}.c",
            "b".repeat(MAX_TOKEN_BYTES)
        )));
        assert!(looks_like_credential(&format!(
            "{KEY_PREFIX}{}",
            "ab".repeat(32)
        )));
    }

    #[test]
    fn shapes_and_hashes() {
        let key = format!("{KEY_PREFIX}{}", "ab".repeat(32));
        assert!(looks_like_key(&key));
        assert!(!looks_like_key("tpk_short"));
        assert!(!looks_like_key(&key.replace("tpk_", "xyz_")));
        assert_eq!(hash("abc").len(), 64);
        assert_ne!(hash("abc"), hash("abd"));
    }
}
