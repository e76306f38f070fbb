//! MCP upstreams as executors: an existing MCP server, reached over Streamable HTTP, runs the
//! catalogue tools routed to it. The edge is the upstream's client: it negotiates 2026-07-28
//! (`server/discover`) and falls back to the 2025-11-25 `initialize` handshake, holds one
//! upstream session per executor (never shown to the caller, who may reach any edge), sends
//! the executor's own credential (never the caller's key), strips the executor's tool prefix,
//! relays progress (and, for the only call in flight, log messages), and hands back the result
//! with its content blocks, `structuredContent` and `isError` intact.

// MCP logging is deprecated by SEP-2577 but still what 2025-11-25 servers send; relay it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::Digest as _;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    GetMeta as _, Implementation, LoggingLevel, LoggingMessageNotificationParam, NumberOrString,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerResult, Tool,
};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, PeerRequestOptions, RequestHandle, RunningService,
    serve_client_with_lifecycle,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use tokio::sync::mpsc;
use tp_proto::pb;
use tp_registry::Executor;

pub use crate::definition::definition;
pub use crate::events::CallEvent;
/// A tool as an upstream MCP server lists it.
pub use rmcp::model::Tool as UpstreamTool;

mod definition;
mod events;
mod exchange;
mod traced;

/// The prefix of the environment variables that hold executors' credentials when an executor
/// names none (`TOOLPLANE_CRED_<EXECUTOR>`).
pub const DEFAULT_CREDENTIAL_ENV_PREFIX: &str = "TOOLPLANE_CRED_";

/// Why an upstream call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// No session could be opened (connect, handshake, authentication).
    #[error("{0}")]
    Unreachable(String),
    /// The upstream answered the call with a JSON-RPC error, or the session broke mid-call.
    #[error("{0}")]
    Failed(String),
    /// The upstream's authorization server refused the tenant's (or user's) connection token
    /// in a token exchange: the connection must be made again; the upstream is not at fault.
    #[error("{0}")]
    CredentialRefused(String),
}

/// How long a finished call waits for progress its server sent before the result, while the
/// last progress seen is short of its total.
const PROGRESS_GRACE: std::time::Duration = std::time::Duration::from_millis(50);

/// Progress that arrived before its call registered (the request is on the wire before the
/// call learns its token); claimed on registration, the oldest dropped beyond this many.
const EARLY_EVENTS: usize = 256;

#[derive(Default)]
struct Routes {
    calls: HashMap<String, mpsc::UnboundedSender<CallEvent>>,
    early: std::collections::VecDeque<(String, CallEvent)>,
}

/// Receives the upstream's notifications and routes them to the call they belong to; counts
/// its `notifications/tools/list_changed` (2025-xx sessions, on the session's GET stream).
#[derive(Clone)]
struct Relay {
    routes: Arc<Mutex<Routes>>,
    tools_changed: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for Relay {
    fn default() -> Relay {
        Relay {
            routes: Arc::default(),
            tools_changed: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }
}

impl Relay {
    fn register(&self, token: String, sink: mpsc::UnboundedSender<CallEvent>) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let early = std::mem::take(&mut routes.early);
        for (owner, event) in early {
            if owner == token {
                let _ = sink.send(event);
            } else {
                routes.early.push_back((owner, event));
            }
        }
        routes.calls.insert(token, sink);
    }

    fn unregister(&self, token: &str) {
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        routes.calls.remove(token);
    }
}

impl ClientHandler for Relay {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let token = token_key(&params.progress_token);
        let event = CallEvent::Progress(pb::Progress {
            progress: params.progress,
            total: params.total.unwrap_or(0.0),
            message: params.message.unwrap_or_default(),
        });
        let mut routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        match routes.calls.get(&token) {
            Some(sink) => {
                let _ = sink.send(event);
            }
            None => {
                if routes.early.len() == EARLY_EVENTS {
                    routes.early.pop_front();
                }
                routes.early.push_back((token, event));
            }
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Log notifications name no request: relay them only when exactly one call is in
        // flight on this session, so that no caller ever sees another's log line.
        let routes = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if routes.calls.len() != 1 {
            return;
        }
        let level = match params.level {
            LoggingLevel::Debug => pb::LogLevel::Debug,
            LoggingLevel::Info | LoggingLevel::Notice => pb::LogLevel::Info,
            LoggingLevel::Warning => pb::LogLevel::Warning,
            _ => pb::LogLevel::Error,
        };
        let message = match params.data {
            Value::String(text) => text,
            other => other.to_string(),
        };
        if let Some(sink) = routes.calls.values().next() {
            let _ = sink.send(CallEvent::Log(pb::Log {
                level: level as i32,
                message,
            }));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.send_modify(|count| *count += 1);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolplane-edge", env!("CARGO_PKG_VERSION")),
        )
    }
}

fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// A call still waiting for its answer: dropped unanswered (the caller's deadline passed, or
/// the caller went away), it tells the upstream to stop.
struct Pending(Option<RequestHandle<RoleClient>>);

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            tokio::spawn(async move {
                let _ = handle
                    .cancel(Some("the caller's deadline passed".into()))
                    .await;
            });
        }
    }
}

