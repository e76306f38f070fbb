//! The acceptance rules of the Streamable HTTP transport, for every protocol version, in one
//! place: the media types a POST must accept and carry ([`media`]), and for each JSON-RPC
//! message the protocol version it is served as, or why it is refused ([`admit`]) — the
//! `MCP-Protocol-Version` header, the per-request version and capabilities in `_meta`
//! (2026-07-28), and the SEP-2243 `Mcp-Method` / `Mcp-Name` headers that must repeat the body.
//!
//! The rules are rmcp's transport's (3.11), which the edge ran until it served MCP itself
//! (ADR 0011), with the same codes, statuses and messages; `tests/transport_rules.rs` holds
//! the recorded answers. `Mcp-Param-*` headers are checked later, against the caller's own
//! tool, by the call pipeline: only it knows per-tenant tools.

use axum::http::HeaderValue;

use super::heads::{Heads, Seen};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::ProtocolVersion;
use std::borrow::Cow;

use serde_json::{Map, Value};
use tp_proto::Fault;

use crate::error::{Answering, Error};

pub use super::pages::Generation;

pub use super::heads::{METHOD, NAME, PROTOCOL_VERSION};

/// The `_meta` key of a request's own protocol version (2026-07-28).
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key of a request's client capabilities (2026-07-28).
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The first version whose requests repeat their method (and target) in headers, and carry
/// their own version and capabilities in `_meta`.
pub(crate) const CURRENT: &str = "2026-07-28";

const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// Why a request is refused before any method sees it.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// Refused at the HTTP level: no JSON-RPC message was read, or the version header says
    /// none can be.
    Http(Error),
    /// A JSON-RPC error answering `id` (`Null` for a notification: then as
    /// [`Error`]'s `into_response`), with the status the table gives a request the transport
    /// refuses.
    JsonRpc(Value, Error),
}

impl Refused {
    /// `error` answering `id`: in JSON-RPC when its row has a code, else at the HTTP level.
    pub fn answering(id: &Value, error: Error) -> Refused {
        if error.fault().jsonrpc().is_some() {
            Refused::JsonRpc(id.clone(), error)
        } else {
            Refused::Http(error)
        }
    }

    fn header_mismatch(id: &Value, message: String) -> Refused {
        Refused::JsonRpc(id.clone(), Error::new(Fault::HeaderMismatch, message))
    }

    fn invalid_request(id: &Value, message: impl Into<Cow<'static, str>>) -> Refused {
        Refused::JsonRpc(id.clone(), Error::invalid_request(message))
    }

    fn bad_version_header(message: impl Into<Cow<'static, str>>) -> Refused {
        Refused::Http(Error::new(Fault::BadVersionHeader, message))
    }

    /// The error, whichever way it travels.
    pub fn error(&self) -> &Error {
        match self {
            Refused::Http(error) | Refused::JsonRpc(_, error) => error,
        }
    }

    /// The HTTP answer.
    pub fn into_response(self) -> axum::response::Response {
        use axum::response::IntoResponse as _;
        match self {
            Refused::Http(error) => error.into_response(),
            Refused::JsonRpc(id, error) if !id.is_null() => error.answer(&id, Answering::Request),
            Refused::JsonRpc(_, error) => error.into_response(),
        }
    }
}

/// A POST's media types: it must accept both JSON and SSE (406 otherwise; an entry weighted
/// `q=0` is not accepted, a malformed weight is ignored) and carry JSON (415).
pub fn media(heads: &Heads) -> Result<(), Refused> {
    // Repeated `Accept` lines come joined into one list (`Heads`).
    let (json, sse) = heads
        .accept
        .first()
        .and_then(|value| value.to_str().ok())
        .map_or((false, false), accepted);
    if !json || !sse {
        return Err(Refused::Http(Error::new(
            Fault::NotAcceptable,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        )));
    }
    if !is_json(heads) {
        return Err(Refused::Http(Error::new(
            Fault::UnsupportedMediaType,
            "Unsupported Media Type: Content-Type must be application/json",
        )));
    }
    Ok(())
}

