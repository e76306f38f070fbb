//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against a real
//! edge: the stable release's default server suite, and the 0.2 line's requirement sets for
//! 2025-11-25 and 2026-07-28. Known gaps are listed, with reasons, in the baseline files of
//! `tests/clients/` and in `docs/mcp-compatibility.md`; the suite fails on a new failure *and*
//! on a baseline entry that starts passing.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, EdgeProcess, ExecutorProcess, node, node_dir};

/// The conformance tools, all served by the demo executor.
const TOOLS: [&str; 25] = [
    // First in name order: the header-validation scenario calls the first listed tool with
    // no arguments, which `json_schema_2020_12_tool`'s schema (the suite's own) refuses.
    "echo",
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_logging_tool",
    "test_missing_capability",
    "test_streaming_elicitation",
    // Changes its own catalogue entry: a real tools/list_changed for listeners.
    "test_trigger_tool_change",
    // Questions to a 2025-11-25 client in the middle of a call.
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    // Input-required results (2026-07-28, SEP-2322): elicitation, sampling, roots and state.
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
];

/// The tools an MCP upstream (`tests/clients/conformance_upstream.mjs`) implements.
const UPSTREAM_TOOLS: [&str; 8] = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
];

struct Target {
    _cp: ControlPlaneProcess,
    _executor: ExecutorProcess,
    _upstream: Option<tp_test_support::Process>,
    edge: EdgeProcess,
}

impl Target {
    /// A control plane with a `conformance` tenant whose registry is the suite's tools, and an
    /// edge that serves that tenant to unauthenticated clients (the suite sends no key).
    async fn start() -> Target {
        Self::start_with(false).await
    }

