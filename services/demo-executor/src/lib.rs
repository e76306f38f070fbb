//! A small executor behind the `toolplane.v1.Executor` contract:
//! - the demo catalogue's tools answer with fixed, realistic shapes (no external service);
//! - the MCP conformance suite's tools (`test_simple_text`, `test_image_content`, …) answer
//!   what the suite checks, so its scenarios exercise the whole path through an edge;
//! - the suite's input-required tools (`test_input_required_result_*`, MCP SEP-2322) ask the
//!   client for elicitation, sampling or roots through `InputRequired`, keep their progress in
//!   the executor state the edge seals into `requestState`, and finish once answered;
//! - `test_trigger_tool_change`, when the executor has an admin connection to the control
//!   plane, changes its own catalogue entry, so listeners get `tools/list_changed`;
//! - test tools: `echo`, `sleep` (`ms`), `fail` (gRPC error), `crash` (stream ends early).

use std::pin::Pin;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tp_proto::pb::{self, executor_server::Executor, executor_server::ExecutorServer};

mod input;

use self::input::input_required_tool;

/// A 1×1 red PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV (8 kHz, 8-bit mono, 8 samples of silence).
const WAV_BASE64: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

type Events = Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::InvokeEvent, Status>> + Send>>;

/// The demo executor service.
#[derive(Debug, Clone)]
pub struct DemoExecutor {
    admin: Option<Admin>,
    auth: tp_proto::invoke_auth::CallerAuth,
}

/// A control-plane connection with an admin token, for `test_trigger_tool_change` (the
/// conformance suite's hook that changes the tool list).
#[derive(Debug, Clone)]
pub struct Admin(tp_client::Admin);

impl Admin {
    /// A lazily connected admin client of the control plane at `url`.
    pub fn new(url: &str, token: &str) -> anyhow::Result<Admin> {
        Ok(Admin(tp_client::Admin::lazy(url, token)?))
    }

    /// Changes the catalogue entry of `tool` (its description alternates between two texts),
    /// so every tenant that sees it gets `notifications/tools/list_changed`.
    async fn touch(&self, tool: &str) -> Result<String, Status> {
        let mut catalog = self.0.catalog.clone();
        let current = catalog
            .get_tool(pb::GetToolRequest { name: tool.into() })
            .await?
            .into_inner();
        let mut spec = current.spec.ok_or_else(|| {
            tp_proto::status::error(
                tp_proto::status::ErrorCode::Internal,
                "the control plane returned a tool without a spec",
            )
        })?;
        const MARK: &str = " (changed)";
        spec.description = match spec.description.strip_suffix(MARK) {
            Some(original) => original.to_owned(),
            None => format!("{}{MARK}", spec.description),
        };
        let description = spec.description.clone();
        catalog
            .update_tool(pb::UpdateToolRequest { tool: Some(spec) })
            .await?;
        Ok(description)
    }
}

type Sender = mpsc::Sender<Result<pb::InvokeEvent, Status>>;

fn text(text: impl Into<String>) -> pb::ContentBlock {
    pb::ContentBlock {
        block: Some(pb::content_block::Block::Text(text.into())),
    }
}

fn media(base64: &str, mime: &str, audio: bool) -> pb::ContentBlock {
    let media = pb::Media {
        data: STANDARD.decode(base64).unwrap_or_default(),
        mime_type: mime.into(),
    };
    let block = if audio {
        pb::content_block::Block::Audio(media)
    } else {
        pb::content_block::Block::Image(media)
    };
    pb::ContentBlock { block: Some(block) }
}

fn resource(uri: &str, body: &str) -> pb::ContentBlock {
    pb::ContentBlock {
        block: Some(pb::content_block::Block::Resource(pb::EmbeddedResource {
            uri: uri.into(),
            mime_type: "text/plain".into(),
            contents: Some(pb::embedded_resource::Contents::Text(body.into())),
        })),
    }
}

fn done(
    content: Vec<pb::ContentBlock>,
    structured: Option<Value>,
    is_error: bool,
) -> pb::InvokeEvent {
    pb::InvokeEvent {
        event: Some(pb::invoke_event::Event::Result(pb::Result {
            content,
            structured: structured.as_ref().and_then(tp_proto::json::to_struct),
            is_error,
            cost_usd: 0.0,
        })),
    }
}

