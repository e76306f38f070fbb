//! What a handler knows of the request it serves, whoever serves it: the HTTP request's parts
//! (caller, access log, session), the request's `_meta` (protocol version, capabilities, log
//! level, progress token), and where messages to the client go while the request runs.
//!
//! The edge's transport (the app's methods) builds one from the request it has parsed.

use rmcp::model::{RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerNotification};
use tokio::sync::mpsc::UnboundedSender;

/// Where the messages a request sends the client before its answer go.
#[derive(Clone)]
pub enum Sink {
    /// The edge's transport: every message goes on the request's SSE stream as it is.
    Stream(UnboundedSender<ServerJsonRpcMessage>),
    /// A request that sends the client nothing before its answer (`tools/list`).
    Closed,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sink::Stream(_) => "Sink::Stream",
            Sink::Closed => "Sink::Closed",
        })
    }
}

impl Sink {
    /// Sends a notification; a client that has gone away loses it.
    pub async fn notify(&self, notification: ServerNotification) {
        match self {
            Sink::Stream(stream) => {
                let _ = stream.send(ServerJsonRpcMessage::notification(notification));
            }
            Sink::Closed => {}
        }
    }
}

/// The request a handler serves (see the module).
#[derive(Debug)]
pub struct CallContext<'a> {
    /// The HTTP request's parts: headers, and the extensions the router put there.
    pub parts: Option<&'a http::request::Parts>,
    /// The request's `_meta`.
    pub meta: &'a RequestMetaObject,
    /// Where messages to the client go.
    pub sink: Sink,
}

impl CallContext<'_> {
    /// Puts a server request to the client under the edge's question id `id`.
    pub async fn ask(&self, id: String, request: rmcp::model::ServerRequest) -> Result<(), String> {
        match &self.sink {
            Sink::Stream(stream) => stream
                .send(ServerJsonRpcMessage::request(
                    request,
                    RequestId::String(id.into()),
                ))
                .map_err(|_| "the client has gone away".to_owned()),
            Sink::Closed => Err("this request cannot carry questions to the client".to_owned()),
        }
    }
}
