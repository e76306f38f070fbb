//! The access log: one line per HTTP request at INFO, with the request id, the caller's tenant
//! and role, the JSON-RPC method, the tool, the outcome and the duration. The parts of the
//! stack that learn these (authentication, the JSON-RPC check, the MCP handler) write them into
//! an [`AccessLog`] carried in the request's extensions; the outermost step ([`around`]) writes
//! the line once the response is ready. What a client got wrong goes to DEBUG, with the message
//! it was sent, so a busy edge's INFO log stays one line per request.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use tracing::Instrument as _;

use crate::transport::heads::Heads;
pub use crate::transport::heads::REQUEST_ID;

/// What the stack learned about one request.
#[derive(Debug)]
pub struct AccessLog {
    entry: Mutex<Entry>,
    id: RequestId,
    /// The request's span: the parent of spans opened on other tasks (the call pipeline runs
    /// parts of a call on tasks of their own, where the current span is not the request's).
    /// Opened when the request starts if spans are exported, else when the request first goes
    /// where events are written ([`span_to_enter`]): a warm `tools/list` writes none, and a
    /// span nobody reads cost it a tenth of its time.
    span: std::sync::OnceLock<tracing::Span>,
    /// When the request reached the edge's service.
    started: Instant,
    /// The HTTP method and target, for the span (OpenTelemetry's HTTP conventions) and the
    /// access line (the target shares the request head's buffer: no copy).
    method: axum::http::Method,
    uri: axum::http::Uri,
    /// A hash of the 2025-xx session id, if the request carries one (the id itself is a
    /// sealed token: it is not copied into traces).
    session: Option<String>,
}

#[derive(Debug, Default)]
struct Entry {
    /// The authenticated caller (shared with the request, not copied).
    caller: Option<Arc<crate::identity::Identity>>,
    rpc: Cow<'static, str>,
    tool: String,
    action: String,
    outcome: Cow<'static, str>,
}

impl Entry {
    fn tenant(&self) -> &str {
        self.caller.as_ref().map_or("", |c| c.tenant.as_str())
    }

    fn role(&self) -> &str {
        self.caller.as_ref().map_or("", |c| c.role.as_str())
    }
}

// === impl AccessLog ===

impl AccessLog {
    /// The request id (the client's `x-request-id` when it is a short token, else a new one).
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// When the request reached the edge's service.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The request's span (opened now if it was not yet).
    ///
    /// Its fields follow OpenTelemetry's conventions for HTTP servers (`http.request.method`,
    /// `url.path`, `http.route`, `http.response.status_code`, the span named `METHOD route`)
    /// and for MCP (`mcp.method.name`, `gen_ai.tool.name`, `gen_ai.operation.name`,
    /// `mcp.session.id`), so traces can be filtered in any backend. When spans are not
    /// exported, the span is only the context of the request's log events: it carries the
    /// request id alone (the access line has the rest), since the log formatter writes out
    /// every field of a span when it opens and when a field is recorded.
    pub fn span(&self) -> &tracing::Span {
        self.span.get_or_init(|| {
            if !tp_telemetry::trace::exporting() {
                return tracing::info_span!("request", request_id = %self.id());
            }
            let path = self.uri.path();
            let route = if path == "/mcp" || path.starts_with("/mcp/") {
                "/mcp"
            } else {
                path
            };
            let span = tracing::info_span!(
                "request",
                otel.name = %format_args!("{} {route}", self.method),
                otel.kind = "server",
                otel.status_code = tracing::field::Empty,
                http.request.method = %self.method,
                url.path = %path,
                http.route = %route,
                http.response.status_code = tracing::field::Empty,
                request_id = %self.id(),
                tenant = tracing::field::Empty,
                role = tracing::field::Empty,
                mcp.method.name = tracing::field::Empty,
                mcp.session.id = tracing::field::Empty,
                gen_ai.tool.name = tracing::field::Empty,
                gen_ai.operation.name = tracing::field::Empty,
                error.type = tracing::field::Empty,
            );
            if let Some(session) = &self.session {
                span.record("mcp.session.id", session.as_str());
            }
            span
        })
    }

