//! Executors authenticate the caller of their `Executor` service: every call carries, in the
//! `x-toolplane-signature` metadata, an HMAC-SHA256 over the method, a timestamp and the
//! SHA-256 of the request's protobuf encoding, under a key every edge of a fleet (and the
//! control plane, for purges) holds. An executor verifies it against the keys in its key file
//! and refuses anything else with `UNAUTHENTICATED` — so the trusted call context (tenant,
//! role, arguments) cannot be forged by whoever reaches the executor's port.
//!
//! - The key is derived from the fleet secret (the edge token) unless configured explicitly:
//!   `HMAC-SHA256(edge_token, "toolplane/executor-auth/v1")`, written `tpx_<64 hex>`. It cannot
//!   be turned back into the edge token, so an executor cannot act as an edge.
//! - Rotation: executors accept every key listed in their key file (one per line, re-read when
//!   it changes): add the new key there, move the edges to it, then remove the old one.
//! - The signature binds the whole request (prost's encoding is deterministic: fields in tag
//!   order, map entries sorted by key), so neither the context nor the arguments can be
//!   changed; it is valid for [`MAX_SKEW`] around its timestamp and, for a call that carries
//!   a deadline (`InvokeRequest.deadline_ms`, itself signed), not past that deadline plus
//!   [`DEADLINE_GRACE`].
//! - Replays: an executor remembers every signature it accepted until it would expire and
//!   refuses the same signature twice (`UNAUTHENTICATED`), so a captured call runs at most
//!   once per executor process, and only until its deadline anywhere.
//! - A key file that becomes empty, unreadable or is deleted refuses every call until it
//!   holds a key again: taking keys away never leaves the old ones in force.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use aws_lc_rs::hmac;

use crate::digest::{hex, sha256};
use prost::Message;

/// The metadata key of the signature.
pub const SIGNATURE_METADATA: &str = "x-toolplane-signature";
/// Prefix of an executor key's text form.
pub const KEY_PREFIX: &str = "tpx_";
/// How far a signature's timestamp may be from the executor's clock.
pub const MAX_SKEW: Duration = Duration::from_secs(300);
/// How long after a signed deadline a call is still taken (clock skew between edge and
/// executor).
pub const DEADLINE_GRACE: Duration = Duration::from_secs(2);
/// Most signatures remembered against replays; beyond it (after dropping the expired ones)
/// new calls are refused until some expire.
pub const MAX_REMEMBERED: usize = 1_000_000;
/// Label of the key derivation from the edge token.
const DERIVATION: &[u8] = b"toolplane/executor-auth/v1";

// HMAC-SHA256 is aws-lc's, as SHA-256 is ([`crate::digest`]).
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = hmac::Context::with_key(&hmac::Key::new(hmac::HMAC_SHA256, key));
    for part in parts {
        mac.update(part);
    }
    tag_bytes(&mac.sign())
}

/// A SHA-256 tag's 32 bytes.
fn tag_bytes(tag: &hmac::Tag) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(tag.as_ref());
    out
}

use crate::clock::now_ms;

/// A key that signs (edges, the control plane) or verifies (executors) executor calls.
#[derive(Clone)]
pub struct ExecutorKey {
    key: [u8; 32],
    kid: String,
    /// HMAC's key, its inner and outer pads hashed once, not per call.
    keyed: hmac::Key,
}

impl PartialEq for ExecutorKey {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.kid == other.kid
    }
}

impl Eq for ExecutorKey {}