/// One open upstream session.
pub struct Session {
    service: RunningService<RoleClient, Relay>,
    relay: Relay,
    /// The SHA-256 of the credential it carries (a token exchanged for the upstream changes
    /// while the tenant's stays: the session is then replaced, not kept beside).
    carries: Option<[u8; 32]>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

/// An MCP executor's upstream: its session, opened on first use and reopened after it breaks.
pub struct Upstream {
    info: Executor,
    /// `(header, value)` sent to the upstream, or why it is missing.
    credential: Result<Option<(String, String)>, String>,
    /// The HTTP client (its TLS settings: [`http_client`]).
    http: reqwest::Client,
    /// Open sessions by whose credential they carry: `None` the executor's own, else a
    /// tenant's (ADR 0015), named by the credential's SHA-256 so the map does not hold it.
    sessions: tokio::sync::Mutex<HashMap<Option<[u8; 32]>, Arc<Session>>>,
    /// The executor's token exchange (RFC 8693), when it names one: tenants' tokens are
    /// exchanged for the upstream's before they are sent.
    exchange: Option<exchange::Exchanger>,
}

/// Sessions an upstream keeps open at most; past it the tenants' sessions are closed (they
/// are opened again on their next call).
const MAX_SESSIONS: usize = 256;

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("executor", &self.info.name)
            .finish_non_exhaustive()
    }
}

/// The credential an executor names, read from this process's environment: `(header, value)`.
/// Only variables whose names start with `prefix` (`executors.credential_env_prefix`) may be
/// read: an admin who can register executors must not be able to make an edge send any of its
/// other environment variables (its edge token, cloud credentials) to a server they control.
pub fn credential(info: &Executor, prefix: &str) -> Result<Option<(String, String)>, String> {
    if info.credential_env.is_empty() {
        return Ok(None);
    }
    if !info.credential_env.starts_with(prefix) || info.credential_env.len() == prefix.len() {
        return Err(format!(
            "MCP executor {:?} names credential_env {:?}, but this edge only sends variables named {prefix}…",
            info.name, info.credential_env
        ));
    }
    let value = std::env::var(&info.credential_env).map_err(|_| {
        format!(
            "the credential for MCP executor {:?} is not set: environment variable {} is missing on this edge",
            info.name, info.credential_env
        )
    })?;
    let header = if info.credential_header.is_empty() {
        "authorization".to_owned()
    } else {
        info.credential_header.to_ascii_lowercase()
    };
    Ok(Some((header, value)))
}

/// The HTTP client for MCP upstreams: the system's roots plus `ca_file`'s certificates, and
/// `cert_file` / `key_file` as the client certificate (all optional; `executors.upstream_*`).
///
/// It follows no redirect: a request to an upstream carries a tenant's credential (a header,
/// or a subject token in a token exchange's body, which a 307 or 308 would send on), and a
/// redirect could point it anywhere, the edge's own network included. An upstream that
/// answers one is an error that names the status; configure its final URL.
pub fn http_client(
    ca_file: &str,
    cert_file: &str,
    key_file: &str,
) -> anyhow::Result<reqwest::Client> {
    use anyhow::Context as _;
    let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    if !ca_file.is_empty() {
        let pem = std::fs::read(ca_file)
            .with_context(|| format!("executors.upstream_ca_file: reading {ca_file}"))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
            format!("executors.upstream_ca_file: {ca_file} holds no PEM certificate")
        })?;
        builder = builder.tls_certs_merge(certificates);
    }
    match (cert_file.is_empty(), key_file.is_empty()) {
        (true, true) => {}
        (false, false) => {
            let mut pem = std::fs::read(cert_file)
                .with_context(|| format!("executors.upstream_cert_file: reading {cert_file}"))?;
            pem.push(b'\n');
            pem.extend(
                std::fs::read(key_file)
                    .with_context(|| format!("executors.upstream_key_file: reading {key_file}"))?,
            );
            let identity = reqwest::Identity::from_pem(&pem).with_context(|| {
                format!("executors.upstream_cert_file / upstream_key_file: {cert_file} and {key_file} are not a PEM certificate and its key")
            })?;
            builder = builder.identity(identity);
        }
        _ => anyhow::bail!(
            "executors.upstream_cert_file and executors.upstream_key_file: set both, or neither"
        ),
    }
    builder.build().context("the MCP upstreams' HTTP client")
}

