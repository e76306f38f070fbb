//! API key hashing, shared by the control plane (which stores hashes) and edges (which cache
//! identities by hash, never by key).

use sha2::{Digest, Sha256};

/// Prefix of every Toolplane API key, so secret scanners can recognise them.
pub const KEY_PREFIX: &str = "tpk_";

/// Hex SHA-256 of a key.
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Whether a string has the shape of a Toolplane key (cheap pre-check before any lookup).
pub fn looks_like_key(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX)
        .is_some_and(|rest| rest.len() == 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