    /// Writes what the stack learned into the span, if the request has one (at its end).
    fn record_on_span(&self, entry: &Entry, status: StatusCode, outcome: &str) {
        let Some(span) = self.span.get().filter(|_| tp_telemetry::trace::exporting()) else {
            return;
        };
        span.record("http.response.status_code", status.as_u16());
        for (field, value) in [
            ("tenant", entry.tenant()),
            ("role", entry.role()),
            ("mcp.method.name", entry.rpc.as_ref()),
            ("gen_ai.tool.name", entry.tool.as_str()),
        ] {
            if !value.is_empty() {
                span.record(field, value);
            }
        }
        if entry.rpc == "tools/call" {
            span.record("gen_ai.operation.name", "execute_tool");
        }
        if status.is_server_error() || outcome.starts_with("error") {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", outcome);
        }
    }

    /// Records the authenticated caller.
    pub fn caller(&self, identity: &Arc<crate::identity::Identity>) {
        if let Ok(mut entry) = self.entry.lock() {
            entry.caller = Some(Arc::clone(identity));
        }
    }

    /// Records the JSON-RPC method and, for `tools/call`, the tool.
    pub fn rpc(&self, method: &str, tool: Option<&str>) {
        if let Ok(mut entry) = self.entry.lock() {
            entry.rpc = match bounded_method(method) {
                known if known == method => Cow::Borrowed(known),
                _ => Cow::Owned(method.to_owned()),
            };
            if let Some(tool) = tool {
                tool.clone_into(&mut entry.tool);
            }
        }
    }

    /// Records the action of a polymorphic tool's call.
    pub fn action(&self, action: &str) {
        if let Ok(mut entry) = self.entry.lock() {
            action.clone_into(&mut entry.action);
        }
    }

    /// Records how the request ended (`ok`, `tool_error`, `error -32602`, ...).
    pub fn outcome(&self, outcome: impl Into<Cow<'static, str>>) {
        if let Ok(mut entry) = self.entry.lock() {
            entry.outcome = outcome.into();
        }
    }
}

/// The access log of the request whose extensions these are.
pub fn of(extensions: &axum::http::Extensions) -> Option<&AccessLog> {
    extensions.get::<Arc<AccessLog>>().map(AsRef::as_ref)
}

/// A client's request id when it is 1–64 characters of `[A-Za-z0-9._:-]`; a new one otherwise.
fn request_id(heads: &Heads) -> RequestId {
    heads
        .request_id
        .first()
        .and_then(|v| RequestId::new(v.as_bytes()))
        .unwrap_or_else(RequestId::random)
}

/// A request id: 1–64 characters of `[A-Za-z0-9._:-]`, kept inline (every request has one:
/// no allocation).
#[derive(Clone, Copy)]
struct RequestId {
    len: u8,
    bytes: [u8; RequestId::MAX],
}

impl RequestId {
    const MAX: usize = 64;