async fn progress(sender: &Sender, progress: f64, total: f64, message: &str) -> bool {
    let event = pb::InvokeEvent {
        event: Some(pb::invoke_event::Event::Progress(pb::Progress {
            progress,
            total,
            message: message.into(),
        })),
    };
    sender.send(Ok(event)).await.is_ok()
}

async fn log(sender: &Sender, level: pb::LogLevel, message: &str) -> bool {
    let event = pb::InvokeEvent {
        event: Some(pb::invoke_event::Event::Log(pb::Log {
            level: level as i32,
            message: message.into(),
        })),
    };
    sender.send(Ok(event)).await.is_ok()
}

/// Fixed, realistic data for a demo tool, by the tool's family; mail is the calling tenant's
/// own (its domain), never another demo tenant's.
pub fn sample(tool: &str, action: &str, arguments: &Value, tenant: &str) -> Value {
    let family = tool.split('_').next().unwrap_or(tool);
    let data = match family {
        "google" | "microsoft" | "linkedin" | "meta" => json!({
            "campaigns": [
                {"id": "1794", "name": "Brand — Search", "impressions": 48210, "clicks": 1890, "cost": 1422.35, "conversions": 61},
                {"id": "1802", "name": "Retargeting", "impressions": 91004, "clicks": 744, "cost": 388.10, "conversions": 19}
            ],
            "currency": "USD", "date_range": arguments.get("date_range").cloned().unwrap_or(json!("LAST_7_DAYS"))
        }),
        "salesforce" | "hubspot" | "dealcloud" => json!({
            "records": [
                {"id": "0065g00000XyZ", "name": "Globex — Expansion", "stage": "Negotiation", "amount": 120000, "close_date": "2026-12-15"},
                {"id": "0065g00000AbC", "name": "Initech — Renewal", "stage": "Closed Won", "amount": 48000, "close_date": "2026-11-02"}
            ],
            "total": 2
        }),
        "aws" | "gemini" | "claude" | "llm" | "ai" => json!({
            "output": "Summary: revenue grew 12% quarter over quarter, driven by search campaigns.",
            "usage": {"input_tokens": 412, "output_tokens": 38}
        }),
        "gmail" => {
            json!({"messages": [{"id": "18c2", "from": format!("cfo@{tenant}.example"), "subject": "Q3 board memo", "snippet": "Attached the memo…"}]})
        }
        _ => json!({"ok": true}),
    };
    json!({ "tool": tool, "action": action, "data": data })
}

async fn run(request: pb::InvokeRequest, sender: Sender) {
    if let Some(event) = input_required_tool(&request) {
        let _ = sender.send(Ok(event)).await;
        return;
    }
    let result = match fixed(&request.tool) {
        Some(result) => Some(result),
        None => match streamed(&request.tool, &sender).await {
            Some(result) => result,
            None => behaviour(&request, &sender).await,
        },
    };
    if let Some(result) = result {
        let _ = sender.send(Ok(result)).await;
    }
}

/// The conformance suite's tools whose result never changes.
fn fixed(tool: &str) -> Option<pb::InvokeEvent> {
    Some(match tool {
        "test_simple_text" => done(
            vec![text("This is a simple text response for testing.")],
            None,
            false,
        ),
        "test_image_content" => done(vec![media(PNG_BASE64, "image/png", false)], None, false),
        "test_audio_content" => done(vec![media(WAV_BASE64, "audio/wav", true)], None, false),
        "test_embedded_resource" => done(
            vec![resource(
                "test://embedded-resource",
                "This is an embedded resource content.",
            )],
            None,
            false,
        ),
        "test_multiple_content_types" => done(
            vec![
                text("Multiple content types test:"),
                media(PNG_BASE64, "image/png", false),
                resource(
                    "test://mixed-content-resource",
                    "{\"test\":\"data\",\"value\":123}",
                ),
            ],
            None,
            false,
        ),
        // Needs the client's sampling capability; the edge refuses callers without it (-32021),
        // so reaching here means it was declared. The demo cannot sample: it says so.
        "test_missing_capability" => done(
            vec![text(
                "sampling was declared; this demo executor does not sample",
            )],
            None,
            false,
        ),
        "test_error_handling" => done(
            vec![text("This tool intentionally returns an error for testing")],
            None,
            true,
        ),
        _ => return None,
    })
}

