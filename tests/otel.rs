//! OpenTelemetry across three processes: a client's `traceparent` enters the edge, the edge's
//! identity and registry lookups continue the trace on the control plane, and the executor
//! call continues it on the wiki service — every span exported over OTLP/gRPC to a real
//! receiver (the OTLP trace service, served here), configured only by the standard `OTEL_*`
//! variables. The test checks the parent/child chain span by span.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value;
use serde_json::json;
use tp_proto::pb;
use tp_test_support::admin::{NewExecutor, issue_key, upsert_executor};
use tp_test_support::services::free_port;
use tp_test_support::{ControlPlaneProcess, EdgeProcess, WikiProcess, eventually};

/// One span as the receiver got it.
#[derive(Debug, Clone)]
struct Seen {
    service: String,
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    /// String and integer attributes, as text.
    attributes: std::collections::BTreeMap<String, String>,
    end_ns: u64,
}

#[derive(Debug, Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Seen>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    any_value::Value::StringValue(name) => Some(name.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    let attributes = span
                        .attributes
                        .iter()
                        .filter_map(|kv| {
                            let text = match kv.value.as_ref()?.value.as_ref()? {
                                any_value::Value::StringValue(v) => v.clone(),
                                any_value::Value::IntValue(v) => v.to_string(),
                                any_value::Value::BoolValue(v) => v.to_string(),
                                _ => return None,
                            };
                            Some((kv.key.clone(), text))
                        })
                        .collect();
                    spans.push(Seen {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex::encode(span.trace_id),
                        span_id: hex::encode(span.span_id),
                        parent: hex::encode(span.parent_span_id),
                        attributes,
                        end_ns: span.end_time_unix_nano,
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// A real OTLP trace receiver, and the environment that makes a process export to it.
fn start_receiver() -> (Receiver, Vec<(&'static str, String)>) {
    let receiver = Receiver::default();
    let port = free_port();
    let server = tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(receiver.clone()))
        .serve(format!("127.0.0.1:{port}").parse().unwrap());
    tokio::spawn(server);
    let otel = vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        ),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    (receiver, otel)
}

#[tokio::test]
async fn a_call_is_one_trace_from_the_client_through_edge_control_plane_and_wiki() {
    let (receiver, otel) = start_receiver();

    let dir = tempfile::tempdir().unwrap();
    let cp =
        ControlPlaneProcess::start_with_env(dir.path(), vec!["--demo".into()], otel.clone()).await;
    let wiki = WikiProcess::start_with_env(&otel).await;
    let mut admin = cp.admin().await;
    upsert_executor(&mut admin, NewExecutor::grpc("wiki", wiki.url())).await;
    let key = issue_key(&mut admin, "acme", "collector").await;
    let edge = EdgeProcess::start_with_env(&cp, &[cp.url()], None, "", &otel).await;

    // The client's own trace: every span of the call must belong to it.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "client_wiki",
        "arguments": {"action": "ingest", "source": {"type": "text", "source_label": "Tracing",
            "text": "Every hop of a tool call continues the caller's trace."}}}});
    let client = tp_test_support::McpHttp::new(&edge.addr, Some(&key), "2025-11-25");
    let reply = client
        .raw(
            serde_json::to_vec(&body).unwrap(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-11-25"),
                ("authorization", &format!("Bearer {key}")),
                ("traceparent", &format!("00-{trace_id}-{client_span}-01")),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);

    let in_trace = || -> Vec<Seen> {
        receiver
            .spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    };
    let spans = eventually(
        "spans from the edge, the control plane and the wiki",
        Duration::from_secs(15),
        || async {
            let spans = in_trace();
            let has = |service: &str, name: &str| {
                spans.iter().any(|s| s.service == service && s.name == name)
            };
            // The request span closes last, once the answer is written: wait for it too.
            (has("toolplane-edge", "executor.call")
                && has("toolplane-edge", "POST /mcp")
                && has(
                    "toolplane-control-plane",
                    "toolplane.v1.Registry/Authenticate",
                )
                && has("toolplane-wiki", "wiki.call")
                && has("toolplane-wiki", "toolplane.v1.Executor/Invoke"))
            .then_some(spans)
        },
    )
    .await;
    let find = |service: &str, name: &str| -> Vec<&Seen> {
        spans
            .iter()
            .filter(|s| s.service == service && s.name == name)
            .collect()
    };
    let parent_of = |span: &Seen| spans.iter().find(|s| s.span_id == span.parent).cloned();

    // The edge's request span is the client's span's child, named and described by
    // OpenTelemetry's HTTP and MCP conventions.
    let request = find("toolplane-edge", "POST /mcp");
    assert_eq!(request.len(), 1, "{spans:#?}");
    let request = request[0];
    assert_eq!(request.parent, client_span);
    for (key, value) in [
        ("http.request.method", "POST"),
        ("http.route", "/mcp"),
        ("http.response.status_code", "200"),
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "client_wiki"),
        ("gen_ai.operation.name", "execute_tool"),
        ("tenant", "acme"),
    ] {
        assert_eq!(
            request.attributes.get(key).map(String::as_str),
            Some(value),
            "{key}: {request:#?}"
        );
    }
    // The lookups and the executor call are the request's children.
    for name in ["identity.lookup", "registry.lookup", "executor.call"] {
        let found = find("toolplane-edge", name);
        assert!(!found.is_empty(), "no {name}: {spans:#?}");
        assert!(
            found.iter().all(|s| s.parent == request.span_id),
            "{name}: {spans:#?}"
        );
    }
    // The control plane's spans hang off the edge's lookups.
    let cp_spans: Vec<&Seen> = spans
        .iter()
        .filter(|s| s.service == "toolplane-control-plane" && s.name.starts_with("toolplane.v1."))
        .collect();
    assert!(
        cp_spans.len() >= 2,
        "Authenticate and ResolveRegistry: {spans:#?}"
    );
    for span in &cp_spans {
        let parent = parent_of(span).unwrap_or_else(|| panic!("orphan {span:?}: {spans:#?}"));
        assert_eq!(parent.service, "toolplane-edge", "{span:?}");
        assert!(
            parent.name.ends_with(".lookup") || parent.name == "request",
            "{span:?} under {parent:?}"
        );
    }
    // The wiki's server span is the executor call's child; its work, the server span's — and
    // the server span ends after its child (it lasts as long as the streamed answer).
    let executor_call = find("toolplane-edge", "executor.call")[0];
    let wiki_server = find("toolplane-wiki", "toolplane.v1.Executor/Invoke");
    assert_eq!(wiki_server.len(), 1, "{spans:#?}");
    assert_eq!(wiki_server[0].parent, executor_call.span_id);
    assert_eq!(
        wiki_server[0]
            .attributes
            .get("rpc.system")
            .map(String::as_str),
        Some("grpc")
    );
    let wiki_call = find("toolplane-wiki", "wiki.call");
    assert_eq!(wiki_call.len(), 1, "{spans:#?}");
    assert_eq!(wiki_call[0].parent, wiki_server[0].span_id);
    assert!(
        wiki_call[0].end_ns <= wiki_server[0].end_ns,
        "the wiki's server span ended before its child: {:?} / {:?}",
        wiki_server[0],
        wiki_call[0]
    );
    // Health checks, as a balancer sends them, make no spans.
    let before = receiver.spans.lock().unwrap().len();
    for _ in 0..10 {
        let (status, _) = edge.get("/readyz").await;
        assert_eq!(status, 200);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let health: Vec<Seen> = receiver.spans.lock().unwrap()[before..]
        .iter()
        .filter(|s| s.service == "toolplane-edge")
        .cloned()
        .collect();
    assert!(health.is_empty(), "health checks were traced: {health:#?}");
}

