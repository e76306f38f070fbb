//! The HTTP client for MCP upstreams: rmcp's reqwest client, plus the W3C trace context.
//!
//! The edge puts the executor call's trace context into each request's `_meta` (`traceparent`,
//! `tracestate`: SEP-414, which MCP servers that trace read). rmcp sends requests from its own
//! tasks, where the caller's span is not current, so the context travels with the message; this
//! client copies it from the message into the HTTP headers of the same name as well, for the
//! proxies, gateways and servers that trace by header. Messages without one are sent as they are.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, GetMeta as _};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// rmcp's reqwest client, adding a request's `_meta` trace context as HTTP headers.
#[derive(Debug, Clone, Default)]
pub(crate) struct TracedHttp(pub(crate) reqwest::Client);

type Headers = HashMap<HeaderName, HeaderValue>;

/// `headers` plus the trace context `message` carries in its `_meta`.
pub(crate) fn with_trace_context(message: &ClientJsonRpcMessage, mut headers: Headers) -> Headers {
    let ClientJsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let meta = request.request.get_meta();
    let fields = [
        ("traceparent", meta.get_traceparent()),
        ("tracestate", meta.get_tracestate()),
    ];
    for (name, value) in fields {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    headers
}

impl StreamableHttpClient for TracedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace_context(&message, custom_headers);
        self.0
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace_context(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_trace_context(&message, custom_headers);
        self.0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientNotification, ClientRequest,
        InitializedNotification, RequestMetaObject,
    };

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn call(meta: Option<RequestMetaObject>) -> ClientJsonRpcMessage {
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("echo"),
        ));
        if let Some(meta) = meta {
            *request.get_meta_mut() = meta;
        }
        ClientJsonRpcMessage::request(request, rmcp::model::NumberOrString::Number(1))
    }

    #[test]
    fn a_request_s_trace_context_becomes_headers_and_nothing_else_does() {
        let mut meta = RequestMetaObject::default();
        meta.set_traceparent(PARENT);
        meta.set_tracestate("vendor=1");
        let existing = Headers::from([(
            HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("k"),
        )]);
        let headers = with_trace_context(&call(Some(meta)), existing.clone());
        // (HeaderName keys: looked up by HeaderName; its hash is not a str's.)
        let get = |headers: &Headers, name: &'static str| {
            headers.get(&HeaderName::from_static(name)).cloned()
        };
        assert_eq!(get(&headers, "traceparent").unwrap(), PARENT);
        assert_eq!(get(&headers, "tracestate").unwrap(), "vendor=1");
        assert_eq!(get(&headers, "x-api-key").unwrap(), "k");
        // No context: the headers are left alone.
        assert_eq!(with_trace_context(&call(None), existing.clone()), existing);
        let notification = ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(InitializedNotification::default()),
        );
        assert_eq!(
            with_trace_context(&notification, existing.clone()),
            existing
        );
        // A value that cannot be a header is dropped, not sent broken.
        let mut bad = RequestMetaObject::default();
        bad.set_traceparent("line\nbreak");
        assert!(
            get(
                &with_trace_context(&call(Some(bad)), Headers::new()),
                "traceparent"
            )
            .is_none()
        );
    }
}