/// The tools that send progress or log messages before their result (`Some(None)`: the
/// caller went away); `None` for any other tool.
async fn streamed(tool: &str, sender: &Sender) -> Option<Option<pb::InvokeEvent>> {
    let finished = async {
        Some(match tool {
            "test_tool_with_progress" => {
                for step in [0.0, 50.0, 100.0] {
                    if !progress(sender, step, 100.0, &format!("step {step}")).await {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                done(vec![text("Progress test completed")], None, false)
            }
            "test_tool_with_logging" | "test_logging_tool" => {
                for message in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    if !log(sender, pb::LogLevel::Info, message).await {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                done(vec![text("Logging test completed")], None, false)
            }
            // Streams progress on the response stream and never sends the client a request.
            "test_streaming_elicitation" => {
                for step in [1.0, 2.0] {
                    if !progress(sender, step, 2.0, "working").await {
                        return None;
                    }
                }
                done(
                    vec![text("Streaming completed without elicitation")],
                    None,
                    false,
                )
            }
            _ => return None,
        })
    };
    if !matches!(
        tool,
        "test_tool_with_progress"
            | "test_tool_with_logging"
            | "test_logging_tool"
            | "test_streaming_elicitation"
    ) {
        return None;
    }
    Some(finished.await)
}

/// The first 12 hex digits of a credential's SHA-256 (as `toolplanectl tenants connections`
/// shows it).
fn fingerprint(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(token.as_bytes())[..6])
}

/// Any other tool: a sample of data for it, with the credential's fingerprint when the call
/// carried a tenant's credential.
fn sampled(tool: &str, request: &pb::InvokeRequest, arguments: &Value) -> pb::InvokeEvent {
    let mut data = sample(tool, &request.action, arguments, &request.tenant);
    let acting_as = acting_as(request);
    if let Some(credential) = request.credential.as_ref().filter(|c| !c.token.is_empty()) {
        data["credential"] = json!({
            "provider": credential.provider,
            "fingerprint": fingerprint(&credential.token),
        });
    }
    let summary = format!(
        "{tool}{} for tenant {}: {}",
        if request.action.is_empty() {
            String::new()
        } else {
            format!(" ({})", request.action)
        },
        request.tenant,
        data["data"]
    ) + &acting_as;
    done(vec![text(summary)], Some(data), false)
}

/// With a tenant's credential, which one: " (with PROVIDER's credential FINGERPRINT)", never
/// the credential itself; empty without one.
fn acting_as(request: &pb::InvokeRequest) -> String {
    request
        .credential
        .as_ref()
        .filter(|c| !c.token.is_empty())
        .map(|c| {
            format!(
                " (with {}'s credential {})",
                c.provider,
                fingerprint(&c.token)
            )
        })
        .unwrap_or_default()
}

/// `echo`: the text, after `[tenant/role]` and, with a tenant's credential, its fingerprint.
fn echo(request: &pb::InvokeRequest, arguments: &Value) -> pb::InvokeEvent {
    let said = arguments
        .get("text")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| arguments.to_string());
    let acting_as = acting_as(request);
    done(
        vec![text(format!(
            "[{}/{}] {said}{acting_as}",
            request.tenant, request.role
        ))],
        Some(json!({"tenant": request.tenant, "role": request.role, "arguments": arguments})),
        false,
    )
}

/// The demo's own tools: `echo`, `sleep`, `fail`, `crash`, and a sample of data for any other
/// (`None`: nothing is sent).
async fn behaviour(request: &pb::InvokeRequest, sender: &Sender) -> Option<pb::InvokeEvent> {
    let arguments = request
        .arguments
        .as_ref()
        .map(tp_proto::json::from_struct)
        .unwrap_or(json!({}));
    Some(match request.tool.as_str() {
        "echo" => echo(request, &arguments),
        // Stops as soon as the call is cancelled (the edge resets the stream when the caller
        // cancels or its deadline passes): what an executor should do with long work.
        "sleep" => {
            let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(100);
            let started = std::time::Instant::now();
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                () = sender.closed() => {
                    tracing::info!(
                        request_id = %request.request_id,
                        after_ms = started.elapsed().as_millis() as u64,
                        "sleep cancelled by the caller; stopped"
                    );
                    return None;
                }
            }
            done(vec![text(format!("slept {ms} ms"))], None, false)
        }
        // Fails with INTERNAL — unless asked to succeed: an executor whose failures depend on
        // the caller's input (what one tenant could use against the others' breaker).
        "fail" if arguments["succeed"] == true => done(vec![text("succeeded")], None, false),
        "fail" => {
            let _ = sender
                .send(Err(tp_proto::status::error(
                    tp_proto::status::ErrorCode::Internal,
                    "the fail tool always fails",
                )))
                .await;
            return None;
        }
        "crash" => return None,
        tool => sampled(tool, request, &arguments),
    })
}