impl std::fmt::Debug for ExecutorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// Why a call was refused (all `UNAUTHENTICATED`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No signature.
    #[error("the call is not signed (x-toolplane-signature missing)")]
    Missing,
    /// Not `v1;kid=…;t=…;sig=…`.
    #[error("the call's signature is malformed")]
    Malformed,
    /// Signed with a key this executor does not hold.
    #[error("the call is signed with an unknown key")]
    UnknownKey,
    /// The timestamp is too far from now.
    #[error("the call's signature is outside the allowed time window")]
    Stale,
    /// The signature does not match the request.
    #[error("the call's signature does not match")]
    Mismatch,
    /// The call's signed deadline has passed.
    #[error("the call's deadline has passed")]
    PastDeadline,
    /// This exact signed call was accepted before.
    #[error("the call was already accepted once (a replay)")]
    Replayed,
    /// No key is in force (the key file is empty, unreadable or gone).
    #[error("this executor holds no key: every call is refused until its key file holds one")]
    NoKeys,
    /// Too many signatures remembered against replays.
    #[error("too many calls in flight to check for replays; retry")]
    Busy,
}

impl tp_registry::HasErrorCode for VerifyError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            VerifyError::Missing
            | VerifyError::Malformed
            | VerifyError::UnknownKey
            | VerifyError::Stale
            | VerifyError::Mismatch
            | VerifyError::PastDeadline
            | VerifyError::Replayed
            | VerifyError::NoKeys => tp_registry::ErrorCode::Unauthenticated,
            VerifyError::Busy => tp_registry::ErrorCode::Unavailable,
        }
    }
}

impl From<VerifyError> for tonic::Status {
    fn from(error: VerifyError) -> tonic::Status {
        crate::status::status_of(&error)
    }
}

impl ExecutorKey {
    fn from_bytes(key: [u8; 32]) -> ExecutorKey {
        let kid = hex(&sha256(&[&key])[..4]);
        let keyed = hmac::Key::new(hmac::HMAC_SHA256, &key);
        ExecutorKey { key, kid, keyed }
    }

    /// The key every edge holding `edge_token` derives.
    pub fn derive(edge_token: &str) -> ExecutorKey {
        ExecutorKey::from_bytes(hmac(edge_token.as_bytes(), &[DERIVATION]))
    }

    /// A random key (for operators who want one unrelated to the edge token).
    pub fn generate() -> ExecutorKey {
        ExecutorKey::from_bytes(rand::random())
    }

    /// Parses `tpx_<64 hex>`.
    pub fn parse(text: &str) -> Result<ExecutorKey, String> {
        let hex_part = text
            .trim()
            .strip_prefix(KEY_PREFIX)
            .ok_or_else(|| format!("an executor key looks like {KEY_PREFIX}<64 hex digits>"))?;
        let mut key = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut key)
            .map_err(|_| format!("an executor key looks like {KEY_PREFIX}<64 hex digits>"))?;
        Ok(ExecutorKey::from_bytes(key))
    }

    /// The text form, `tpx_<64 hex>`.
    pub fn encode(&self) -> String {
        format!("{KEY_PREFIX}{}", hex(&self.key))
    }

    /// A short public id of the key (in signatures and logs).
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The HMAC over what a signature covers.
    fn mac(&self, method: &str, at_ms: u64, digest: &[u8]) -> [u8; 32] {
        let mut mac = hmac::Context::with_key(&self.keyed);
        let mut at = itoa::Buffer::new();
        for part in [
            b"toolplane-executor-call/v1\n".as_slice(),
            method.as_bytes(),
            b"\n",
            at.format(at_ms).as_bytes(),
            b"\n",
            digest,
        ] {
            mac.update(part);
        }
        tag_bytes(&mac.sign())
    }

    /// The signature of a call of `method` (e.g. `Invoke`) with `request`, made now.
    pub fn sign(&self, method: &str, request: &impl Message) -> String {
        self.sign_at(method, request, now_ms())
    }

    /// [`ExecutorKey::sign`] at a given time.
    pub fn sign_at(&self, method: &str, request: &impl Message, at_ms: u64) -> String {
        let digest = request_digest(request);
        format!(
            "v1;kid={};t={at_ms};sig={}",
            self.kid,
            hex(&self.mac(method, at_ms, &digest))
        )
    }

    /// Adds the signature of `request` to a tonic request's metadata.
    pub fn sign_request<T: Message>(&self, method: &str, request: &mut tonic::Request<T>) {
        let signature = self.sign(method, request.get_ref());
        if let Ok(value) = signature.parse() {
            request.metadata_mut().insert(SIGNATURE_METADATA, value);
        }
    }
}

