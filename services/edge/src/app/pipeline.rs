//! One `/mcp` request past the shared steps of [`super::EdgeService`], as typed stages: the
//! caller ([`authenticate`]: the in-process cache first, no I/O when it holds the key), the
//! body ([`read_body`]) and its working memory, the one parse ([`Envelope::read`]), the
//! session, the transport's rules ([`rules::admit`]), then [`methods::dispatch`] — where a
//! warm `tools/list` is answered from precomputed pages before anything else is built. Every
//! request, warm or not, takes these stages in this order.

use super::methods;
use super::*;
use crate::error::{Answering, Error};
use crate::transport::envelope::{Envelope, Read};
use crate::transport::heads::Heads;
use crate::transport::rules::{self, Refused};

/// Serves one `/mcp` request. Malformed JSON-RPC is answered with the codes JSON-RPC 2.0
/// defines: `-32700` (HTTP 400) for a body that is not JSON, `-32600` (HTTP 400) for JSON
/// that is not one JSON-RPC message (batches included: MCP since 2025-06-18 has none), and
/// `-32602` for `tools/call` / `tools/list` parameters of the wrong shape, or arguments and
/// input responses beyond [`crate::mcp::bounds`]. A well-formed message must then meet the
/// transport's rules ([`rules::admit`]: versions, `_meta`, SEP-2243 headers), which choose the
/// generation it is served as.
///
/// `declared` is the request's `Content-Length` ([`super::router::declared_length`]).
pub(super) async fn serve_mcp_request(
    state: Arc<EdgeState>,
    request: Request,
    heads: &Heads,
    declared: Option<u64>,
) -> Response {
    let max_body = state.config.mcp.max_body_bytes;
    if declared.is_some_and(|declared| declared > max_body as u64) {
        // Rare paths are boxed: their futures would make every request's larger.
        return Box::pin(drain_and_refuse(max_body, request)).await;
    }
    let request = match authenticate(&state, request, heads).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    if request.method() == axum::http::Method::GET
        && heads.session_id.is_present()
        && state.config.mcp.session_ttl.is_some()
    {
        return notification_stream(&state, request, heads);
    }
    if request.method() != axum::http::Method::POST {
        return methods::method_not_allowed();
    }
    if let Err(refused) = rules::media(heads) {
        return refused.into_response();
    }
    let (mut parts, body) = request.into_parts();
    // The declared length (what the in-flight budget reserved) sizes the buffer once: grown by
    // doubling, a body would briefly take up to three times its length.
    let declared = declared.map_or(0, |d| {
        usize::try_from(d).unwrap_or(usize::MAX).min(max_body)
    });
    let bytes = match read_body(body, max_body, declared).await {
        Ok(bytes) => bytes,
        Err(BodyError::TimedOut) => return body_timed_out(),
        Err(BodyError::TooLarge) => {
            return Error::new(
                Fault::BodyTooLarge,
                "request body exceeds mcp.max_body_bytes",
            )
            .into_response();
        }
    };
    let _working_memory = match charge_working_memory(&state, &parts, &bytes) {
        Ok(permit) => permit,
        Err(refused) => return refused.into_response(),
    };
    let envelope = match Envelope::read(&bytes) {
        Ok(Read::Message(envelope)) => Some(envelope),
        Ok(Read::Response) => None,
        Ok(Read::Answer(id, message)) => {
            return Box::pin(answer(&state, &parts, id, message)).await;
        }
        Err(error) => return error.into_response(),
    };
    if let Some(envelope) = &envelope
        && let Err(refused) = methods::check_params(envelope)
    {
        return refused.into_response();
    }
    if let Err(refused) = open_session(&state, &mut parts, heads, envelope.as_ref()) {
        return refused.into_response();
    }
    if let (Some(envelope), Some(log)) = (&envelope, crate::access::of(&parts.extensions)) {
        log_rpc(log, envelope);
    }
    let message = rules_message(envelope.as_ref());
    match rules::admit(heads, message) {
        Ok(generation) => methods::dispatch(state, parts, envelope, generation).await,
        Err(refused) => {
            metrics::counter!("tp_edge_requests_refused_total", "reason" => "transport")
                .increment(1);
            refused.into_response()
        }
    }
}

