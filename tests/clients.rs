//! Real MCP clients against real edges: the official Python SDK (both lifecycles) and the
//! official TypeScript SDK, driven through the scripts in `tests/clients/`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tp_test_support::{node, node_dir, python};

use crate::fleet::Fleet;

/// Runs a client script and parses the one JSON object it prints.
pub(crate) async fn run_client(program: &Path, args: &[String], cwd: &Path) -> Value {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(program)
            .args(args)
            .current_dir(cwd)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{} {args:?} did not finish in 60 s", program.display()))
    .expect("spawn client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        program.display(),
        output.status
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("client printed {stdout:?}: {e}\n{stderr}"))
}

/// The calls both SDKs make as tenant `qa` (platform tools plus the `testing` provider).
fn calls() -> Value {
    json!([
        ["echo", {"text": "hello from an SDK"}],
        ["test_tool_with_progress", {}],
        ["test_multiple_content_types", {}],
        ["fail", {}],
        ["gmail", {"query": "x"}],
        ["echo", {"text": 42}],
    ])
}

/// What both SDKs must report for [`calls`].
fn check_calls(sdk: &str, out: &Value) {
    let calls = out["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 6, "{sdk}: {out}");
    assert_eq!(calls[0]["is_error"], false, "{sdk}: {}", calls[0]);
    assert_eq!(calls[0]["text"], "[qa/collector] hello from an SDK");
    assert_eq!(
        calls[0]["structured"]["arguments"],
        json!({"text": "hello from an SDK"}),
        "{sdk}: structuredContent passes through"
    );
    assert_eq!(calls[1]["is_error"], false, "{sdk}: {}", calls[1]);
    let progress: Vec<f64> = calls[1]["progress"]
        .as_array()
        .map(|values| values.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    assert_eq!(
        progress,
        [0.0, 50.0, 100.0],
        "{sdk}: progress notifications reach the client's callback"
    );
    assert_eq!(
        calls[2]["types"],
        json!(["text", "image", "resource"]),
        "{sdk}: {}",
        calls[2]
    );
    assert_eq!(
        calls[3]["is_error"], true,
        "{sdk}: executor failure is a result"
    );
    // An executor's internal failure is reported without its internals, with a reference to
    // the edge's log.
    assert!(
        calls[3]["text"].as_str().is_some_and(|t| t
            .contains("fail failed with an internal error (reference")
            && !t.contains("always fails")),
        "{sdk}: {}",
        calls[3]
    );
    // A tool the tenant cannot see and a bad argument are protocol errors the SDK raises.
    assert!(
        calls[4]["exception"]
            .as_str()
            .is_some_and(|e| e.contains("unknown tool: gmail")),
        "{sdk}: {}",
        calls[4]
    );
    assert!(
        calls[5]["exception"]
            .as_str()
            .is_some_and(|e| e.contains("invalid arguments") && e.contains("/text")),
        "{sdk}: {}",
        calls[5]
    );
}

#[tokio::test]
async fn the_python_sdk_lists_and_calls_in_both_lifecycles_across_two_edges() {
    let fleet = Fleet::start(2, "").await;
    let expected = fleet.expected("qa", "collector").await;
    let script = std::fs::canonicalize("clients/python_client.py").expect("python_client.py");
    for (edge, mode, version) in [(0, "legacy", "2025-11-25"), (1, "auto", "2026-07-28")] {
        let url = format!("http://{}/mcp", fleet.edges[edge].addr);
        let out = run_client(
            &python(),
            &[
                script.display().to_string(),
                url,
                fleet.key("qa", "collector").to_owned(),
                mode.to_owned(),
                calls().to_string(),
            ],
            Path::new("."),
        )
        .await;
        assert_eq!(out["protocol_version"], version, "{mode}: {out}");
        assert_eq!(out["tools"], json!(expected), "{mode}: the whole registry");
        check_calls(&format!("python/{mode}"), &out);
    }
}

#[tokio::test]
async fn the_typescript_sdk_lists_and_calls() {
    let fleet = Fleet::start(1, "").await;
    let expected = fleet.expected("qa", "collector").await;
    let url = format!("http://{}/mcp", fleet.edges[0].addr);
    let dir = node_dir();
    let out = run_client(
        &node(),
        &[
            "ts_client.mjs".to_owned(),
            url,
            fleet.key("qa", "collector").to_owned(),
            calls().to_string(),
        ],
        &dir,
    )
    .await;
    assert_eq!(out["protocol_version"], "2025-11-25", "{out}");
    assert_eq!(out["tools"], json!(expected));
    check_calls("typescript", &out);

    // A key the control plane never issued: the SDK's connect fails on the 401.
    let bad = tokio::process::Command::new(node())
        .args([
            "ts_client.mjs",
            &format!("http://{}/mcp", fleet.edges[0].addr),
            "tpk_not_a_key",
        ])
        .current_dir(&dir)
        .output()
        .await
        .expect("spawn");
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("401"), "{stderr}");
}