/// Label of the derivation of the credential-sealing key from an executor key.
const SEAL_DERIVATION: &[u8] = b"toolplane/credential-seal/v1";

/// What a sealed credential is bound to: the call's tenant, tool and request id.
fn seal_binding(request: &crate::pb::InvokeRequest, not_after_ms: u64) -> Vec<u8> {
    let mut binding = Vec::new();
    for part in [&request.tenant, &request.tool, &request.request_id] {
        binding.extend_from_slice(part.as_bytes());
        binding.push(0);
    }
    binding.extend_from_slice(&not_after_ms.to_be_bytes());
    binding
}

fn seal_key(key: &[u8; 32]) -> aws_lc_rs::aead::LessSafeKey {
    let derived = hmac(key, &[SEAL_DERIVATION]);
    let unbound = aws_lc_rs::aead::UnboundKey::new(&aws_lc_rs::aead::AES_256_GCM, &derived)
        .unwrap_or_else(|_| unreachable!("32 bytes make an AES-256 key"));
    aws_lc_rs::aead::LessSafeKey::new(unbound)
}

impl ExecutorKey {
    /// Seals `request`'s credential to this key (ADR 0015): the token moves into `sealed`
    /// (`kid`, NUL, the deadline as 8 bytes, a nonce, the ciphertext), bound to the request's
    /// tenant, tool and request id and valid until its deadline. Call before signing.
    pub fn seal_credential(&self, request: &mut crate::pb::InvokeRequest) {
        use aws_lc_rs::aead::{Aad, NONCE_LEN, Nonce};
        let not_after = request.deadline_ms;
        let binding = seal_binding(request, not_after);
        let Some(credential) = request.credential.as_mut() else {
            return;
        };
        if credential.token.is_empty() {
            return;
        }
        let nonce: [u8; NONCE_LEN] = rand::random();
        let mut body = std::mem::take(&mut credential.token).into_bytes();
        if seal_key(&self.key)
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(binding.as_slice()),
                &mut body,
            )
            .is_err()
        {
            // Nothing is sent rather than the token in clear.
            body.clear();
        }
        let mut sealed = self.kid.as_bytes().to_vec();
        sealed.push(0);
        sealed.extend_from_slice(&not_after.to_be_bytes());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&body);
        credential.sealed = sealed;
    }
}

/// Opens what [`ExecutorKey::seal_credential`] sealed into `request`, with one of `keys`.
pub fn open_credential(
    keys: &[ExecutorKey],
    request: &crate::pb::InvokeRequest,
    now_ms: u64,
) -> Result<Option<String>, VerifyError> {
    use aws_lc_rs::aead::{Aad, NONCE_LEN, Nonce};
    let Some(credential) = request.credential.as_ref() else {
        return Ok(None);
    };
    let sealed = credential.sealed.as_slice();
    let split = sealed
        .iter()
        .position(|b| *b == 0)
        .ok_or(VerifyError::Malformed)?;
    let (kid, rest) = (&sealed[..split], &sealed[split + 1..]);
    if rest.len() < 8 + NONCE_LEN {
        return Err(VerifyError::Malformed);
    }
    let (not_after, rest) = rest.split_at(8);
    let not_after = u64::from_be_bytes(not_after.try_into().map_err(|_| VerifyError::Malformed)?);
    let (nonce, body) = rest.split_at(NONCE_LEN);
    let key = keys
        .iter()
        .find(|k| k.kid.as_bytes() == kid)
        .ok_or(VerifyError::UnknownKey)?;
    if not_after != 0 && now_ms > not_after + u64::try_from(DEADLINE_GRACE.as_millis()).unwrap_or(0)
    {
        return Err(VerifyError::PastDeadline);
    }
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| VerifyError::Malformed)?;
    let binding = seal_binding(request, not_after);
    let mut body = body.to_vec();
    let plain = seal_key(&key.key)
        .open_in_place(nonce, Aad::from(binding.as_slice()), &mut body)
        .map_err(|_| VerifyError::Mismatch)?;
    String::from_utf8(plain.to_vec())
        .map(Some)
        .map_err(|_| VerifyError::Malformed)
}

