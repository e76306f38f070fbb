//! Connections' secrets, sealed by envelope encryption (ADR 0015).
//!
//! Each secret gets a data key of its own (256 random bits); AES-256-GCM seals the secret under
//! it, and the data key is wrapped (AES-256-GCM again) under a key-encryption key. Both seals
//! bind the connection (`tenant`, its incarnation, `provider`) as associated data, so a sealed
//! secret copied onto another connection does not open. Only the wrapped data key and the
//! ciphertext are stored; the key-encryption keys live in a file outside the store.
//!
//! [`KeyWrap`] is the plugin point for a KMS: it wraps and unwraps data keys and names the
//! key it used. [`KeyFile`] is the local one: a file of keys, one per line (base64 of 32
//! bytes, `#` comments), the first sealing new secrets and every one opening old ones — so a
//! key is rotated by putting a new first line, restarting the control planes one by one, and
//! removing the old line once `toolplanectl tenants connections` shows no secret sealed
//! under it. The same keys may come from an environment variable instead
//! ([`KeyFile::from_env`]: comma- or space-separated, the first sealing).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use sha2::{Digest, Sha256};
use tp_registry::Sealed;

/// Longest credential a connection takes, in bytes.
pub const MAX_CREDENTIAL: usize = 8192;

/// Wraps and unwraps data keys: a local key file, or a KMS.
pub trait KeyWrap: Send + Sync + std::fmt::Debug {
    /// Wraps `data_key` under the current key; returns that key's id and the wrapped bytes.
    fn wrap(&self, data_key: &[u8], aad: &[u8]) -> anyhow::Result<(String, Vec<u8>)>;
    /// Unwraps what [`KeyWrap::wrap`] returned under key `id`.
    fn unwrap(&self, id: &str, wrapped: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>>;
}

/// Key-encryption keys read from a file: the first seals, every one opens.
pub struct KeyFile {
    keys: Vec<(String, LessSafeKey)>,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("KeyFile").field("ids", &ids).finish()
    }
}

/// A key's id: the first 16 hex digits of SHA-256 over a label and the key (names the key,
/// tells nothing of it).
fn key_id(key: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"toolplane kek id\0");
    hash.update(key);
    hex::encode(&hash.finalize()[..8])
}

impl KeyFile {
    /// Reads `path`; when it does not exist and `generate` is set, writes a new key there
    /// (mode 0600) first.
    pub fn open(path: &Path, generate: bool) -> anyhow::Result<KeyFile> {
        if generate && !path.exists() {
            let key: [u8; 32] = rand::random();
            let text = format!(
                "# Toolplane connections' key-encryption keys: the first seals, all open.\n{}\n",
                B64.encode(key)
            );
            crate::files::write_private(path, &text)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        crate::files::warn_if_shared(path, "the connections' key file");
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading connections' keys from {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// Reads the keys from environment variable `name`: base64 keys separated by commas,
    /// spaces or newlines, the first sealing (rotated like the file's lines).
    pub fn from_env(name: &str) -> anyhow::Result<KeyFile> {
        let text = std::env::var(name).with_context(|| {
            format!("auth.connections_keys_env names {name:?}, which is not set (or not UTF-8)")
        })?;
        Self::parse_list(&text).with_context(|| format!("in ${name}"))
    }

    /// Keys separated by commas, spaces or newlines.
    fn parse_list(text: &str) -> anyhow::Result<KeyFile> {
        let lines = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|key| !key.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        Self::parse(&lines)
            .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace("line ", "key ")))
    }

    /// Keys from a file's text.
    pub fn parse(text: &str) -> anyhow::Result<KeyFile> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bytes = B64
                .decode(line)
                .ok()
                .filter(|bytes| bytes.len() == 32)
                .with_context(|| {
                    format!(
                        "line {}: a key is the base64 of 32 random bytes (openssl rand -base64 32)",
                        number + 1
                    )
                })?;
            let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| anyhow::anyhow!("line {}: unusable key", number + 1))?;
            keys.push((key_id(&bytes), LessSafeKey::new(unbound)));
        }
        if keys.is_empty() {
            bail!("no key: put the base64 of 32 random bytes on a line of its own");
        }
        Ok(KeyFile { keys })
    }
}