/// The method (and a call's tool) in the request's access line.
fn log_rpc(log: &crate::access::AccessLog, envelope: &Envelope<'_>) {
    let tool = envelope
        .fields
        .as_ref()
        .filter(|_| envelope.method == "tools/call")
        .and_then(|fields| fields.str("name"));
    log.rpc(&envelope.method, tool.as_deref());
}

/// What the transport's rules read of a message (`None`: a response).
fn rules_message<'m>(envelope: Option<&'m Envelope<'_>>) -> rules::Message<'m> {
    let Some(envelope) = envelope else {
        return rules::Message::Response;
    };
    let params = envelope
        .fields
        .is_some()
        .then_some(envelope as &dyn rules::Params);
    if envelope.id.is_null() {
        rules::Message::Notification(&envelope.method, params)
    } else {
        rules::Message::Request(&envelope.id, &envelope.method, params)
    }
}

/// 413 for a body declared longer than `max`, after reading (and dropping) what the client is
/// still sending — within 16× the limit and 2 s — so that it reads the 413 instead of a
/// connection reset by unread data. A body that grows past the limit without declaring its
/// length fails when it is read ([`read_body`]: 413 as well).
async fn drain_and_refuse(max: usize, request: Request) -> Response {
    use futures::StreamExt as _;
    let mut body = request.into_body().into_data_stream();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let mut drained = 0usize;
    while drained <= max.saturating_mul(16) {
        match tokio::time::timeout_at(deadline, body.next()).await {
            Ok(Some(Ok(chunk))) => drained += chunk.len(),
            _ => break,
        }
    }
    Error::new(
        Fault::BodyTooLarge,
        "request body exceeds mcp.max_body_bytes",
    )
    .into_response()
}