fn request_digest(request: &impl Message) -> [u8; 32] {
    sha256(&[&request.encode_to_vec()])
}

/// A signature that verified: when it was made, and its MAC (what replays are told apart by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    /// The signature's timestamp, Unix milliseconds.
    pub at_ms: u64,
    /// The HMAC-SHA-256 the signature carried (a replay cache keys on it).
    pub mac: [u8; 32],
}

/// Verifies `signature` (the metadata value) for a call of `method` with `request` at `now_ms`
/// against `keys`.
pub fn verify(
    keys: &[ExecutorKey],
    method: &str,
    signature: Option<&str>,
    request: &impl Message,
    now_ms: u64,
) -> Result<Verified, VerifyError> {
    let signature = signature.ok_or(VerifyError::Missing)?;
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let mut kid = None;
    let mut at = None;
    let mut sig = None;
    let mut parts = signature.split(';');
    if parts.next() != Some("v1") {
        return Err(VerifyError::Malformed);
    }
    for part in parts {
        match part.split_once('=') {
            Some(("kid", value)) => kid = Some(value),
            Some(("t", value)) => at = value.parse::<u64>().ok(),
            Some(("sig", value)) => {
                let mut bytes = [0u8; 32];
                hex::decode_to_slice(value, &mut bytes).map_err(|_| VerifyError::Malformed)?;
                sig = Some(bytes);
            }
            _ => return Err(VerifyError::Malformed),
        }
    }
    let (Some(kid), Some(at), Some(sig)) = (kid, at, sig) else {
        return Err(VerifyError::Malformed);
    };
    let key = keys
        .iter()
        .find(|k| k.kid == kid)
        .ok_or(VerifyError::UnknownKey)?;
    let skew = u64::try_from(MAX_SKEW.as_millis()).unwrap_or(u64::MAX);
    if at.abs_diff(now_ms) > skew {
        return Err(VerifyError::Stale);
    }
    let digest = request_digest(request);
    // Constant-time comparison.
    aws_lc_rs::constant_time::verify_slices_are_equal(&key.mac(method, at, &digest), &sig)
        .map_err(|_| VerifyError::Mismatch)?;
    Ok(Verified {
        at_ms: at,
        mac: sig,
    })
}

/// A request whose signature may be bound to a deadline it carries.
pub trait SignedCall: Message {
    /// The call's signed deadline, Unix milliseconds; 0 = none.
    fn deadline_ms(&self) -> u64 {
        0
    }
}

impl SignedCall for crate::pb::InvokeRequest {
    fn deadline_ms(&self) -> u64 {
        self.deadline_ms
    }
}

impl SignedCall for crate::pb::PurgeTenantRequest {}

/// Signatures accepted and not yet expired: a second call with one of them is a replay.
#[derive(Debug, Default)]
pub struct SeenSignatures {
    inner: Mutex<SeenInner>,
}

#[derive(Debug, Default)]
struct SeenInner {
    /// MAC → until when the signature could be accepted (Unix ms).
    expiry: std::collections::HashMap<[u8; 32], u64>,
    /// Size after the last sweep of expired entries (the next sweep is due at twice that).
    swept_at: usize,
}