    /// `id` when it is a request id.
    fn new(id: &[u8]) -> Option<RequestId> {
        if !(1..=Self::MAX).contains(&id.len())
            || !id
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(b))
        {
            return None;
        }
        let mut bytes = [0; Self::MAX];
        bytes[..id.len()].copy_from_slice(id);
        Some(RequestId {
            len: u8::try_from(id.len()).ok()?,
            bytes,
        })
    }

    /// 16 hex digits of randomness.
    fn random() -> RequestId {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let bits = rand::random::<u64>();
        let mut bytes = [0; Self::MAX];
        for (at, byte) in bytes[..16].iter_mut().enumerate() {
            *byte = HEX[((bits >> ((15 - at) * 4)) & 0xf) as usize];
        }
        RequestId { len: 16, bytes }
    }

    fn as_str(&self) -> &str {
        // Only ASCII is ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The span to run (part of) a request in: its span, opened now if it was not (see
/// [`AccessLog`]); none when the request already runs in it (opened with the request, when
/// spans are exported).
pub fn span_to_enter(extensions: &axum::http::Extensions) -> tracing::Span {
    match extensions.get::<Arc<AccessLog>>() {
        // Health checks have no span unless asked (TOOLPLANE_TRACE_HEALTH_CHECKS).
        Some(log)
            if matches!(log.uri.path(), "/healthz" | "/readyz")
                && !tp_telemetry::trace::health_checks_traced() =>
        {
            tracing::Span::none()
        }
        Some(_) if tp_telemetry::trace::exporting() => tracing::Span::none(),
        Some(log) => log.span().clone(),
        None => tracing::Span::current(),
    }
}

/// The outermost step of the edge's service: runs `inner` (in the request's span when spans
/// are exported: see [`AccessLog`]), writes the request's line.
pub async fn around<F, Fut>(mut request: Request, heads: &Heads, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let started = Instant::now();
    let log = open(&mut request, heads, started);
    let method = request.method().clone();
    // Load balancers' health checks are not traced (one span a second per balancer is noise)
    // unless TOOLPLANE_TRACE_HEALTH_CHECKS asks for them.
    let health = matches!(log.uri.path(), "/healthz" | "/readyz");
    let mut response = if tp_telemetry::trace::exporting()
        && (!health || tp_telemetry::trace::health_checks_traced())
    {
        // A client's trace (traceparent) continues through the edge. Only an exported span
        // carries it, so a span opened later, when nothing is exported, needs no parent.
        let span = log.span().clone();
        tp_telemetry::trace::set_parent(&span, request.headers());
        inner(request).instrument(span).await
    } else {
        inner(request).await
    };
    if let Ok(value) = HeaderValue::from_str(log.id()) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    if health {
        return response;
    }
    let (outcome, error) = outcome(&log, &mut response).await;
    let status = response.status();
    let elapsed = started.elapsed();
    let entry = log
        .entry
        .lock()
        .map(|mut e| std::mem::take(&mut *e))
        .unwrap_or_default();
    request_seconds(bounded_method(&entry.rpc)).record(elapsed.as_secs_f64());
    log.record_on_span(&entry, status, &outcome);
    if let Some(message) = error {
        tracing::debug!(request_id = %log.id(), tenant = %entry.tenant(), %outcome, message, "client error");
    }
    let line = Line {
        id: log.id(),
        method: &method,
        path: log.uri.path(),
        status,
        entry: &entry,
        outcome: &outcome,
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
    };
    line.write();
    response
}

/// The request's access log, opened and put into its extensions.
fn open(request: &mut Request, heads: &Heads, started: Instant) -> Arc<AccessLog> {
    let id = request_id(heads);
    let session = heads
        .session_id
        .first()
        .map(|v| tp_telemetry::trace::fingerprint(v.as_bytes()));
    let log = Arc::new(AccessLog {
        entry: Mutex::default(),
        id,
        span: std::sync::OnceLock::new(),
        started,
        method: request.method().clone(),
        uri: request.uri().clone(),
        session,
    });
    request.extensions_mut().insert(Arc::clone(&log));
    log
}

/// The request's outcome: what the handler recorded, else read off the answer (a JSON body's
/// result or error code, with the error's message), else its kind or status.
async fn outcome(log: &AccessLog, response: &mut Response) -> (Cow<'static, str>, Option<String>) {
    let status = response.status();
    let recorded = log
        .entry
        .lock()
        .map(|e| e.outcome.clone())
        .unwrap_or_default();
    if !recorded.is_empty() {
        (recorded, None)
    } else if status == StatusCode::ACCEPTED {
        (Cow::Borrowed("accepted"), None)
    } else if is_json(response) && status.as_u16() < 500 {
        let (bytes, outcome, error) = read_outcome(response.body_mut()).await;
        *response.body_mut() = Body::from(bytes);
        (Cow::Owned(outcome), error)
    } else if status.is_success() {
        (Cow::Borrowed("stream"), None)
    } else {
        (Cow::Owned(format!("http {}", status.as_u16())), None)
    }
}

/// One request's access line.
struct Line<'a> {
    id: &'a str,
    method: &'a axum::http::Method,
    path: &'a str,
    status: StatusCode,
    entry: &'a Entry,
    outcome: &'a str,
    duration_ms: u64,
}

impl Line<'_> {
    /// Writes the line: JSON fields, or text laid out here.
    fn write(&self) {
        if tp_telemetry::json_logs() {
            let or_dash = |s: &str| {
                if s.is_empty() {
                    "-".to_owned()
                } else {
                    s.to_owned()
                }
            };
            let entry = self.entry;
            tracing::info!(
                request_id = %self.id,
                http = %format_args!("{} {}", self.method, self.path),
                status = self.status.as_u16(),
                tenant = %or_dash(entry.tenant()),
                role = %or_dash(entry.role()),
                rpc = %or_dash(&entry.rpc),
                tool = %or_dash(&entry.tool),
                action = %or_dash(&entry.action),
                outcome = %self.outcome,
                duration_ms = self.duration_ms,
                "request"
            );
        } else if tracing::enabled!(tracing::Level::INFO) {
            // Text: the line laid out here, as the fields would print, straight into the line
            // buffer (through the general formatter it cost a sixth of a warm `tools/list`).
            tp_telemetry::write_info_line_with(module_path!(), |line| {
                text_line(
                    line,
                    self.id,
                    self.method,
                    self.path,
                    self.status,
                    self.entry,
                    self.outcome,
                    self.duration_ms,
                );
            });
        }
    }
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}