#[tonic::async_trait]
impl Executor for DemoExecutor {
    type InvokeStream = Events;

    async fn invoke(
        &self,
        request: Request<pb::InvokeRequest>,
    ) -> Result<Response<Self::InvokeStream>, Status> {
        self.auth.check("Invoke", &request)?;
        let mut request = request.into_inner();
        // The tenant's credential for the tool's provider, opened (ADR 0015); the demo only
        // names its fingerprint in `echo`.
        if let Some(token) = self.auth.credential(&request)?
            && let Some(credential) = request.credential.as_mut()
        {
            credential.token = token;
            credential.sealed.clear();
        }
        if request.tenant.is_empty() || request.tool.is_empty() {
            return Err(tp_proto::status::error(
                tp_proto::status::ErrorCode::InvalidArgument,
                "tool and tenant are required",
            ));
        }
        let (sender, receiver) = mpsc::channel(16);
        if request.tool == "test_trigger_tool_change" {
            let event = match &self.admin {
                None => done(
                    vec![text(
                        "test_trigger_tool_change needs the executor started with --control-plane and --admin-token-file",
                    )],
                    None,
                    true,
                ),
                Some(admin) => match admin.touch(&request.tool).await {
                    Ok(description) => done(
                        vec![text(format!("the tool list changed: {description}"))],
                        None,
                        false,
                    ),
                    Err(status) => done(
                        vec![text(format!(
                            "the catalogue could not be changed: {}",
                            status.message()
                        ))],
                        None,
                        true,
                    ),
                },
            };
            let _ = sender.send(Ok(event)).await;
            return Ok(Response::new(Box::pin(ReceiverStream::new(receiver))));
        }
        tokio::spawn(run(request, sender));
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn purge_tenant(
        &self,
        request: Request<pb::PurgeTenantRequest>,
    ) -> Result<Response<pb::PurgeTenantResponse>, Status> {
        self.auth.check("PurgeTenant", &request)?;
        // The demo executor keeps no tenant data.
        Ok(Response::new(pb::PurgeTenantResponse { deleted: 0 }))
    }
}

impl DemoExecutor {
    /// A demo executor that authenticates its callers with `auth`.
    pub fn new(auth: tp_proto::invoke_auth::CallerAuth) -> DemoExecutor {
        DemoExecutor { admin: None, auth }
    }

    /// With a control-plane admin client, `test_trigger_tool_change` changes the catalogue.
    pub fn with_admin(mut self, admin: Option<Admin>) -> DemoExecutor {
        self.admin = admin;
        self
    }
}

/// Serves the demo executor (with health) on `listener` until `shutdown`, for callers
/// authenticated with `auth`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    auth: tp_proto::invoke_auth::CallerAuth,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_with(listener, DemoExecutor::new(auth), shutdown).await
}

/// Serves `executor` (with health) on `listener` until `shutdown`.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    executor: DemoExecutor,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_tls(listener, executor, shutdown, None).await
}

/// [`serve_with`], over TLS when `tls` is set.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    executor: DemoExecutor,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    tls: Option<std::sync::Arc<tp_net::tls::ReloadingTls>>,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<ExecutorServer<DemoExecutor>>().await;
    tonic::transport::Server::builder()
        .layer(tp_telemetry::trace::GrpcTraceLayer::new("demo_executor"))
        .add_service(health)
        .add_service(ExecutorServer::new(executor))
        .serve_with_incoming_shutdown(
            // Connection cap, handshake and idle deadlines, TCP_NODELAY (events and the result
            // are small writes; Nagle would hold each one for the caller's delayed ACK).
            tp_net::grpc_incoming_tls(listener, &tp_net::ListenerLimits::default(), tls),
            shutdown,
        )
        .await?;
    Ok(())
}
