//! The one error the edge answers with: a row of the table ([`Fault`]), a sentence, optional
//! data, and — only where the answer is written — the HTTP status, the JSON-RPC error and the
//! body they travel in. Nothing outside this module picks a status code or a JSON-RPC code
//! for an error (`scripts/structure.py` counts the places that do, and CI keeps them at none).

use std::borrow::Cow;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde_json::Value;
use tp_proto::Fault;

/// An error of the table, with what to tell the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    fault: Fault,
    message: Cow<'static, str>,
    data: Option<Value>,
    /// 2026-07-28: the request itself, not its method's params, is malformed (its `_meta`
    /// lacks what that version requires), so the answer is 400 even with an id.
    malformed_request: bool,
    /// Seconds to send in `Retry-After` (an overloaded edge: 1).
    retry_after: Option<u32>,
}

/// What an error answers, which decides its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answering {
    /// No request it can name (a JSON-RPC error without an id, or an HTTP-level refusal).
    Nothing,
    /// A request with an id, refused by the transport before any method saw it.
    Request,
    /// A request with an id, answered by its method, before 2026-07-28: a JSON-RPC answer
    /// travels with 200.
    LegacyMethod,
    /// A request with an id, answered by its method, at 2026-07-28
    /// ([`Fault::http_status_at_2026_07_28`]).
    CurrentMethod,
}

impl Error {
    /// An error of row `fault`, told as `message`.
    pub fn new(fault: Fault, message: impl Into<Cow<'static, str>>) -> Error {
        Error {
            fault,
            message: message.into(),
            data: None,
            malformed_request: false,
            retry_after: (fault == Fault::Overloaded).then_some(1),
        }
    }

    /// With `data` (the JSON-RPC error's `data`; for an HTTP-level error, fields added to
    /// the body beside `error`).
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Error {
        self.data = Some(data);
        self
    }

    /// Sent with `Retry-After: secs`.
    #[must_use]
    pub fn retry_after(mut self, secs: u32) -> Error {
        self.retry_after = Some(secs);
        self
    }

    /// Invalid params of a 2026-07-28 request whose `_meta` lacks what that version
    /// requires: 400, not the table's 200 — the request, not its method's params, is
    /// malformed (that version's HTTP binding).
    pub fn malformed_meta(message: impl Into<Cow<'static, str>>) -> Error {
        Error {
            malformed_request: true,
            ..Error::new(Fault::InvalidParams, message)
        }
    }

    /// The error every unknown, hidden or forbidden tool gets.
    pub fn unknown_tool(name: &str) -> Error {
        Error::new(Fault::InvalidParams, format!("unknown tool: {name}"))
    }