/// Opens a session to an MCP server: 2026-07-28 when it speaks it, else 2025-11-25.
async fn open(
    info: &Executor,
    credential: Result<Option<(String, String)>, String>,
    http: reqwest::Client,
) -> Result<Session, UpstreamError> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(info.endpoint.clone());
    config.allow_stateless = true;
    match credential.map_err(UpstreamError::Unreachable)? {
        Some((header, value)) if header == "authorization" => {
            let token = tp_proto::keys::bearer(&value).unwrap_or(&value);
            config.auth_header = Some(token.to_owned());
        }
        Some((header, value)) => {
            let name = http::HeaderName::from_bytes(header.as_bytes())
                .map_err(|e| UpstreamError::Unreachable(format!("credential header: {e}")))?;
            let value = http::HeaderValue::from_str(&value)
                .map_err(|e| UpstreamError::Unreachable(format!("credential value: {e}")))?;
            config.custom_headers.insert(name, value);
        }
        None => {}
    }
    let transport = StreamableHttpClientTransport::with_client(traced::TracedHttp(http), config);
    let relay = Relay::default();
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let service = serve_client_with_lifecycle(relay.clone(), transport, lifecycle)
        .await
        .map_err(|e| UpstreamError::Unreachable(format!("cannot open an MCP session: {e}")))?;
    Ok(Session {
        service,
        relay,
        carries: None,
    })
}

impl Upstream {
    /// An upstream for `info`, its credential read from this process's environment (only
    /// variables named `prefix…`); nothing is opened yet.
    pub fn new(info: Executor, prefix: &str, http: reqwest::Client) -> Upstream {
        let credential = credential(&info, prefix);
        let exchange = exchange::Exchanger::new(&info, prefix, http.clone());
        Upstream {
            info,
            credential,
            http,
            sessions: tokio::sync::Mutex::default(),
            exchange,
        }
    }

    /// An upstream with an explicit credential (`(header, value)`), e.g. for an operator's CLI.
    pub fn with_credential(info: Executor, credential: Option<(String, String)>) -> Upstream {
        Upstream {
            info,
            credential: Ok(credential),
            http: reqwest::Client::default(),
            sessions: tokio::sync::Mutex::default(),
            exchange: None,
        }
    }

    /// The same upstream through `http` (its TLS settings: [`http_client`]).
    pub fn with_http(self, http: reqwest::Client) -> Upstream {
        Upstream { http, ..self }
    }

    async fn session(&self) -> Result<Arc<Session>, UpstreamError> {
        self.session_as(None).await
    }

    /// The session that carries `tenant_token` (a tenant's credential for this upstream's
    /// provider) or, without one, the executor's own credential.
    async fn session_as(&self, tenant_token: Option<&str>) -> Result<Arc<Session>, UpstreamError> {
        // With a token exchange, the upstream gets the token issued for it, never the
        // tenant's own (a failed exchange fails the call).
        let exchanged = match (&self.exchange, tenant_token) {
            (Some(exchange), Some(token)) => Some(exchange.exchange(token).await?),
            _ => None,
        };
        let digest = |token: &str| -> [u8; 32] { sha2::Sha256::digest(token.as_bytes()).into() };
        // Sessions by the tenant's token; each carries the token sent (the same, or the one
        // exchanged for it).
        let key = tenant_token.map(digest);
        let tenant_token = exchanged.as_deref().or(tenant_token);
        let carries = tenant_token.map(digest);
        let mut sessions = self.sessions.lock().await;
        if let Some(session) = sessions.get(&key)
            && !session.service.is_transport_closed()
            && session.carries == carries
        {
            return Ok(Arc::clone(session));
        }
        sessions.retain(|_, session| !session.service.is_transport_closed());
        if sessions.len() >= MAX_SESSIONS {
            sessions.retain(|key, _| key.is_none());
        }
        let credential = match tenant_token {
            // The tenant's token goes where the executor's own credential would.
            Some(token) => Ok(Some(
                match self.credential.as_ref().ok().and_then(Option::as_ref) {
                    Some((header, _)) if header != "authorization" => {
                        (header.clone(), token.to_owned())
                    }
                    _ => ("authorization".to_owned(), format!("Bearer {token}")),
                },
            )),
            None => self.credential.clone(),
        };
        // Opened on a task of its own: rmcp's session tasks outlive the call that opens the
        // session, and must neither keep that call's spans open nor put their work in its trace.
        let (info, http) = (self.info.clone(), self.http.clone());
        let session = tokio::spawn(async move { open(&info, credential, http).await })
            .await
            .map_err(|e| UpstreamError::Unreachable(format!("opening the MCP session: {e}")))??;
        let session = Arc::new(Session { carries, ..session });
        sessions.insert(key, Arc::clone(&session));
        Ok(session)
    }