/// A tool on an MCP upstream (the TypeScript SDK server of clients/conformance_upstream.mjs):
/// the edge's executor call continues the client's trace there, in the request's `_meta`
/// (SEP-414) and in the HTTP `traceparent` header, with the executor call's span as parent.
#[tokio::test]
async fn a_call_to_an_mcp_upstream_carries_the_trace_in_meta_and_in_the_http_headers() {
    let (receiver, otel) = start_receiver();
    let fleet = crate::fleet::Fleet::start(0, "").await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let log = dir.path().join("upstream.log");
    let _upstream = tp_test_support::Process::spawn(
        &tp_test_support::node(),
        &[
            tp_test_support::node_dir()
                .join("conformance_upstream.mjs")
                .display()
                .to_string(),
            port.to_string(),
        ],
        &log,
        &[],
    );
    eventually(
        "the upstream to listen",
        Duration::from_secs(30),
        || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;
    let mut admin = fleet.cp.admin().await;
    upsert_executor(
        &mut admin,
        NewExecutor::mcp("upstream", format!("http://127.0.0.1:{port}/mcp")),
    )
    .await;
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: "test_simple_text".into(),
                description: "A tool on an MCP upstream".into(),
                category: "testing".into(),
                provider: "testing".into(),
                input_schema: tp_proto::json::to_struct(&json!({"type": "object"})),
                executor: "upstream".into(),
                admission: Some(pb::Admission {
                    adr: "ADR-100".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let edge = EdgeProcess::start_with_env(&fleet.cp, &[fleet.cp.url()], None, "", &otel).await;

    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let key = fleet.key("qa", "executor");
    let client = tp_test_support::McpHttp::new(&edge.addr, Some(key), "2025-11-25");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}}});
    let reply = client
        .raw(
            serde_json::to_vec(&body).unwrap(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-11-25"),
                ("authorization", &format!("Bearer {key}")),
                ("traceparent", &format!("00-{trace_id}-{client_span}-01")),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);

    // What the upstream received.
    let line = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("trace "))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .expect("the upstream logged the call's trace context");
    assert_eq!(line["tool"], "test_simple_text");
    let header = line["header"].as_str().expect("a traceparent header");
    assert_eq!(line["meta"].as_str(), Some(header), "{line}");
    let parts: Vec<&str> = header.split('-').collect();
    assert_eq!(parts.len(), 4, "{header}");
    assert_eq!(parts[1], trace_id, "the client's trace continues: {header}");
    assert_ne!(
        parts[2], client_span,
        "the edge's span is the parent, not the client's"
    );

    // Its parent is the edge's executor call, itself in the client's trace.
    let executor_call = eventually(
        "the edge's executor.call span",
        Duration::from_secs(15),
        || async {
            receiver
                .spans
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.trace_id == trace_id && s.name == "executor.call")
                .cloned()
        },
    )
    .await;
    assert_eq!(executor_call.service, "toolplane-edge");
    assert_eq!(
        parts[2], executor_call.span_id,
        "{header} under {executor_call:?}"
    );
}