impl KeyWrap for KeyFile {
    fn wrap(&self, data_key: &[u8], aad: &[u8]) -> anyhow::Result<(String, Vec<u8>)> {
        let (id, key) = &self.keys[0];
        Ok((id.clone(), seal(key, data_key, aad)?))
    }

    fn unwrap(&self, id: &str, wrapped: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
        let Some((_, key)) = self.keys.iter().find(|(known, _)| known == id) else {
            bail!("the key {id:?} that sealed this secret is not among the connections' keys");
        };
        open(key, wrapped, aad)
    }
}

/// `plain` sealed under `key`: a random nonce, then the ciphertext and its tag.
fn seal(key: &LessSafeKey, plain: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
    let nonce: [u8; NONCE_LEN] = rand::random();
    let mut out = plain.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad),
        &mut out,
    )
    .map_err(|_| anyhow::anyhow!("sealing failed"))?;
    let mut sealed = nonce.to_vec();
    sealed.extend_from_slice(&out);
    Ok(sealed)
}

/// What [`seal`] made, opened; fails on any change to it or to `aad`.
fn open(key: &LessSafeKey, sealed: &[u8], aad: &[u8]) -> anyhow::Result<Vec<u8>> {
    if sealed.len() < NONCE_LEN {
        bail!("sealed data too short");
    }
    let (nonce, body) = sealed.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| anyhow::anyhow!("nonce"))?;
    let mut body = body.to_vec();
    let plain = key
        .open_in_place(nonce, Aad::from(aad), &mut body)
        .map_err(|_| {
            anyhow::anyhow!("the secret does not open: altered, or sealed for another connection")
        })?;
    Ok(plain.to_vec())
}

/// Seals and opens connections' secrets.
#[derive(Debug, Clone)]
pub struct Vault {
    wrap: Arc<dyn KeyWrap>,
}

/// What a secret is bound to.
fn binding(tenant: &str, tenant_uid: &str, provider: &str) -> Vec<u8> {
    format!("toolplane connection\0{tenant}\0{tenant_uid}\0{provider}").into_bytes()
}

impl Vault {
    /// A vault over `wrap`.
    pub fn new(wrap: Arc<dyn KeyWrap>) -> Vault {
        Vault { wrap }
    }

    /// `secret`, sealed for the connection of (`tenant`, `tenant_uid`, `provider`).
    pub fn seal(
        &self,
        secret: &str,
        tenant: &str,
        tenant_uid: &str,
        provider: &str,
    ) -> anyhow::Result<Sealed> {
        let aad = binding(tenant, tenant_uid, provider);
        let data_key: [u8; 32] = rand::random();
        let key = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &data_key).map_err(|_| anyhow::anyhow!("data key"))?,
        );
        let ciphertext = seal(&key, secret.as_bytes(), &aad)?;
        let (kek_id, wrapped) = self.wrap.wrap(&data_key, &aad)?;
        Ok(Sealed {
            kek_id,
            wrapped_key: B64.encode(wrapped),
            ciphertext: B64.encode(ciphertext),
        })
    }

    /// The secret `sealed` holds, if it was sealed for this connection.
    pub fn open(
        &self,
        sealed: &Sealed,
        tenant: &str,
        tenant_uid: &str,
        provider: &str,
    ) -> anyhow::Result<String> {
        let aad = binding(tenant, tenant_uid, provider);
        let wrapped = B64.decode(&sealed.wrapped_key).context("wrapped key")?;
        let data_key = self.wrap.unwrap(&sealed.kek_id, &wrapped, &aad)?;
        let key = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &data_key).map_err(|_| anyhow::anyhow!("data key"))?,
        );
        let ciphertext = B64.decode(&sealed.ciphertext).context("ciphertext")?;
        let plain = open(&key, &ciphertext, &aad)?;
        String::from_utf8(plain).context("the secret is not text")
    }
}