/// Reads a JSON answer the handler did not label: `ok`, or `error <code>` and its message.
async fn read_outcome(body: &mut Body) -> (axum::body::Bytes, String, Option<String>) {
    #[derive(serde::Deserialize)]
    struct Envelope {
        error: Option<serde_json::Value>,
        error_description: Option<String>,
    }
    let bytes = axum::body::to_bytes(std::mem::take(body), usize::MAX)
        .await
        .unwrap_or_default();
    match serde_json::from_slice::<Envelope>(&bytes) {
        Ok(Envelope {
            error: Some(error),
            error_description,
        }) => {
            // JSON-RPC errors carry a code; the edge's HTTP refusals (401, 413) a name.
            let outcome = match error.get("code").and_then(serde_json::Value::as_i64) {
                Some(code) => format!("error {code}"),
                None => error.as_str().unwrap_or("error").to_owned(),
            };
            let message = error
                .get("message")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .or(error_description);
            (bytes, outcome, message)
        }
        _ => (bytes, "ok".to_owned(), None),
    }
}

/// The text access line: `request request_id=… http=POST /mcp status=200 tenant=… role=… rpc=…
/// tool=… action=… outcome=… duration_ms=…`, `-` for what is unknown, values with a space, a
/// quote, `=` or a control character quoted (Rust's escaping: no value can forge another
/// field or a second line). Laid out without the formatter for what is plain.
#[allow(clippy::too_many_arguments)]
fn text_line(
    line: &mut String,
    id: &str,
    method: &axum::http::Method,
    path: &str,
    status: StatusCode,
    entry: &Entry,
    outcome: &str,
    duration_ms: u64,
) {
    use std::fmt::Write as _;
    /// `key` with its leading space and `=`.
    fn value(line: &mut String, key: &str, value: &str) {
        /// The bytes written as they are: printable ASCII but space, `"` and `=`.
        const PLAIN: [bool; 256] = {
            let mut plain = [false; 256];
            let mut b = b' ' + 1;
            while b < 0x7f {
                plain[b as usize] = b != b'"' && b != b'=';
                b += 1;
            }
            plain
        };
        line.push_str(key);
        if value.is_empty() {
            line.push('-');
        } else if value.bytes().all(|b| PLAIN[usize::from(b)]) {
            line.push_str(value);
        } else if value.contains([' ', '"', '=']) || value.chars().any(char::is_control) {
            let _ = write!(line, "{value:?}");
        } else {
            // Not ASCII, nothing to quote.
            line.push_str(value);
        }
    }
    line.push_str("request");
    value(line, " request_id=", id);
    line.push_str(" http=");
    line.push_str(method.as_str());
    line.push(' ');
    line.push_str(path);
    line.push_str(" status=");
    tp_telemetry::push_padded(line, u32::from(status.as_u16()), 0);
    value(line, " tenant=", entry.tenant());
    value(line, " role=", entry.role());
    value(line, " rpc=", &entry.rpc);
    value(line, " tool=", &entry.tool);
    value(line, " action=", &entry.action);
    value(line, " outcome=", outcome);
    line.push_str(" duration_ms=");
    match u32::try_from(duration_ms) {
        Ok(ms) => tp_telemetry::push_padded(line, ms, 0),
        Err(_) => {
            let _ = write!(line, "{duration_ms}");
        }
    }
}