impl SeenSignatures {
    /// Records `verified` (valid until `until_ms`) at `now_ms`; refuses a signature seen before.
    pub fn admit(&self, verified: Verified, until_ms: u64, now_ms: u64) -> Result<(), VerifyError> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.expiry.len() >= inner.swept_at.max(1024) * 2
            || inner.expiry.len() >= MAX_REMEMBERED
        {
            inner.expiry.retain(|_, until| *until >= now_ms);
            inner.swept_at = inner.expiry.len();
        }
        match inner.expiry.get(&verified.mac) {
            Some(until) if *until >= now_ms => return Err(VerifyError::Replayed),
            _ => {}
        }
        if inner.expiry.len() >= MAX_REMEMBERED {
            return Err(VerifyError::Busy);
        }
        inner.expiry.insert(verified.mac, until_ms);
        Ok(())
    }
}

/// Until when a call signed at `at_ms` with `deadline_ms` (0 = none) may be accepted; `Err`
/// once that has passed at `now_ms`.
fn valid_until(at_ms: u64, deadline_ms: u64, now_ms: u64) -> Result<u64, VerifyError> {
    let skew = u64::try_from(MAX_SKEW.as_millis()).unwrap_or(u64::MAX);
    let grace = u64::try_from(DEADLINE_GRACE.as_millis()).unwrap_or(u64::MAX);
    let mut until = at_ms.saturating_add(skew);
    if deadline_ms > 0 {
        until = until.min(deadline_ms.saturating_add(grace));
        if now_ms > until {
            return Err(VerifyError::PastDeadline);
        }
    }
    Ok(until)
}

/// The keys an executor accepts, read from a file (one `tpx_…` key per line, `#` comments) and
/// read again when the file changes, so keys rotate without a restart.
#[derive(Debug)]
pub struct KeyFile {
    path: PathBuf,
    state: Mutex<KeyFileState>,
}

#[derive(Debug)]
struct KeyFileState {
    keys: Vec<ExecutorKey>,
    modified: Option<SystemTime>,
    checked: Instant,
}

/// How often the key file's modification time is looked at.
const RECHECK: Duration = Duration::from_secs(1);

/// Parses a key file's text.
pub fn parse_keys(text: &str) -> Result<Vec<ExecutorKey>, String> {
    let keys = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(ExecutorKey::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if keys.is_empty() {
        return Err("the key file holds no key".into());
    }
    Ok(keys)
}

impl KeyFile {
    /// Reads `path` (it must hold at least one key).
    pub fn open(path: &Path) -> Result<KeyFile, String> {
        let (keys, modified) = Self::read(path)?;
        Ok(KeyFile {
            path: path.to_path_buf(),
            state: Mutex::new(KeyFileState {
                keys,
                modified,
                checked: Instant::now(),
            }),
        })
    }

    fn read(path: &Path) -> Result<(Vec<ExecutorKey>, Option<SystemTime>), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the key file {}: {e}", path.display()))?;
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let keys = parse_keys(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok((keys, modified))
    }

    /// The keys in force (the file is read again when it changed). A file that became
    /// empty, unreadable or was deleted leaves no key in force — every call is refused until
    /// it holds one again — and says so in the log.
    pub fn keys(&self) -> Vec<ExecutorKey> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= RECHECK {
            state.checked = Instant::now();
            let modified = std::fs::metadata(&self.path)
                .and_then(|m| m.modified())
                .ok();
            if modified != state.modified || modified.is_none() {
                match Self::read(&self.path) {
                    Ok((keys, modified)) => {
                        tracing::info!(
                            keys = keys.len(),
                            path = %self.path.display(),
                            "executor keys reloaded"
                        );
                        state.keys = keys;
                        state.modified = modified;
                    }
                    Err(error) => {
                        if !state.keys.is_empty() {
                            tracing::error!(%error, "executor key file unusable: refusing every call until it holds a key");
                        }
                        state.keys.clear();
                        state.modified = modified;
                    }
                }
            }
        }
        state.keys.clone()
    }
}

/// How an executor authenticates the callers of its `Executor` service.
#[derive(Debug, Clone)]
pub struct CallerAuth {
    keys: Keys,
    seen: std::sync::Arc<SeenSignatures>,
}