/// OTLP over TLS to a receiver that requires client certificates, configured only by the
/// standard variables (`OTEL_EXPORTER_OTLP_CERTIFICATE`, `…_CLIENT_CERTIFICATE`,
/// `…_CLIENT_KEY`): spans arrive; a process without the client certificate delivers none.
#[tokio::test]
async fn spans_reach_a_receiver_over_mutual_tls_with_the_standard_variables() {
    let pki = crate::tls::Pki::new();
    let (server_cert, server_key) = pki.leaf("collector", true);
    let (client_cert, client_key) = pki.leaf("exporter", false);
    let receiver = Receiver::default();
    let port = free_port();
    let tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(
            std::fs::read(&server_cert).unwrap(),
            std::fs::read(&server_key).unwrap(),
        ))
        .client_ca_root(tonic::transport::Certificate::from_pem(
            std::fs::read(pki.ca()).unwrap(),
        ));
    let server = tonic::transport::Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(TraceServiceServer::new(receiver.clone()))
        .serve(format!("127.0.0.1:{port}").parse().unwrap());
    tokio::spawn(server);
    let env = |service: &str, with_certificate: bool| {
        let mut env = vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("https://127.0.0.1:{port}"),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
            ("OTEL_SERVICE_NAME", service.to_owned()),
            (
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
                pki.ca().display().to_string(),
            ),
        ];
        if with_certificate {
            env.push((
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                client_cert.display().to_string(),
            ));
            env.push((
                "OTEL_EXPORTER_OTLP_CLIENT_KEY",
                client_key.display().to_string(),
            ));
        }
        env
    };
    let (with_dir, without_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let with = ControlPlaneProcess::start_with_env(
        with_dir.path(),
        vec!["--demo".into()],
        env("cp-with-certificate", true),
    )
    .await;
    let without = ControlPlaneProcess::start_with_env(
        without_dir.path(),
        vec!["--demo".into()],
        env("cp-without-certificate", false),
    )
    .await;
    for cp in [&with, &without] {
        let mut admin = cp.admin().await;
        admin
            .policy
            .get_policy(pb::GetPolicyRequest::default())
            .await
            .unwrap();
    }
    let services = |receiver: &Receiver| -> std::collections::BTreeSet<String> {
        receiver
            .spans
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.service.clone())
            .collect()
    };
    eventually("spans over mutual TLS", Duration::from_secs(15), || async {
        services(&receiver)
            .contains("cp-with-certificate")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        !services(&receiver).contains("cp-without-certificate"),
        "the receiver took spans from a process without a client certificate"
    );
    println!("OTLP over mutual TLS: spans delivered with the client certificate, none without");
}