/// Whether an `Accept` list takes JSON, and SSE.
fn accepted(value: &str) -> (bool, bool) {
    // What the official SDKs send, compared whole.
    if value.as_bytes() == b"application/json, text/event-stream" {
        return (true, true);
    }
    let (mut json, mut sse) = (false, false);
    // What clients send: plain media types, no parameters to weigh or quotes to skip.
    if !value.bytes().any(|b| b == b';' || b == b'"') {
        for essence in value.as_bytes().split(|&b| b == b',') {
            let essence = essence.trim_ascii();
            json |= essence.eq_ignore_ascii_case(b"application/json");
            sse |= essence.eq_ignore_ascii_case(b"text/event-stream");
        }
        return (json, sse);
    }
    for entry in split_unquoted(value, ',') {
        let mut parts = split_unquoted(entry, ';');
        let essence = parts.next().unwrap_or("").trim();
        let weighted_out = parts.any(|parameter| {
            parameter.split_once('=').is_some_and(|(name, value)| {
                name.trim().eq_ignore_ascii_case("q") && !quality_is_acceptable(value.trim())
            })
        });
        if !weighted_out {
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    (json, sse)
}

/// Whether `Accept` takes `text/event-stream` (a GET stream's one requirement).
pub fn accepts_sse(heads: &Heads) -> bool {
    heads
        .accept
        .first()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

/// Whether the body is JSON: the media type's essence, parameters aside.
pub fn is_json(heads: &Heads) -> bool {
    heads.content_type.first().is_some_and(|v| {
        let v = v.as_bytes();
        if v == b"application/json" {
            return true;
        }
        let essence = v.iter().position(|&b| b == b';').map_or(v, |end| &v[..end]);
        essence
            .trim_ascii()
            .eq_ignore_ascii_case(b"application/json")
    })
}

/// `value` split at `delimiter` outside double quotes.
fn split_unquoted(value: &str, delimiter: char) -> impl Iterator<Item = &str> {
    let (mut quoted, mut escaped) = (false, false);
    value.split(move |c| {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if !quoted && c == delimiter {
            return true;
        }
        false
    })
}

/// RFC 9110 §12.4.2: only an explicit zero weight excludes a media range; a weight outside
/// the grammar (more than three decimals, not digits) is ignored.
fn quality_is_acceptable(quality: &str) -> bool {
    let (whole, fraction) = quality.split_once('.').unwrap_or((quality, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|d| d.is_ascii_digit()) {
        return true;
    }
    whole != "0" || fraction.bytes().any(|d| d != b'0')
}

/// What [`admit`] reads of a message's params: a top-level string (a method's target, an
/// `initialize`'s version), and `_meta`'s version and capabilities: the envelope's one-level
/// view of a params object ([`super::envelope::Fields`]), and a JSON map (the recorded
/// answers' tests).
pub trait Params {
    /// `params[key]`, when it is a string.
    fn field(&self, key: &str) -> Option<Cow<'_, str>>;
    /// `_meta`'s protocol version, when `_meta` is an object and the version a string.
    fn meta_version(&self) -> Option<Cow<'_, str>>;
    /// Whether `_meta` declares client capabilities in the shape `ClientCapabilities` reads.
    fn declares_capabilities(&self) -> bool;
}

impl Params for Map<String, Value> {
    fn field(&self, key: &str) -> Option<Cow<'_, str>> {
        self.get(key).and_then(Value::as_str).map(Cow::Borrowed)
    }

    fn meta_version(&self) -> Option<Cow<'_, str>> {
        match self.get("_meta") {
            Some(Value::Object(meta)) => meta
                .get(META_PROTOCOL_VERSION)
                .and_then(Value::as_str)
                .map(Cow::Borrowed),
            _ => None,
        }
    }

    fn declares_capabilities(&self) -> bool {
        match self.get("_meta") {
            Some(Value::Object(meta)) => meta.get(META_CLIENT_CAPABILITIES).is_some_and(|c| {
                <rmcp::model::ClientCapabilities as serde::Deserialize>::deserialize(c).is_ok()
            }),
            _ => false,
        }
    }
}

/// A JSON-RPC message as [`admit`] reads it.
#[derive(Clone, Copy)]
pub enum Message<'a> {
    /// A request: its id, method and params.
    Request(&'a Value, &'a str, Option<&'a dyn Params>),
    /// A notification: its method and params.
    Notification(&'a str, Option<&'a dyn Params>),
    /// A response or error (to a server request).
    Response,
}

impl<'a> Message<'a> {
    /// A request whose params are a JSON map.
    pub fn request(id: &'a Value, method: &'a str, params: Option<&'a Map<String, Value>>) -> Self {
        Message::Request(id, method, params.map(|p| p as &dyn Params))
    }

    /// A notification whose params are a JSON map.
    pub fn notification(method: &'a str, params: Option<&'a Map<String, Value>>) -> Self {
        Message::Notification(method, params.map(|p| p as &dyn Params))
    }
}

impl std::fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Request(id, method, _) => write!(f, "Request({id}, {method})"),
            Message::Notification(method, _) => write!(f, "Notification({method})"),
            Message::Response => f.write_str("Response"),
        }
    }
}