#[derive(Debug, Clone)]
enum Keys {
    /// Keys from a file, read again when it changes (production).
    File(std::sync::Arc<KeyFile>),
    /// Fixed keys (in-process launchers such as `toolplane up`).
    Fixed(Vec<ExecutorKey>),
    /// No check at all: only for an executor reachable by nothing but its edges, when the
    /// operator says so explicitly (`--allow-unsigned`).
    Unsigned,
}

impl CallerAuth {
    /// Fixed keys (in-process launchers such as `toolplane up`).
    pub fn keys(keys: Vec<ExecutorKey>) -> CallerAuth {
        CallerAuth::with(Keys::Fixed(keys))
    }

    /// Keys from a file, read again when it changes.
    pub fn file(file: KeyFile) -> CallerAuth {
        CallerAuth::with(Keys::File(std::sync::Arc::new(file)))
    }

    /// No check at all (`--allow-unsigned`).
    pub fn unsigned() -> CallerAuth {
        CallerAuth::with(Keys::Unsigned)
    }

    fn with(keys: Keys) -> CallerAuth {
        CallerAuth {
            keys,
            seen: std::sync::Arc::default(),
        }
    }

    /// Refuses (`UNAUTHENTICATED`) a call of `method` whose signature does not verify, whose
    /// signed deadline has passed, or that was accepted once already.
    pub fn check<T: SignedCall>(
        &self,
        method: &str,
        request: &tonic::Request<T>,
    ) -> Result<(), tonic::Status> {
        self.check_at(method, request, now_ms()).map_err(|error| {
            metrics::counter!("tp_executor_calls_refused_total").increment(1);
            crate::status::status_of(&error)
        })
    }

    fn check_at<T: SignedCall>(
        &self,
        method: &str,
        request: &tonic::Request<T>,
        now_ms: u64,
    ) -> Result<(), VerifyError> {
        let keys = match &self.keys {
            Keys::File(file) => file.keys(),
            Keys::Fixed(keys) => keys.clone(),
            Keys::Unsigned => return Ok(()),
        };
        let signature = request
            .metadata()
            .get(SIGNATURE_METADATA)
            .and_then(|v| v.to_str().ok());
        let call = request.get_ref();
        let verified = verify(&keys, method, signature, call, now_ms)?;
        let until = valid_until(verified.at_ms, call.deadline_ms(), now_ms)?;
        self.seen.admit(verified, until, now_ms)
    }

    /// The tenant's credential `request` carries, opened with this executor's keys (`None`
    /// when it carries none). Refused when it was sealed for another call or key, or its
    /// deadline has passed; an unsigned executor holds no key to open one with.
    pub fn credential(
        &self,
        request: &crate::pb::InvokeRequest,
    ) -> Result<Option<String>, tonic::Status> {
        let keys = match &self.keys {
            Keys::File(file) => file.keys(),
            Keys::Fixed(keys) => keys.clone(),
            Keys::Unsigned => Vec::new(),
        };
        open_credential(&keys, request, now_ms()).map_err(|error| crate::status::status_of(&error))
    }

