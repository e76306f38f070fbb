//! Object-key confinement: an `r2_key` a caller passes must name an object under its own
//! tenant's `wiki/{tenant}/raw/` after normalisation. Anything that could climb out (`..`,
//! absolute paths, backslashes, percent-encoded separators or dots, empty segments, control
//! characters) or that names another tenant is refused before anything is read.

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("r2_key {key:?} is not an object under wiki/{tenant}/raw/: {reason}")]
pub struct KeyError {
    /// The key as given.
    pub key: String,
    /// The caller's tenant.
    pub tenant: String,
    /// Why.
    pub reason: &'static str,
}

/// Longest accepted key.
pub const MAX_KEY: usize = 1024;

/// The normalised key (`wiki/{tenant}/raw/...`) if `key` is confined to the tenant's raw
/// folder. A key may be given in full or relative to the raw folder.
pub fn confine(tenant: &str, key: &str) -> Result<String, KeyError> {
    let refuse = |reason| KeyError {
        key: key.to_owned(),
        tenant: tenant.to_owned(),
        reason,
    };
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(refuse("empty or too long"));
    }
    if key.chars().any(|c| c.is_control()) {
        return Err(refuse("control characters"));
    }
    if key.contains('\\') {
        return Err(refuse("backslashes"));
    }
    if key.contains('%') {
        // No percent-encoding at all: %2e%2e, %2f and friends are how traversal hides.
        return Err(refuse("percent-encoded characters"));
    }
    if key.starts_with('/') || key.contains("://") || key.starts_with('~') {
        return Err(refuse("absolute paths or URLs"));
    }
    let prefix = format!("wiki/{tenant}/raw/");
    let full = if key.starts_with("wiki/") {
        key.to_owned()
    } else {
        format!("{prefix}{key}")
    };
    for segment in full.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(refuse("empty, '.' or '..' segments"));
        }
    }
    if !full.starts_with(&prefix) || full.len() == prefix.len() {
        return Err(refuse("outside the tenant's raw folder"));
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn confined_keys() {
        assert_eq!(confine("acme", "abc.txt").unwrap(), "wiki/acme/raw/abc.txt");
        assert_eq!(
            confine("acme", "wiki/acme/raw/x/y.md").unwrap(),
            "wiki/acme/raw/x/y.md"
        );
        for bad in [
            "",
            "../globex/raw/x",
            "wiki/globex/raw/x",
            "wiki/acme/wiki/index.md",
            "wiki/acme/raw/../../globex/raw/x",
            "wiki/acme/raw/",
            "/etc/passwd",
            "wiki/acme/raw/%2e%2e/x",
            "wiki%2facme%2fraw%2fx",
            "wiki\\acme\\raw\\x",
            "wiki/acme/raw//x",
            "wiki/acme/raw/./x",
            "s3://bucket/wiki/acme/raw/x",
            "wiki/acme/raw/x\u{0}",
        ] {
            assert!(confine("acme", bad).is_err(), "{bad:?} must be refused");
        }
    }

    proptest! {
        // Whatever the key, an accepted one normalises under the tenant's raw folder and has
        // no segment that could climb out of it.
        #[test]
        fn accepted_keys_never_leave_the_tenant(key in "[a-z./%\\\\~:]{0,12}(wiki/)?(acme|globex)?/?(raw)?/?[a-z./%]{0,12}") {
            if let Ok(full) = confine("acme", &key) {
                prop_assert!(full.starts_with("wiki/acme/raw/"));
                prop_assert!(full.split('/').all(|s| !s.is_empty() && s != "." && s != ".."));
                prop_assert!(!full.contains('%') && !full.contains('\\'));
            }
        }
    }
}