/// The generation `message` is served as, or why it is refused: the version header must name
/// a version the edge knows (unless the request names its own in `_meta`), an `initialize`'s
/// must match its body; from 2026-07-28 on, `Mcp-Method` (and `Mcp-Name` for a method with a
/// target) must repeat the body, and a request must carry its version (the header's) and
/// capabilities in `_meta`; a version in `_meta` must be one the edge supports.
pub fn admit(heads: &Heads, message: Message<'_>) -> Result<Generation, Refused> {
    let (id, method, params) = match message {
        Message::Request(id, method, params) => (id, Some(method), params),
        Message::Notification(method, params) => (&Value::Null, Some(method), params),
        Message::Response => (&Value::Null, None, None),
    };
    let request = matches!(message, Message::Request(..));
    let initialize = request && method == Some("initialize");
    let meta_version = params.filter(|_| request).and_then(|p| p.meta_version());
    let meta_version = meta_version.as_deref();

    let header = version_header(heads, id, initialize, params, meta_version)?;

    // SEP-2243: the method and its target repeated in headers.
    if let (Some(method), Some(version)) = (method, header)
        && version >= CURRENT
    {
        standard_headers(heads, id, method, params, initialize)?;
    }

    if !request || initialize {
        // An `initialize` under a 2026-07-28 header is a removed method unless it is a
        // handshake the edge can answer (with a version that has one): the methods decide.
        return Ok(match header {
            Some(version) if version >= CURRENT => Generation::Stateless,
            _ => Generation::Legacy,
        });
    }

    // `_meta` against the header, then the version it names.
    let discover = method == Some("server/discover");
    per_request_version(id, discover, header, meta_version, params)
}

/// The `MCP-Protocol-Version` header: at most one, as text; an `initialize`'s must match its
/// body, any other's must be a version the edge knows unless the request names its own in
/// `_meta`.
fn version_header<'h>(
    heads: &'h Heads,
    id: &Value,
    initialize: bool,
    params: Option<&dyn Params>,
    meta_version: Option<&str>,
) -> Result<Option<&'h str>, Refused> {
    let Ok(header) = heads.protocol_version.single() else {
        return Err(Refused::bad_version_header(
            "Bad Request: more than one MCP-Protocol-Version header",
        ));
    };
    let header = match header.map(HeaderValue::to_str) {
        None => None,
        Some(Ok(version)) => Some(version),
        Some(Err(_)) if initialize => {
            return Err(Refused::invalid_request(
                id,
                "Invalid Request: MCP-Protocol-Version header is not valid UTF-8",
            ));
        }
        Some(Err(_)) => {
            return Err(Refused::bad_version_header(
                "Bad Request: Invalid MCP-Protocol-Version header encoding",
            ));
        }
    };
    if initialize {
        let body = params.and_then(|p| p.field("protocolVersion"));
        if let (Some(header), Some(body)) = (header, body)
            && header != body
        {
            return Err(Refused::invalid_request(
                id,
                format!(
                    "Invalid Request: MCP-Protocol-Version header ({header}) does not match initialize params.protocolVersion ({body})"
                ),
            ));
        }
    } else if let Some(version) = header
        && meta_version.is_none()
        && !known(version)
    {
        return Err(Refused::bad_version_header(format!(
            "Bad Request: Unsupported MCP-Protocol-Version: {version}"
        )));
    }

    Ok(header)
}