    async fn forget(&self, broken: &Arc<Session>) {
        self.sessions
            .lock()
            .await
            .retain(|_, session| !Arc::ptr_eq(session, broken));
    }

    /// The upstream name of a catalogue tool.
    pub fn upstream_name<'a>(&self, tool: &'a str) -> &'a str {
        tool.strip_prefix(self.info.tool_prefix.as_str())
            .filter(|rest| !rest.is_empty())
            .unwrap_or(tool)
    }

    /// Calls `tool` (a catalogue name) with `arguments`, relaying events through `on_event`.
    /// Dropping the future (the caller's deadline) cancels the call upstream.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        on_event: &mut (dyn FnMut(CallEvent) + Send),
    ) -> Result<pb::Result, UpstreamError> {
        self.call_as(tool, arguments, None, on_event).await
    }

    /// [`Upstream::call`] on a session that carries `tenant_token` (the tenant's credential
    /// for the upstream's provider) instead of the executor's own credential.
    pub async fn call_as(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        tenant_token: Option<&str>,
        on_event: &mut (dyn FnMut(CallEvent) + Send),
    ) -> Result<pb::Result, UpstreamError> {
        let session = self.session_as(tenant_token).await?;
        let mut params = CallToolRequestParams::new(self.upstream_name(tool).to_owned());
        params.arguments = arguments;
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // The executor call's trace context, in `_meta` (SEP-414; `traced` copies it into the
        // HTTP headers too).
        for (field, value) in tp_telemetry::trace::current_context() {
            let meta = request.get_meta_mut();
            match field.as_str() {
                "traceparent" => meta.set_traceparent(value),
                "tracestate" => meta.set_tracestate(value),
                _ => {}
            }
        }
        let handle = match session
            .service
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(error) => {
                self.forget(&session).await;
                return Err(UpstreamError::Unreachable(format!(
                    "the MCP session failed: {error}"
                )));
            }
        };
        // rmcp sets the progress token itself; route the upstream's progress by it.
        let token = token_key(&handle.progress_token);
        let (sink, mut events) = mpsc::unbounded_channel();
        session.relay.register(token.clone(), sink);
        let mut pending = Pending(Some(handle));
        // The last progress relayed, as (progress, total).
        let mut last: Option<(f64, f64)> = None;
        let mut relay = |event: CallEvent, last: &mut Option<(f64, f64)>| {
            if let CallEvent::Progress(progress) = &event {
                *last = Some((progress.progress, progress.total));
            }
            on_event(event);
        };
        let outcome = loop {
            let Some(handle) = pending.0.as_mut() else {
                break Err(rmcp::ServiceError::UnexpectedResponse);
            };
            tokio::select! {
                outcome = &mut handle.rx => {
                    pending.0 = None;
                    break outcome.unwrap_or(Err(rmcp::ServiceError::UnexpectedResponse));
                }
                Some(event) = events.recv() => relay(event, &mut last),
            }
        };
        while let Ok(event) = events.try_recv() {
            relay(event, &mut last);
        }
        // rmcp hands notifications to their handler on a task of their own, so the result
        // can overtake the progress the server sent before it. While the last progress seen
        // is short of its total, give the rest a moment to arrive (bounded: a server may stop
        // reporting early).
        let grace = tokio::time::Instant::now() + PROGRESS_GRACE;
        while matches!(last, Some((progress, total)) if total > 0.0 && progress < total) {
            match tokio::time::timeout_at(grace, events.recv()).await {
                Ok(Some(event)) => relay(event, &mut last),
                _ => break,
            }
        }
        session.relay.unregister(&token);
        match outcome {
            Ok(ServerResult::CallToolResult(result)) => {
                Ok(to_pb(&serde_json::to_value(&result).unwrap_or_default()))
            }
            Ok(_) => Err(UpstreamError::Failed(
                "the MCP server answered tools/call with something other than a tool result".into(),
            )),
            Err(rmcp::ServiceError::McpError(error)) => Err(UpstreamError::Failed(format!(
                "the MCP server refused the call: {} ({})",
                error.message, error.code.0
            ))),
            Err(error) => {
                self.forget(&session).await;
                Err(UpstreamError::Failed(format!(
                    "the MCP session failed: {error}"
                )))
            }
        }
    }

    /// The upstream's live tool list (all pages).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, UpstreamError> {
        let session = self.session().await?;
        session
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| UpstreamError::Failed(format!("tools/list failed: {e}")))
    }

    /// The upstream's announcements that its tool list changed: a `subscriptions/listen`
    /// for `tools_list_changed` on a 2026-07-28 session, the session's own stream before.
    pub async fn tool_changes(&self) -> Result<ToolChanges, UpstreamError> {
        let session = self.session().await?;
        let modern = session
            .service
            .peer()
            .peer_info()
            .is_some_and(|info| info.protocol_version.to_string().as_str() >= "2026");
        if modern {
            let filter = rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build();
            let subscription =
                session.service.peer().listen(filter).await.map_err(|e| {
                    UpstreamError::Failed(format!("subscriptions/listen failed: {e}"))
                })?;
            return Ok(ToolChanges::Listen(Box::new(subscription), session));
        }
        let changes = session.relay.tools_changed.subscribe();
        Ok(ToolChanges::Stream(changes, session))
    }

    /// The protocol version the session negotiated.
    pub async fn protocol_version(&self) -> Result<String, UpstreamError> {
        let session = self.session().await?;
        Ok(session
            .service
            .peer()
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default())
    }
}