    /// From an executor binary's flags: `--auth-key-file` (preferred: re-read when it
    /// changes), `--auth-key` (keys in the text, e.g. from a secret in the environment), or
    /// `--allow-unsigned`; none of them is an error that says how to get a key.
    pub fn from_flags(
        key_file: Option<&Path>,
        keys: Option<&str>,
        allow_unsigned: bool,
    ) -> Result<CallerAuth, String> {
        match (key_file, keys, allow_unsigned) {
            (Some(path), _, _) => Ok(CallerAuth::file(KeyFile::open(path)?)),
            (None, Some(text), _) => Ok(CallerAuth::keys(parse_keys(
                &text.replace([',', ' '], "\n"),
            )?)),
            (None, None, true) => Ok(CallerAuth::unsigned()),
            (None, None, false) => Err(
                "--auth-key-file or --auth-key is required: the executor must check that calls come from the fleet's edges (`toolplanectl executor-key` prints the key the edges sign with; --allow-unsigned turns the check off)".into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    fn request(tenant: &str) -> pb::InvokeRequest {
        pb::InvokeRequest {
            tool: "client_wiki".into(),
            tenant: tenant.into(),
            role: "collector".into(),
            ..Default::default()
        }
    }

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_signed_call_verifies_and_nothing_else_does() {
        let key = ExecutorKey::derive("an-edge-token-long-enough");
        let other = ExecutorKey::generate();
        let now = 1_800_000_000_000;
        let good = key.sign_at("Invoke", &request("acme"), now);
        assert_eq!(
            verify(
                &[other.clone(), key.clone()],
                "Invoke",
                Some(&good),
                &request("acme"),
                now
            )
            .map(|v| v.at_ms),
            Ok(now)
        );
        // Another tenant in the body, another method, another key, a stale or missing one.
        assert_eq!(
            verify(
                std::slice::from_ref(&key),
                "Invoke",
                Some(&good),
                &request("globex"),
                now
            ),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(
                std::slice::from_ref(&key),
                "PurgeTenant",
                Some(&good),
                &request("acme"),
                now
            ),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(&[other], "Invoke", Some(&good), &request("acme"), now),
            Err(VerifyError::UnknownKey)
        );
        let late = now + u64::try_from(MAX_SKEW.as_millis()).unwrap() + 1;
        assert_eq!(
            verify(
                std::slice::from_ref(&key),
                "Invoke",
                Some(&good),
                &request("acme"),
                late
            ),
            Err(VerifyError::Stale)
        );
        assert_eq!(
            verify(
                std::slice::from_ref(&key),
                "Invoke",
                None,
                &request("acme"),
                now
            ),
            Err(VerifyError::Missing)
        );
        for bad in [
            "",
            "v2;kid=x;t=1;sig=00",
            "v1;kid=x",
            "v1;kid=x;t=1;sig=zz",
            "v1;what=1",
        ] {
            assert!(
                verify(
                    std::slice::from_ref(&key),
                    "Invoke",
                    Some(bad),
                    &request("acme"),
                    now
                )
                .is_err(),
                "{bad}"
            );
        }
    }

    fn signed(
        key: &ExecutorKey,
        call: pb::InvokeRequest,
        at: u64,
    ) -> tonic::Request<pb::InvokeRequest> {
        let signature = key.sign_at("Invoke", &call, at);
        let mut request = tonic::Request::new(call);
        request
            .metadata_mut()
            .insert(SIGNATURE_METADATA, signature.parse().unwrap());
        request
    }

    #[test]
    fn a_call_runs_once_and_not_past_its_deadline() {
        let key = ExecutorKey::derive("an-edge-token-long-enough");
        let auth = CallerAuth::keys(vec![key.clone()]);
        let now = 1_800_000_000_000;
        let call = pb::InvokeRequest {
            deadline_ms: now + 10_000,
            ..request("acme")
        };
        assert_eq!(
            auth.check_at("Invoke", &signed(&key, call.clone(), now), now),
            Ok(())
        );
        // The same signed call again, on the same executor: a replay.
        assert_eq!(
            auth.check_at("Invoke", &signed(&key, call.clone(), now), now + 5),
            Err(VerifyError::Replayed)
        );
        // Signed a moment later: a new call (the edge's own retry).
        assert_eq!(
            auth.check_at("Invoke", &signed(&key, call.clone(), now + 1), now + 5),
            Ok(())
        );
        // Past its signed deadline (and the grace), refused even if never seen.
        let grace = u64::try_from(DEADLINE_GRACE.as_millis()).unwrap();
        assert_eq!(
            auth.check_at(
                "Invoke",
                &signed(&key, call, now + 2),
                now + 10_000 + grace + 1
            ),
            Err(VerifyError::PastDeadline)
        );
        // No key in force: every call refused.
        let empty = CallerAuth::keys(Vec::new());
        assert_eq!(
            empty.check_at("Invoke", &signed(&key, request("acme"), now), now),
            Err(VerifyError::NoKeys)
        );
    }

    #[test]
    fn an_emptied_or_deleted_key_file_refuses_every_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        let key = ExecutorKey::generate();
        std::fs::write(&path, key.encode()).unwrap();
        let file = KeyFile::open(&path).unwrap();
        let due = |file: &KeyFile| {
            let mut state = file.state.lock().unwrap();
            state.checked -= RECHECK;
            state.modified = None;
        };
        assert_eq!(file.keys().len(), 1);
        std::fs::write(&path, "# rotated away\n").unwrap();
        due(&file);
        assert!(file.keys().is_empty(), "an emptied file keeps no key");
        std::fs::write(&path, key.encode()).unwrap();
        due(&file);
        assert_eq!(file.keys().len(), 1);
        std::fs::remove_file(&path).unwrap();
        due(&file);
        assert!(file.keys().is_empty(), "a deleted file keeps no key");
    }

    #[test]
    fn keys_round_trip_and_derivation_is_stable() {
        let key = ExecutorKey::derive("token-one-long-enough");
        assert_eq!(ExecutorKey::parse(&key.encode()).unwrap(), key);
        assert_eq!(ExecutorKey::derive("token-one-long-enough"), key);
        assert_ne!(ExecutorKey::derive("token-two-long-enough"), key);
        assert!(ExecutorKey::parse("tpx_12").is_err());
        assert!(ExecutorKey::parse("nope").is_err());
        let text = format!(
            "# current\n{}\n\n{}\n",
            key.encode(),
            ExecutorKey::generate().encode()
        );
        assert_eq!(parse_keys(&text).unwrap().len(), 2);
        assert!(parse_keys("# nothing\n").is_err());
    }
}

#[cfg(test)]
mod seal_tests {
    use super::*;
    use crate::pb;

    fn request(token: &str) -> pb::InvokeRequest {
        pb::InvokeRequest {
            tool: "crm_echo".into(),
            tenant: "acme".into(),
            request_id: "r1".into(),
            deadline_ms: 10_000,
            credential: Some(pb::ProviderCredential {
                provider: "crm".into(),
                token: token.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_sealed_credential_opens_for_its_call_and_key_only_until_its_deadline() {
        let key = ExecutorKey::generate();
        let mut sealed = request("sk-tenant-secret");
        key.seal_credential(&mut sealed);
        let credential = sealed.credential.as_ref().unwrap();
        assert!(credential.token.is_empty());
        let wire = sealed.encode_to_vec();
        assert!(
            !wire.windows(16).any(|w| w == b"sk-tenant-secret"),
            "the token is not on the wire"
        );
        let keys = [ExecutorKey::generate(), key.clone()];
        assert_eq!(
            open_credential(&keys, &sealed, 9_000).unwrap().as_deref(),
            Some("sk-tenant-secret")
        );
        // Another call (request id, tenant or tool), another key, or past the deadline.
        for change in [
            |r: &mut pb::InvokeRequest| r.request_id = "r2".into(),
            |r: &mut pb::InvokeRequest| r.tenant = "globex".into(),
            |r: &mut pb::InvokeRequest| r.tool = "other".into(),
        ] {
            let mut moved = sealed.clone();
            change(&mut moved);
            assert!(matches!(
                open_credential(&keys, &moved, 9_000),
                Err(VerifyError::Mismatch)
            ));
        }
        assert!(matches!(
            open_credential(&[ExecutorKey::generate()], &sealed, 9_000),
            Err(VerifyError::UnknownKey)
        ));
        assert!(matches!(
            open_credential(&keys, &sealed, 10_000 + 2_001),
            Err(VerifyError::PastDeadline)
        ));
        // A request without a credential carries none.
        let mut plain = request("");
        plain.credential = None;
        key.seal_credential(&mut plain);
        assert_eq!(open_credential(&keys, &plain, 9_000).unwrap(), None);
    }
}
