//! The methods the edge serves itself, from the request [`super::pipeline`] parsed (no second
//! parse, no per-request rmcp service and its tasks): `tools/call`, answered as JSON — or as
//! SSE when the call sends the client something first (progress, log messages, questions), in
//! the order it was sent, the answer last — the `tools/list` pages that are not precomputed (a
//! cursor between page boundaries, or `mcp.precomputed_lists` off), the 2025-xx `initialize`
//! handshake, `ping`, `logging/setLevel`, `server/discover`, `subscriptions/listen`, the
//! refusals of the resource, prompt and completion methods the edge does not offer, and the
//! methods no MCP version defines.
//!
//! Every request reaches this path once the transport's rules admitted it
//! ([`crate::transport::rules`]) and for the generation they chose: [`dispatch`] serves it, or
//! refuses params that do not fit the method (`-32602`). The answer's shape follows the
//! protocol generation exactly as rmcp's server does: 2026-07-28 results carry their cache
//! hints and may be input-required; earlier ones lose `resultType` and non-object structured
//! output.

mod call;
mod list;
mod listen;
mod one_way;
mod simple;

pub(super) use one_way::method_not_allowed;

use call::{parse_call, serve_call};
use list::{parse_list, serve_list};
use listen::{parse_listen, serve_listen};
use simple::{parse_simple, serve_simple};

use rmcp::model::{
    CallToolRequestParams, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};

use futures::StreamExt as _;

use tracing::Instrument as _;

use super::*;
use crate::error::{jsonrpc_body, request_id};
use crate::mcp::{CallContext, Sink};
use crate::transport::envelope::{Envelope, Fields};
use crate::transport::pages::Generation;
use crate::transport::rules::Refused;

/// Serves one JSON-RPC message the transport's rules admitted as `generation` (`None`: a
/// response to no question of the edge's; an id of `null`: a notification). A warm
/// `tools/list` is answered here from precomputed pages, with nothing else built; every other
/// request runs in the request's span.
pub(super) async fn dispatch(
    state: Arc<EdgeState>,
    parts: axum::http::request::Parts,
    message: Option<Envelope<'_>>,
    generation: Generation,
) -> Response {
    if let Some(envelope) = &message
        && envelope.method == "tools/list"
        && !envelope.id.is_null()
        && let Some(response) = list::precomputed(&state, &parts, envelope, generation).await
    {
        return response;
    }
    let span = crate::access::span_to_enter(&parts.extensions);
    Box::pin(serve(state, parts, message, generation).instrument(span)).await
}

/// Serves what no precomputed page answers (see [`dispatch`]).
async fn serve(
    state: Arc<EdgeState>,
    parts: axum::http::request::Parts,
    message: Option<Envelope<'_>>,
    generation: Generation,
) -> Response {
    let Some(envelope) = message else {
        return one_way::stray_response();
    };
    let Envelope {
        id, method, fields, ..
    } = envelope;
    // The methods that read their params as a JSON map (none of them on a hot path).
    let map = || fields.as_ref().and_then(|fields| fields.to_map().ok());
    if id.is_null() {
        return one_way::notification(&state, &parts, &method, map().as_ref()).await;
    }
    let Some(request_id) = request_id(&id) else {
        return Error::invalid_request("invalid request: \"id\" must be a string or an integer")
            .answer(&serde_json::Value::Null, answering(generation));
    };
    let invalid = |reason: String| {
        let error = Error::invalid_params(format!("invalid params for {method}: {reason}"));
        json(shape(Err(error), request_id.clone(), generation))
    };
    match method.as_ref() {
        "tools/list" => match parse_list(fields.as_ref()) {
            Ok((meta, cursor)) => {
                serve_list(state, &parts, request_id, meta, cursor, generation).await
            }
            Err(reason) => invalid(reason),
        },
        "tools/call" => match parse_call(fields.as_ref(), state.config.mcp.max_argument_bytes) {
            Ok(params) => serve_call(state, parts, request_id, params, generation).await,
            Err(reason) => invalid(reason),
        },
        "subscriptions/listen" if generation == Generation::Stateless => {
            match parse_listen(map().as_ref()) {
                Ok(requested) => serve_listen(&state, &parts, request_id, requested),
                Err(reason) => invalid(reason),
            }
        }
        method => match parse_simple(method, map().as_ref(), generation) {
            Ok(simple) => serve_simple(&state, &parts, request_id, simple, generation).await,
            Err(reason) => invalid(reason),
        },
    }
}