/// The version a request that is not a handshake names in `_meta` (2026-07-28), checked
/// against the header (`header`) and the versions the edge speaks; `discover` and any request
/// under a 2026-07-28 header must carry it, with capabilities.
fn per_request_version(
    id: &Value,
    discover: bool,
    header: Option<&str>,
    meta_version: Option<&str>,
    params: Option<&dyn Params>,
) -> Result<Generation, Refused> {
    // What `_meta` lacks of what 2026-07-28 requires (rmcp's
    // `RequestMetaObject::missing_required_keys`): a version string, and capabilities of the
    // shape `ClientCapabilities` reads.
    let missing = || -> Vec<&'static str> {
        let mut missing = Vec::new();
        if meta_version.is_none() {
            missing.push(META_PROTOCOL_VERSION);
        }
        if !params.is_some_and(|p| p.declares_capabilities()) {
            missing.push(META_CLIENT_CAPABILITIES);
        }
        missing
    };
    let Some(meta_version) = meta_version else {
        if discover || header.is_some_and(|v| v >= CURRENT) {
            return Err(Refused::JsonRpc(
                id.clone(),
                Error::malformed_meta(format!(
                    "Invalid params: request _meta is missing or has malformed required fields: {}",
                    missing().join(", ")
                )),
            ));
        }
        return Ok(Generation::Legacy);
    };
    let Some(header) = header else {
        return Err(Refused::header_mismatch(
            id,
            "request _meta protocolVersion requires MCP-Protocol-Version header".to_owned(),
        ));
    };
    if header != meta_version {
        return Err(Refused::header_mismatch(
            id,
            format!(
                "MCP-Protocol-Version header ({header}) does not match request _meta protocolVersion ({meta_version})"
            ),
        ));
    }
    if !known(meta_version) {
        return Err(Refused::JsonRpc(
            id.clone(),
            Error::unsupported_protocol_version(meta_version),
        ));
    }
    if discover || meta_version >= CURRENT {
        let missing = missing();
        if !missing.is_empty() {
            return Err(Refused::JsonRpc(
                id.clone(),
                Error::malformed_meta(format!(
                    "request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                )),
            ));
        }
    }
    Ok(if meta_version >= CURRENT {
        Generation::Stateless
    } else {
        Generation::Legacy
    })
}

/// Whether the edge speaks `version`.
fn known(version: &str) -> bool {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|known| known.as_str() == version)
}

/// `Mcp-Method` repeats the method (an `initialize` may omit it), `Mcp-Name` the target of a
/// method that has one: a tool's or prompt's `name`, a resource's `uri`, a task's `taskId`.
fn standard_headers(
    heads: &Heads,
    id: &Value,
    method: &str,
    params: Option<&dyn Params>,
    initialize: bool,
) -> Result<(), Refused> {
    if initialize {
        let Some(first) = heads.method.first() else {
            return Ok(());
        };
        if heads.method.is_repeated() {
            return Err(Refused::header_mismatch(
                id,
                "multiple Mcp-Method header values supplied; initialize requires exactly one"
                    .to_owned(),
            ));
        }
        if first.as_bytes() != b"initialize" {
            return Err(Refused::header_mismatch(
                id,
                format!(
                    "Mcp-Method header `{}` does not match body method `initialize`",
                    String::from_utf8_lossy(first.as_bytes())
                ),
            ));
        }
        return Ok(());
    }
    match single(&heads.method, "Mcp-Method").map_err(|m| Refused::header_mismatch(id, m))? {
        None => {
            return Err(Refused::header_mismatch(
                id,
                "missing required Mcp-Method header".to_owned(),
            ));
        }
        Some(value) if value != method => {
            return Err(Refused::header_mismatch(
                id,
                format!("Mcp-Method header `{value}` does not match body method `{method}`"),
            ));
        }
        Some(_) => {}
    }
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return Ok(()),
    };
    let Some(expected) = params.and_then(|p| p.field(key)) else {
        return Ok(());
    };
    match single(&heads.name, "Mcp-Name").map_err(|m| Refused::header_mismatch(id, m))? {
        None => Err(Refused::header_mismatch(
            id,
            format!("missing required Mcp-Name header for `{method}`"),
        )),
        Some(raw) => match decode(raw) {
            None => Err(Refused::header_mismatch(
                id,
                "Mcp-Name header is not valid Base64".to_owned(),
            )),
            Some(decoded) if decoded != expected => Err(Refused::header_mismatch(
                id,
                format!("Mcp-Name header `{decoded}` does not match body value `{expected}`"),
            )),
            Some(_) => Ok(()),
        },
    }
}

/// The one value of a header that may appear once.
fn single<'a>(seen: &'a Seen, spelled: &str) -> Result<Option<&'a str>, String> {
    let Ok(Some(value)) = seen.single() else {
        return if seen.is_repeated() {
            Err(format!("duplicate {spelled} header"))
        } else {
            Ok(None)
        };
    };
    value
        .to_str()
        .map(Some)
        .map_err(|_| format!("{spelled} header contains invalid characters"))
}

/// A SEP-2243 header value as sent: literal, or `=?base64?…?=` (strict, padded Base64 of
/// UTF-8).
pub fn decode(raw: &str) -> Option<String> {
    match raw
        .strip_prefix(BASE64_PREFIX)
        .and_then(|inner| inner.strip_suffix(BASE64_SUFFIX))
    {
        Some(inner) => String::from_utf8(STANDARD.decode(inner).ok()?).ok(),
        None => Some(raw.to_owned()),
    }
}