/// The first 12 hex digits of the credential's SHA-256.
pub fn fingerprint(secret: &str) -> String {
    hex::encode(&Sha256::digest(secret.as_bytes())[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault(text: &str) -> Vault {
        Vault::new(Arc::new(KeyFile::parse(text).unwrap()))
    }

    const K1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const K2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

    #[test]
    fn a_secret_opens_for_its_connection_only_and_is_not_in_what_is_stored() {
        let vault = vault(K1);
        let sealed = vault
            .seal("sk-live-secret", "acme", "u1", "google")
            .unwrap();
        let stored = serde_json::to_string(&sealed).unwrap();
        assert!(!stored.contains("sk-live-secret"), "{stored}");
        assert_eq!(
            vault.open(&sealed, "acme", "u1", "google").unwrap(),
            "sk-live-secret"
        );
        for (tenant, uid, provider) in [
            ("globex", "u1", "google"),
            ("acme", "u2", "google"),
            ("acme", "u1", "hubspot"),
        ] {
            assert!(vault.open(&sealed, tenant, uid, provider).is_err());
        }
        // Two seals of one secret differ (a data key and nonces of their own).
        let again = vault
            .seal("sk-live-secret", "acme", "u1", "google")
            .unwrap();
        assert_ne!(again.ciphertext, sealed.ciphertext);
        assert_ne!(again.wrapped_key, sealed.wrapped_key);
    }

    #[test]
    fn a_flipped_bit_or_a_missing_key_does_not_open() {
        let vault = vault(K1);
        let mut sealed = vault.seal("token", "acme", "u1", "google").unwrap();
        let mut bytes = B64.decode(&sealed.ciphertext).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        sealed.ciphertext = B64.encode(bytes);
        assert!(vault.open(&sealed, "acme", "u1", "google").is_err());
        let sealed = vault.seal("token", "acme", "u1", "google").unwrap();
        let error = self::vault(K2)
            .open(&sealed, "acme", "u1", "google")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not among the connections' keys"), "{error}");
    }

    #[test]
    fn a_rotated_file_seals_with_its_first_key_and_opens_with_every_key() {
        let old = vault(K1);
        let sealed_old = old.seal("token", "acme", "u1", "google").unwrap();
        let rotated = vault(&format!("# new first\n{K2}\n{K1}\n"));
        assert_eq!(
            rotated.open(&sealed_old, "acme", "u1", "google").unwrap(),
            "token"
        );
        let sealed_new = rotated.seal("token", "acme", "u1", "google").unwrap();
        assert_ne!(sealed_new.kek_id, sealed_old.kek_id);
        assert!(old.open(&sealed_new, "acme", "u1", "google").is_err());
    }

    #[test]
    fn keys_from_a_variable_are_separated_by_commas_or_spaces_and_the_first_seals() {
        let sealed = vault(K1).seal("token", "acme", "u1", "google").unwrap();
        let listed = KeyFile::parse_list(&format!(" {K2}, {K1}\n")).unwrap();
        let listed = Vault::new(Arc::new(listed));
        assert_eq!(
            listed.open(&sealed, "acme", "u1", "google").unwrap(),
            "token"
        );
        let resealed = listed.seal("token", "acme", "u1", "google").unwrap();
        assert_eq!(
            resealed.kek_id,
            vault(K2).seal("t", "a", "u", "p").unwrap().kek_id
        );
        let error = KeyFile::parse_list(&format!("{K1},c2hvcnQ="))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("key 2"), "{error}");
        assert!(KeyFile::parse_list(" , ").is_err());
    }

    #[test]
    fn a_key_file_without_a_usable_key_is_refused_with_the_line() {
        for text in ["", "# only a comment\n", "not base64!\n", "c2hvcnQ=\n"] {
            assert!(KeyFile::parse(text).is_err(), "{text:?}");
        }
        let error = KeyFile::parse("c2hvcnQ=\n").err().unwrap().to_string();
        assert!(error.contains("line 1"), "{error}");
    }
}