/// The shape `tools/call` and `tools/list` params must have before the transport's rules
/// read them (`-32602` otherwise): an object — for `tools/call` with a string `name`, and
/// `arguments` and `inputResponses` that are objects when present.
pub(super) fn check_params(envelope: &Envelope<'_>) -> Result<(), Refused> {
    let bad = |text: &str| {
        Err(Refused::answering(
            &envelope.id,
            Error::invalid_params(format!("invalid params: {text}")),
        ))
    };
    match envelope.method.as_ref() {
        "tools/call" => {
            let Some(fields) = &envelope.fields else {
                return bad("tools/call needs params {name, arguments}");
            };
            if fields.str("name").is_none() {
                return bad("params.name must be a string");
            }
            let object_or_null = |key: &str| {
                fields
                    .get(key)
                    .is_none_or(|raw| raw.get() == "null" || raw.get().starts_with('{'))
            };
            if !object_or_null("arguments") {
                return bad("params.arguments must be an object");
            }
            if !object_or_null("inputResponses") {
                return bad("params.inputResponses must be an object");
            }
        }
        "tools/list" if !envelope.params_are_an_object() => {
            return bad("params must be an object");
        }
        _ => {}
    }
    Ok(())
}

/// The request's bearer credential, for a stream that must end when it is revoked.
pub(super) fn bearer_key(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(tp_proto::keys::bearer)
        .map(str::to_owned)
}

/// A method's answer: the JSON-RPC message, and the HTTP status it travels with when it is
/// sent as one JSON body (an error's, from [`Error::status`]).
pub(super) struct Answer {
    message: ServerJsonRpcMessage,
    status: StatusCode,
}

/// The JSON-RPC answer to a request, shaped for the protocol generation as rmcp's server
/// shapes it.
fn shape(result: Result<ServerResult, Error>, id: RequestId, generation: Generation) -> Answer {
    let current = generation == Generation::Stateless;
    match result {
        Ok(ServerResult::InputRequiredResult(_)) if !current => shape(
            Err(Error::invalid_request(
                "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
            )),
            id,
            generation,
        ),
        Ok(mut result) => {
            if current {
                result.fill_missing_cache_hints();
            } else {
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
            }
            Answer {
                message: ServerJsonRpcMessage::response(result, id),
                status: StatusCode::OK,
            }
        }
        Err(error) => Answer {
            status: error.status(answering(generation)),
            message: error.to_message(Some(id), current),
        },
    }
}

/// What a method's answer to a request with an id is, for its HTTP status.
fn answering(generation: Generation) -> Answering {
    match generation {
        Generation::Legacy => Answering::LegacyMethod,
        Generation::Stateless => Answering::CurrentMethod,
    }
}

/// The answer as one JSON body.
fn json(answer: Answer) -> Response {
    jsonrpc_body(answer.status, &answer.message)
}

/// The methods of [`direct_requests`], each with its label.
#[derive(Clone, Copy)]
enum Method {
    List,
    Call,
    Initialize,
    Ping,
    SetLevel,
    Discover,
    Unknown,
    Notification,
    Response,
    NotAllowed,
    Listen,
    NotOffered,
}

impl Method {
    const ALL: [Method; 12] = [
        Method::List,
        Method::Call,
        Method::Initialize,
        Method::Ping,
        Method::SetLevel,
        Method::Discover,
        Method::Unknown,
        Method::Notification,
        Method::Response,
        Method::NotAllowed,
        Method::Listen,
        Method::NotOffered,
    ];

    fn label(self) -> &'static str {
        match self {
            Method::List => "tools/list",
            Method::Call => "tools/call",
            Method::Initialize => "initialize",
            Method::Ping => "ping",
            Method::SetLevel => "logging/setLevel",
            Method::Discover => "server/discover",
            Method::Unknown => "unknown",
            Method::Notification => "notification",
            Method::Response => "response",
            Method::NotAllowed => "not_allowed",
            Method::Listen => "subscriptions/listen",
            Method::NotOffered => "not_offered",
        }
    }
}

/// `tp_edge_direct_requests_total{method}`: requests the edge's methods served (precomputed
/// `tools/list` pages are counted apart), handles made once.
fn direct_requests(method: Method) -> &'static metrics::Counter {
    static COUNTERS: std::sync::OnceLock<[metrics::Counter; 12]> = std::sync::OnceLock::new();
    let counters = COUNTERS.get_or_init(|| {
        Method::ALL
            .map(|m| metrics::counter!("tp_edge_direct_requests_total", "method" => m.label()))
    });
    // ALL lists every variant in declaration order (the test below keeps it so).
    &counters[method as usize]
}

#[cfg(test)]
mod tests {
    use super::Method;

    #[test]
    fn every_method_has_its_own_counter_slot_and_label() {
        for (i, method) in Method::ALL.into_iter().enumerate() {
            assert_eq!(method as usize, i, "{}", method.label());
        }
        let labels: std::collections::HashSet<_> = Method::ALL.iter().map(|m| m.label()).collect();
        assert_eq!(labels.len(), Method::ALL.len());
    }
}