/// `tp_edge_request_seconds{rpc}`, handles kept per method (a labelled look-up per request
/// cost as much as the record).
fn request_seconds(rpc: &'static str) -> &'static metrics::Histogram {
    static HANDLES: std::sync::OnceLock<Vec<(&'static str, metrics::Histogram)>> =
        std::sync::OnceLock::new();
    let handles = HANDLES.get_or_init(|| {
        KNOWN_METHODS
            .iter()
            .chain(&["none", "other"])
            .map(|rpc| {
                (
                    *rpc,
                    metrics::histogram!("tp_edge_request_seconds", "rpc" => *rpc),
                )
            })
            .collect()
    });
    handles
        .iter()
        .find(|(name, _)| *name == rpc)
        .map_or(&handles[handles.len() - 1].1, |(_, handle)| handle)
}

const KNOWN_METHODS: [&str; 14] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "server/discover",
    "subscriptions/listen",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
];

/// A JSON-RPC method as a metrics label: the methods MCP defines, `none` for requests that
/// carried none (refused before, or GET streams), `other` for anything else a client sends.
fn bounded_method(method: &str) -> &'static str {
    if method.is_empty() {
        return "none";
    }
    KNOWN_METHODS
        .into_iter()
        .find(|m| *m == method)
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_line_reads_like_fields_and_quotes_what_needs_it() {
        let entry = Entry {
            caller: Some(Arc::new(crate::identity::Identity::anonymous(
                "acme",
                "collector",
            ))),
            rpc: "tools/call".into(),
            tool: "client_wiki".into(),
            action: String::new(),
            outcome: Cow::Borrowed(""),
        };
        let line = laid_out(
            "5f0c",
            &axum::http::Method::POST,
            "/mcp",
            StatusCode::OK,
            &entry,
            "error -32602",
            3,
        );
        assert_eq!(
            line,
            "request request_id=5f0c http=POST /mcp status=200 tenant=acme role=collector \
             rpc=tools/call tool=client_wiki action=- outcome=\"error -32602\" duration_ms=3"
        );
        // A value a client chose cannot forge another field or a second line.
        let forged = Entry {
            tool: "x status=500\nINFO request".into(),
            ..Entry::default()
        };
        let line = laid_out(
            "id",
            &axum::http::Method::GET,
            "/mcp",
            StatusCode::OK,
            &forged,
            "ok",
            0,
        );
        assert!(
            line.contains(r#"tool="x status=500\nINFO request""#),
            "{line}"
        );
        assert!(!line.contains('\n'));
        // Not ASCII: written as it is unless it needs quoting.
        let accented = Entry {
            caller: Some(Arc::new(crate::identity::Identity::anonymous(
                "société",
                "a\u{85}b",
            ))),
            ..Entry::default()
        };
        let line = laid_out(
            "id",
            &axum::http::Method::GET,
            "/mcp",
            StatusCode::NOT_FOUND,
            &accented,
            "ok",
            12_345,
        );
        assert!(line.contains(" tenant=société "), "{line}");
        assert!(line.contains(r#" role="a\u{85}b" "#), "{line}");
        assert!(line.contains(" status=404 "), "{line}");
        assert!(line.ends_with(" duration_ms=12345"), "{line}");
    }

    fn laid_out(
        id: &str,
        method: &axum::http::Method,
        path: &str,
        status: StatusCode,
        entry: &Entry,
        outcome: &str,
        duration_ms: u64,
    ) -> String {
        let mut line = String::new();
        text_line(
            &mut line,
            id,
            method,
            path,
            status,
            entry,
            outcome,
            duration_ms,
        );
        line
    }

    #[test]
    fn request_ids_are_sixteen_hex_digits_and_differ() {
        let (a, b) = (RequestId::random(), RequestId::random());
        let (a, b) = (a.as_str(), b.as_str());
        assert_eq!(a.len(), 16);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{a}"
        );
        assert_ne!(a, b);
    }

    #[test]
    fn a_client_request_id_is_kept_only_when_it_is_a_short_token() {
        let kept = |id: &[u8]| RequestId::new(id).map(|id| id.as_str().to_owned());
        assert_eq!(kept(b"abc-1.2:3_Z").as_deref(), Some("abc-1.2:3_Z"));
        assert_eq!(kept(&[b'a'; 64]).map(|id| id.len()), Some(64));
        assert_eq!(kept(&[b'a'; 65]), None);
        assert_eq!(kept(b""), None);
        assert_eq!(kept(b"a b"), None);
        assert_eq!(kept(b"a\n"), None);
        assert_eq!(kept("é".as_bytes()), None);
    }

    #[test]
    fn every_method_has_its_own_histogram_and_the_rest_share_one() {
        assert_eq!(bounded_method("tools/list"), "tools/list");
        assert_eq!(bounded_method("made/up"), "other");
        assert_eq!(bounded_method(""), "none");
        assert!(std::ptr::eq(
            request_seconds("other"),
            request_seconds("not-a-method")
        ));
        assert!(!std::ptr::eq(
            request_seconds("tools/list"),
            request_seconds("tools/call")
        ));
    }
}