    /// With `upstream`, the tools in [`UPSTREAM_TOOLS`] run on an MCP server built with the
    /// official TypeScript SDK, reached as an MCP executor.
    async fn start_with(upstream: bool) -> Target {
        let cp = ControlPlaneProcess::start(false).await;
        // The executor may change the catalogue: `test_trigger_tool_change` is the suite's
        // hook for a real tool-list change.
        let executor = ExecutorProcess::start_with_args(vec![
            "--control-plane".into(),
            cp.url(),
            "--admin-token-file".into(),
            cp.data_dir.join("admin-token").display().to_string(),
        ])
        .await;
        let mut admin = cp.admin().await;
        admin
            .executors
            .upsert_executor(pb::UpsertExecutorRequest {
                update_mask: None,
                executor: Some(pb::ExecutorInfo {
                    name: "demo".into(),
                    endpoint: executor.url(),
                    timeout_ms: 10_000,
                    max_concurrency: 64,
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        let upstream_process = if upstream {
            let port = tp_test_support::free_port();
            let log = std::env::temp_dir().join(format!("conformance-upstream-{port}.log"));
            let process = tp_test_support::Process::spawn(
                &node(),
                &[
                    node_dir()
                        .join("conformance_upstream.mjs")
                        .display()
                        .to_string(),
                    port.to_string(),
                ],
                &log,
                &[],
            );
            tp_test_support::eventually(
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
            admin
                .executors
                .upsert_executor(pb::UpsertExecutorRequest {
                    update_mask: None,
                    executor: Some(pb::ExecutorInfo {
                        name: "upstream".into(),
                        endpoint: format!("http://127.0.0.1:{port}/mcp"),
                        protocol: pb::ExecutorProtocol::Mcp as i32,
                        timeout_ms: 10_000,
                        max_concurrency: 64,
                        ..Default::default()
                    }),
                })
                .await
                .unwrap();
            Some(process)
        } else {
            None
        };
        admin
            .policy
            .create_adr(pb::CreateAdrRequest {
                adr: Some(pb::Adr {
                    id: "ADR-200".into(),
                    title: "Serve the MCP conformance suite's tools".into(),
                    status: pb::AdrStatus::Accepted as i32,
                    date: "2026-11-23".into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        admin
            .catalog
            .upsert_provider(pb::UpsertProviderRequest {
                provider: Some(pb::Provider {
                    id: "conformance".into(),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        let empty = json!({"type": "object", "properties": {}});
        // SEP-1613's keywords, plus SEP-2106's composition, conditional and $anchor keywords.
        let schema_2020_12 = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "address", "type": "object", "properties": {
                "street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
            "if": {"properties": {"name": {"const": "anonymous"}}},
            "then": {"not": {"required": ["address"]}},
            "else": true,
            "additionalProperties": false
        });
        // SEP-2243: an argument the client also sends as an `Mcp-Param-Region` header.
        let with_header = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}});
        let specs = TOOLS.iter().map(|name| (*name, empty.clone())).chain([
            ("json_schema_2020_12_tool", schema_2020_12),
            ("test_header_param", with_header),
        ]);
        for (name, schema) in specs {
            admin
                .catalog
                .register_tool(pb::RegisterToolRequest {
                    tool: Some(pb::ToolSpec {
                        name: name.into(),
                        description: format!("Conformance tool {name}"),
                        category: "conformance".into(),
                        provider: "conformance".into(),
                        input_schema: to_struct(&schema),
                        executor: if upstream && UPSTREAM_TOOLS.contains(&name) {
                            "upstream".into()
                        } else {
                            "demo".into()
                        },
                        client_capabilities: if name == "test_missing_capability" {
                            vec!["sampling".into()]
                        } else {
                            Vec::new()
                        },
                        admission: Some(pb::Admission {
                            adr: "ADR-200".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                })
                .await
                .unwrap();
        }
        admin
            .tenants
            .create_tenant(pb::CreateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: "conformance".into(),
                    connected_apis: Some(pb::ConnectedApis {
                        providers: vec!["conformance".into()],
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        let edge = EdgeProcess::start(
            &cp,
            &[cp.url()],
            None,
            "[anonymous]\ntenant = \"conformance\"\nrole = \"collector\"\n",
        )
        .await;
        Target {
            _cp: cp,
            _executor: executor,
            _upstream: upstream_process,
            edge,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.edge.addr)
    }
}

/// Runs one conformance CLI against the target, with a baseline; panics with the CLI's output
/// unless it exits 0 (every failure expected, no stale expectation).
async fn run_suite(package: &str, args: &[&str], baseline: &str) {
    run_suite_on(&Target::start().await, package, args, baseline).await;
}

async fn run_suite_on(target: &Target, package: &str, args: &[&str], baseline: &str) {
    // TOOLPLANE_CONFORMANCE_KEEP=1 keeps the per-scenario results (checks.json) for debugging.
    let mut guard = Some(tempfile::tempdir().unwrap());
    let out = guard.as_ref().unwrap().path().to_owned();
    if std::env::var_os("TOOLPLANE_CONFORMANCE_KEEP").is_some() {
        println!("conformance results kept in {}", out.display());
        guard.take().map(tempfile::TempDir::keep);
    }
    let baseline: PathBuf = std::fs::canonicalize(format!("clients/{baseline}")).unwrap();
    let cli = node_dir().join(format!("node_modules/{package}/dist/index.js"));
    let mut command = tokio::process::Command::new(node());
    command
        .arg(&cli)
        .args(["server", "--url", &target.url()])
        .args(args)
        .arg("--expected-failures")
        .arg(&baseline)
        .arg("-o")
        .arg(&out)
        .current_dir(&out)
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(600), command.output())
        .await
        .expect("the conformance suite finished within 10 minutes")
        .expect("spawn the conformance suite");
    drop(guard);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The summary the CLI prints last, for the test log.
    let tail: Vec<&str> = stdout.lines().rev().take(25).collect();
    println!(
        "{package} {args:?}:\n{}",
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
    // The suite's requests as the edge counted them: served by its methods, or refused by the
    // transport's rules (ADR 0011: the edge owns its transport; rmcp's is gone).
    let (_, metrics) = target.edge.admin_get("/metrics").await;
    let total = |name: &str| {
        metrics
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let own = total("tp_edge_direct_requests_total") + total("tp_edge_list_precomputed_total");
    let refused = metrics
        .lines()
        .filter(|l| {
            l.starts_with("tp_edge_requests_refused_total") && l.contains("reason=\"transport\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64;
    println!(
        "{package} {args:?}: {own} requests served by the edge's methods, {refused} refused by its transport rules"
    );
    if !output.status.success() {
        let log = target.edge.log();
        let log_tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "{package} {args:?} failed ({}):\n{stdout}\n{stderr}\nedge log (last 40 lines):\n{}",
            output.status,
            log_tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    assert!(
        own > 0,
        "the suite's requests never reached the edge's own path:\n{metrics}"
    );
}

#[tokio::test]
async fn conformance_stable_default_suite() {
    run_suite("conformance-stable", &[], "conformance-baseline.yml").await;
}

#[tokio::test]
async fn conformance_stable_json_schema_2020_12() {
    run_suite(
        "conformance-stable",
        &["--scenario", "json-schema-2020-12"],
        "conformance-baseline.yml",
    )
    .await;
}

#[tokio::test]
async fn conformance_requirements_2025_11_25() {
    run_suite(
        "conformance-next",
        &["--requirements", "2025-11-25"],
        "conformance-baseline-2025-11-25.yml",
    )
    .await;
}

#[tokio::test]
async fn conformance_requirements_2026_07_28() {
    run_suite(
        "conformance-next",
        &["--requirements", "2026-07-28"],
        "conformance-baseline-2026-07-28.yml",
    )
    .await;
}

#[tokio::test]
async fn conformance_json_schema_2020_12_at_2026_07_28() {
    run_suite(
        "conformance-next",
        &[
            "--scenario",
            "json-schema-2020-12",
            "--spec-version",
            "2026-07-28",
        ],
        "conformance-baseline-2026-07-28.yml",
    )
    .await;
}

/// The suite's tool scenarios through the edge against an MCP upstream that implements them:
/// content types, logging, progress and errors cross two MCP hops unchanged.
#[tokio::test]
async fn conformance_tool_scenarios_through_an_mcp_upstream() {
    for scenario in [
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
    ] {
        let target = Target::start_with(true).await;
        run_suite_on(
            &target,
            "conformance-stable",
            &["--scenario", scenario],
            "conformance-baseline.yml",
        )
        .await;
        // The calls really crossed the MCP hop.
        let (_, metrics) = target.edge.admin_get("/metrics").await;
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("tp_edge_executor_calls_total")
                    && l.contains("executor=\"upstream\"")),
            "{scenario}: no call reached the upstream:\n{metrics}"
        );
    }
}