    /// Invalid params, told as `message`.
    pub fn invalid_params(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Fault::InvalidParams, message)
    }

    /// Not one JSON-RPC request the edge can serve, told as `message`.
    pub fn invalid_request(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Fault::InvalidRequest, message)
    }

    /// A failure of the edge itself.
    pub fn internal(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(Fault::Internal, message)
    }

    /// The answer to `resources/read`: there are no resources.
    pub fn resource_not_found(uri: &str) -> Error {
        Error::new(
            Fault::ResourceNotFound,
            format!("resource not found: {uri}; this server offers tools only, no resources"),
        )
    }

    /// Method-not-found for a method of a capability the edge does not offer, with a sentence.
    pub fn not_offered(method: &str, capability: &str) -> Error {
        Error::new(
            Fault::MethodNotFound,
            format!(
                "method not found: {method}; this server offers tools only, and its capabilities do not include {capability}"
            ),
        )
    }

    /// A 2026-07-28 request whose `_meta` names a protocol version the edge does not speak,
    /// with rmcp's sentence and `data.supported`.
    pub fn unsupported_protocol_version(version: &str) -> Error {
        let rmcp = rmcp::ErrorData::unsupported_protocol_version(
            serde_json::from_value(Value::String(version.to_owned())).unwrap_or_default(),
            rmcp::model::ProtocolVersion::KNOWN_VERSIONS,
        );
        Error {
            data: rmcp.data,
            ..Error::new(Fault::UnsupportedProtocolVersion, rmcp.message)
        }
    }

    /// The row of the table.
    pub fn fault(&self) -> Fault {
        self.fault
    }

    /// What the caller is told.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error's data, if any.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }

    /// The JSON-RPC code (the table's; an error without one is an internal error when it
    /// must travel in JSON-RPC). At 2026-07-28 a missing resource is invalid params, as that
    /// version asks.
    pub fn jsonrpc_code(&self, current: bool) -> i32 {
        match self.fault {
            Fault::ResourceNotFound if current => tp_proto::jsonrpc::INVALID_PARAMS,
            fault => fault.jsonrpc().unwrap_or(tp_proto::jsonrpc::INTERNAL_ERROR),
        }
    }

    /// The HTTP status of the answer.
    pub fn status(&self, answering: Answering) -> StatusCode {
        let status = match answering {
            _ if self.malformed_request => 400,
            Answering::Nothing => self.fault.http_status(false),
            Answering::Request => self.fault.http_status(true),
            Answering::LegacyMethod if self.fault.jsonrpc().is_some() => 200,
            Answering::LegacyMethod => self.fault.http_status(true),
            Answering::CurrentMethod => self.fault.http_status_at_2026_07_28(),
        };
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The error as rmcp carries it in a JSON-RPC message.
    pub fn to_jsonrpc(&self, current: bool) -> rmcp::ErrorData {
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode(self.jsonrpc_code(current)),
            self.message.clone(),
            self.data.clone(),
        )
    }

    /// The JSON-RPC error message answering `id` (`None`: the message has no id, as MCP
    /// 2026-07-28 and rmcp write an error whose request cannot be named).
    pub fn to_message(&self, id: Option<RequestId>, current: bool) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::error(self.to_jsonrpc(current), id)
    }

    /// The HTTP answer: a JSON-RPC error answering `id` (`Null`: none to name),
    /// sent with the status `answering` gives.
    pub fn answer(self, id: &Value, answering: Answering) -> Response {
        let current = answering == Answering::CurrentMethod;
        let message = self.to_message(request_id(id), current);
        let mut response = jsonrpc_body(self.status(answering), &message);
        self.add_headers(&mut response);
        response
    }

    fn add_headers(&self, response: &mut Response) {
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.fault == Fault::MethodNotAllowed {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.fault.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// The answer to a request no method answers: a JSON-RPC error without an id for the faults
/// MCP carries in JSON-RPC; one line of plain text for the four the transport refuses before
/// it reads a message ([`Fault::plain_text`]); else `{"error": message}` and the data's fields.
impl IntoResponse for Error {
    fn into_response(self) -> Response {
        if self.fault.jsonrpc().is_some() {
            return self.answer(&Value::Null, Answering::Nothing);
        }
        let status = self.status(Answering::Nothing);
        let mut response = if self.fault.plain_text() {
            (
                status,
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                )],
                self.message.to_string(),
            )
                .into_response()
        } else {
            let mut body = serde_json::Map::new();
            body.insert("error".into(), Value::String(self.message.to_string()));
            if let Some(Value::Object(data)) = &self.data {
                body.extend(data.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            (status, axum::Json(Value::Object(body))).into_response()
        };
        self.add_headers(&mut response);
        response
    }
}

/// A JSON-RPC message as one JSON body with `status`.
pub fn jsonrpc_body(status: StatusCode, message: &ServerJsonRpcMessage) -> Response {
    match serde_json::to_vec(message) {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(_) => {
            Error::internal("internal error: the answer could not be written").into_response()
        }
    }
}

/// The JSON-RPC id as rmcp reads it (a string, or an integer within i64).
pub fn request_id(id: &Value) -> Option<RequestId> {
    match id {
        Value::String(id) => Some(RequestId::String(id.as_str().into())),
        Value::Number(n) => Some(RequestId::Number(n.as_i64()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_answers_with_the_status_of_its_row() {
        for fault in Fault::ALL {
            let error = Error::new(fault, "x");
            assert_eq!(
                error.status(Answering::Nothing).as_u16(),
                fault.http_status(false)
            );
            assert_eq!(
                error.status(Answering::Request).as_u16(),
                fault.http_status(true)
            );
            assert_eq!(
                error.status(Answering::CurrentMethod).as_u16(),
                fault.http_status_at_2026_07_28()
            );
            let response = error.clone().into_response();
            assert_eq!(
                response.status().as_u16(),
                fault.http_status(false),
                "{fault:?}"
            );
            let json = response
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
            assert_eq!(json, !fault.plain_text(), "{fault:?}");
        }
    }

    #[test]
    fn a_malformed_meta_is_400_even_answering_a_request() {
        let error = Error::malformed_meta("x");
        assert_eq!(error.status(Answering::Request), StatusCode::BAD_REQUEST);
        assert_eq!(
            error.status(Answering::CurrentMethod),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(error.jsonrpc_code(true), tp_proto::jsonrpc::INVALID_PARAMS);
    }

    #[test]
    fn an_overloaded_edge_says_when_to_retry_and_405_says_what_is_allowed() {
        let response = Error::new(Fault::Overloaded, "busy").into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let response = Error::new(Fault::MethodNotAllowed, "Method Not Allowed").into_response();
        assert_eq!(response.headers()[header::ALLOW], "POST");
        let response = Error::new(Fault::Unavailable, "later")
            .retry_after(2)
            .into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn a_missing_resource_is_invalid_params_at_2026_07_28() {
        let error = Error::resource_not_found("file:///x");
        assert_eq!(
            error.jsonrpc_code(false),
            tp_proto::jsonrpc::RESOURCE_NOT_FOUND
        );
        assert_eq!(error.jsonrpc_code(true), tp_proto::jsonrpc::INVALID_PARAMS);
    }
}