/// An upstream's announcements that its tool list changed ([`Upstream::tool_changes`]).
pub enum ToolChanges {
    /// A 2026-07-28 `subscriptions/listen` stream.
    Listen(Box<rmcp::service::Subscription>, Arc<Session>),
    /// The session's notifications (2025-xx), counted by the session's handler.
    Stream(tokio::sync::watch::Receiver<u64>, Arc<Session>),
}

impl std::fmt::Debug for ToolChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ToolChanges::Listen(..) => "ToolChanges::Listen",
            ToolChanges::Stream(..) => "ToolChanges::Stream",
        })
    }
}

impl ToolChanges {
    /// Waits for the next announcement: `true` when the tool list changed, `false` when the
    /// stream or the session ended (ask [`Upstream::tool_changes`] again).
    pub async fn next(&mut self) -> bool {
        match self {
            ToolChanges::Listen(subscription, _) => loop {
                match subscription.next().await {
                    Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => {
                        return true;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => return false,
                }
            },
            ToolChanges::Stream(changes, session) => loop {
                if session.service.is_transport_closed() {
                    return false;
                }
                match tokio::time::timeout(std::time::Duration::from_secs(5), changes.changed())
                    .await
                {
                    Ok(Ok(())) => return true,
                    Ok(Err(_)) => return false,
                    Err(_) => {}
                }
            },
        }
    }
}

/// An MCP `CallToolResult` (as JSON) as the executor contract's `Result`. Every MCP content
/// type has a counterpart, so nothing a client could see is lost.
pub fn to_pb(result: &Value) -> pb::Result {
    use pb::content_block::Block;
    let bytes = |text: &Value| {
        STANDARD
            .decode(text.as_str().unwrap_or_default())
            .unwrap_or_default()
    };
    let string = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let content = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| {
            let media = || pb::Media {
                data: bytes(&block["data"]),
                mime_type: string(&block["mimeType"]),
            };
            let converted = match block["type"].as_str()? {
                "text" => Block::Text(string(&block["text"])),
                "image" => Block::Image(media()),
                "audio" => Block::Audio(media()),
                "resource" => {
                    let resource = &block["resource"];
                    Block::Resource(pb::EmbeddedResource {
                        uri: string(&resource["uri"]),
                        mime_type: string(&resource["mimeType"]),
                        contents: Some(match resource.get("blob") {
                            Some(blob) => pb::embedded_resource::Contents::Blob(bytes(blob)),
                            None => {
                                pb::embedded_resource::Contents::Text(string(&resource["text"]))
                            }
                        }),
                    })
                }
                "resource_link" => Block::ResourceLink(pb::ResourceLink {
                    uri: string(&block["uri"]),
                    name: string(&block["name"]),
                    mime_type: string(&block["mimeType"]),
                    description: string(&block["description"]),
                }),
                _ => return None,
            };
            Some(pb::ContentBlock {
                block: Some(converted),
            })
        })
        .collect();
    pb::Result {
        content,
        structured: result
            .get("structuredContent")
            .and_then(tp_proto::json::to_struct),
        is_error: result["isError"].as_bool().unwrap_or(false),
        cost_usd: 0.0,
    }
}