/// The body's working memory — what the parse and everything built from it will cost,
/// counted before parsing — out of the in-flight budget; a body of too many values is
/// refused (`mcp.max_json_values`), one nested deeper than JSON is parsed is not JSON the
/// edge reads (`-32700`).
fn charge_working_memory(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    bytes: &[u8],
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, Refused> {
    let cost = crate::mcp::bounds::working_memory(bytes, state.config.mcp.max_json_values);
    if cost.values > state.config.mcp.max_json_values {
        metrics::counter!("tp_edge_requests_refused_total", "reason" => "values").increment(1);
        let id = crate::mcp::bounds::envelope_id(bytes);
        return Err(Refused::answering(
            &id,
            Error::invalid_params(format!(
                "invalid params: the request holds more than {} JSON values (mcp.max_json_values)",
                state.config.mcp.max_json_values
            )),
        ));
    }
    if cost.depth > crate::mcp::bounds::MAX_BODY_DEPTH {
        return Err(Refused::Http(Error::new(
            Fault::ParseError,
            format!(
                "parse error: nested deeper than {} levels",
                crate::mcp::bounds::MAX_BODY_DEPTH
            ),
        )));
    }
    let Some(budget) = parts.extensions.get::<InFlightBytes>() else {
        return Ok(None);
    };
    let kib =
        u32::try_from(cost.bytes.saturating_sub(bytes.len()).div_ceil(1024)).unwrap_or(u32::MAX);
    match Arc::clone(&budget.0).try_acquire_many_owned(kib.max(1)) {
        Ok(permit) => Ok(Some(permit)),
        Err(_) => {
            metrics::counter!("tp_edge_shed_total", "reason" => "bytes").increment(1);
            Err(Refused::Http(Error::new(Fault::Overloaded, OVERLOADED)))
        }
    }
}

/// A 2025-xx session id holds its session (into the request's extensions); one that does
/// not open is 404.
fn open_session(
    state: &EdgeState,
    parts: &mut axum::http::request::Parts,
    heads: &Heads,
    envelope: Option<&Envelope<'_>>,
) -> Result<(), Refused> {
    let Some(id) = heads.session_id.first() else {
        return Ok(());
    };
    if state.config.mcp.session_ttl.is_none() {
        return Ok(());
    }
    let session = parts.extensions.get::<Caller>().and_then(|caller| {
        state
            .sessions
            .open(&caller.0, id.to_str().unwrap_or_default())
    });
    match session {
        Some(session) => {
            parts.extensions.insert(session);
            Ok(())
        }
        None => Err(Refused::answering(
            envelope.map_or(&serde_json::Value::Null, |e| &e.id),
            session_not_found(),
        )),
    }
}

/// A 2025-xx session id that does not open (404).
fn session_not_found() -> Error {
    Error::new(
        Fault::SessionNotFound,
        "session not found: it expired or belongs to another caller; initialize again",
    )
}

/// Why a body could not be read whole.
pub(super) enum BodyError {
    /// It did not arrive in time (`http.body_read_timeout_ms`).
    TimedOut,
    /// It is longer than allowed, or the connection failed while it was read.
    TooLarge,
}

/// A body of at most `limit` bytes (`mcp.max_body_bytes`), whole: its one data frame as it is
/// (a small request's body arrives with its head), frames joined when there are more;
/// trailers are ignored. `declared` (the `Content-Length`, at most `limit`) sizes the joined
/// buffer once.
pub(super) async fn read_body(
    body: Body,
    limit: usize,
    declared: usize,
) -> Result<axum::body::Bytes, BodyError> {
    use http_body_util::BodyExt as _;
    let mut body = body;
    let mut first: Option<axum::body::Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    let mut length = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            if tp_net::is_body_timeout(&error) {
                BodyError::TimedOut
            } else {
                BodyError::TooLarge
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        length += data.len();
        if length > limit {
            return Err(BodyError::TooLarge);
        }
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            None => joined.extend_from_slice(&data),
            Some(previous) => {
                joined.reserve_exact(declared.max(previous.len() + data.len()));
                joined.extend_from_slice(&previous);
                joined.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| axum::body::Bytes::from(joined)))
}

/// `GET /mcp` with a session id (2025-xx): the standalone SSE stream on which the server sends
/// what is not an answer — here `notifications/tools/list_changed` whenever the caller's
/// tenant or the catalogue changes. Any edge serves it: every edge follows the change stream.
/// With a session id that does not open, 404; without `text/event-stream` in `Accept`, or
/// from a browser (any `Origin`: a cross-site page must not hold a caller's stream), 405 as
/// any other GET.
fn notification_stream(state: &Arc<EdgeState>, request: Request, heads: &Heads) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return methods::method_not_allowed();
    };
    if heads.origin.is_present() {
        return methods::method_not_allowed();
    }
    let key = methods::bearer_key(request.headers());
    let id = heads
        .session_id
        .first()
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if state.sessions.open(&caller.0, id).is_none() {
        return session_not_found().into_response();
    }
    if !rules::accepts_sse(heads) {
        return methods::method_not_allowed();
    }
    // The stream holds a slot of its key's and its tenant's stream limits while it is open,
    // and ends after mcp.max_stream_secs.
    let slot = match state.streams.open(&caller.0.tenant, &caller.0.key_id) {
        Ok(slot) => slot,
        Err(refusal) => {
            return Error::new(Fault::TooManyStreams, refusal.to_string()).into_response();
        }
    };
    let lifetime = tokio::time::sleep(state.streams.lifetime);
    let changes = crate::mcp::list_changes(Arc::clone(state), &caller.0, key);
    let events = futures::StreamExt::map(changes, |()| {
        Ok::<_, std::convert::Infallible>(
            Event::default()
                .data(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
        )
    });
    let events = futures::StreamExt::map(
        futures::StreamExt::take_until(events, lifetime),
        move |event| {
            let _held = &slot;
            event
        },
    );
    metrics::counter!("tp_edge_notification_streams_total").increment(1);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// A client's answer to a question the edge put on a call's stream: 202 when it reached the
/// waiting call (on this edge or another), 400 with a JSON-RPC error otherwise.
async fn answer(
    state: &EdgeState,
    parts: &axum::http::request::Parts,
    id: String,
    message: serde_json::Value,
) -> Response {
    use crate::transport::questions::Refused;
    let Some(caller) = parts.extensions.get::<Caller>() else {
        return unauthorized(
            state.config.oauth.as_ref(),
            true,
            "missing Authorization: Bearer <api key>",
        );
    };
    match state
        .questions
        .answer(&id, &caller.0.tenant, &caller.0.role, message)
        .await
    {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        // Unknown and someone else's get the same answer, so an id's existence does not leak
        // across callers.
        Err(Refused::Unknown | Refused::NotYours) => {
            metrics::counter!("tp_edge_answers_refused_total").increment(1);
            Error::invalid_request(
                "no question with this id is waiting for this caller (answered, timed out or never asked)",
            )
            .answer(&serde_json::Value::String(id), Answering::Request)
        }
    }
}