impl tp_registry::HasErrorCode for UpstreamError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            UpstreamError::Unreachable(_) => tp_registry::ErrorCode::Unavailable,
            // The upstream's own answer to the call.
            UpstreamError::Failed(_) => tp_registry::ErrorCode::InvalidArgument,
            UpstreamError::CredentialRefused(_) => tp_registry::ErrorCode::FailedPrecondition,
        }
    }
}

/// An MCP executor at a port nothing listens on, with nothing else set, for tests to change.
#[cfg(test)]
pub(crate) fn test_executor() -> Executor {
    Executor {
        name: "x".into(),
        endpoint: "http://127.0.0.1:1/mcp".into(),
        protocol: tp_registry::ExecutorProtocol::Mcp,
        timeout_ms: 1000,
        max_concurrency: 1,
        description: String::new(),
        tool_prefix: String::new(),
        credential_env: String::new(),
        credential_header: String::new(),
        token_exchange: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_content_type_converts() {
        let result = to_pb(&json!({
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "test://a", "mimeType": "text/plain", "text": "body"}},
                {"type": "resource", "resource": {"uri": "test://b", "blob": "AAE="}},
                {"type": "resource_link", "uri": "test://c", "name": "c", "mimeType": "text/x", "description": "d"},
                {"type": "future_type", "x": 1}
            ],
            "structuredContent": {"n": 1},
            "isError": true
        }));
        assert_eq!(result.content.len(), 6, "unknown block types are dropped");
        assert!(result.is_error);
        assert_eq!(
            tp_proto::json::from_struct(result.structured.as_ref().unwrap()),
            json!({"n": 1})
        );
        match &result.content[1].block {
            Some(pb::content_block::Block::Image(media)) => {
                assert_eq!(&media.data[..4], b"\x89PNG");
                assert_eq!(media.mime_type, "image/png");
            }
            other => panic!("{other:?}"),
        }
        match &result.content[4].block {
            Some(pb::content_block::Block::Resource(resource)) => assert_eq!(
                resource.contents,
                Some(pb::embedded_resource::Contents::Blob(vec![0, 1]))
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_prefix_is_stripped_only_when_present() {
        let upstream = Upstream::new(
            Executor {
                name: "everything".into(),
                tool_prefix: "everything_".into(),
                ..test_executor()
            },
            "TOOLPLANE_CRED_",
            reqwest::Client::default(),
        );
        assert_eq!(upstream.upstream_name("everything_echo"), "echo");
        assert_eq!(upstream.upstream_name("echo"), "echo");
        assert_eq!(upstream.upstream_name("everything_"), "everything_");
    }

    #[test]
    fn only_prefixed_variables_are_sent() {
        let executor = |env: &str| Executor {
            credential_env: env.into(),
            ..test_executor()
        };
        // PATH exists in every environment: it must never be readable through an executor.
        let error = credential(&executor("PATH"), "TOOLPLANE_CRED_").unwrap_err();
        assert!(error.contains("TOOLPLANE_CRED_"), "{error}");
        assert!(credential(&executor("TOOLPLANE_CRED_"), "TOOLPLANE_CRED_").is_err());
        assert_eq!(credential(&executor(""), "TOOLPLANE_CRED_"), Ok(None));
        // A prefixed name that is not set is an error naming the variable, not its value.
        let error = credential(
            &executor("TOOLPLANE_CRED_NOT_SET_ANYWHERE"),
            "TOOLPLANE_CRED_",
        )
        .unwrap_err();
        assert!(error.contains("TOOLPLANE_CRED_NOT_SET_ANYWHERE"), "{error}");
    }
}
