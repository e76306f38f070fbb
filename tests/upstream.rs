//! MCP upstreams as executors: the reference MCP server (`@modelcontextprotocol/server-everything`
//! from npm, which speaks the 2025-11-25 session form) and another Toolplane edge (which speaks
//! 2026-07-28 and wants an API key) behind the edges, imported with `toolplanectl executors
//! import`, checked for drift, and called through both edges with their content types,
//! progress and errors intact.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::{
    EdgeProcess, McpHttp, Process, binary, free_port, node, node_dir, wait_for_port,
};

use crate::fleet::{Fleet, LEGACY, STATELESS};

/// The reference server on `port` (loopback only), once it listens.
async fn spawn_everything(dir: &Path, port: u16, log: &str) -> Process {
    let script =
        node_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let preload = node_dir().join("loopback.cjs");
    let process = Process::spawn(
        &node(),
        &[
            "--require".to_owned(),
            preload.display().to_string(),
            script.display().to_string(),
            "streamableHttp".to_owned(),
        ],
        &dir.join(log),
        &[("PORT", port.to_string())],
    );
    wait_for_port(port, "the reference MCP server to listen").await;
    process
}

/// Runs `toolplanectl` against the fleet's control plane: (exit code, stdout, stderr).
pub(crate) async fn ctl(
    fleet: &Fleet,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (i32, String, String) {
    let output = tokio::process::Command::new(binary("toolplanectl"))
        .args([
            "--addr",
            &fleet.cp.url(),
            "--token",
            &fleet.cp.admin_token(),
        ])
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn block_types(reply: &Value) -> Vec<String> {
    reply["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| b["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn the_reference_mcp_server_behind_the_edges_imported_called_and_checked_for_drift() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut everything = spawn_everything(dir.path(), port, "everything.log").await;
    let fleet = Fleet::start(2, "").await;
    let (code, out, err) = ctl(
        &fleet,
        &[
            "executors",
            "upsert",
            "everything",
            "--endpoint",
            &format!("http://127.0.0.1:{port}/mcp"),
            "--protocol",
            "mcp",
            "--timeout-ms",
            "20000",
            "--tool-prefix",
            "everything_",
            "--description",
            "The MCP reference server",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");

    // Import proposes prefixed catalogue entries from the live tools/list.
    let (code, out, err) = ctl(
        &fleet,
        &[
            "executors",
            "import",
            "everything",
            "--category",
            "reference",
            "--owner",
            "platform",
            "--scope",
            "Reference MCP server for tests",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let proposals: Vec<Value> = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = proposals
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "everything_echo",
        "everything_get-tiny-image",
        "everything_get-structured-content",
        "everything_trigger-long-running-operation",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    assert!(
        proposals
            .iter()
            .all(|p| p["executor"] == "everything" && p["input_schema"]["type"] == "object")
    );
    // Register a few of them, through the ceiling like any tool.
    let only = "echo,get-tiny-image,get-structured-content,get-resource-reference,get-resource-links,trigger-long-running-operation,get-sum";
    let (code, out, err) = ctl(
        &fleet,
        &[
            "executors",
            "import",
            "everything",
            "--category",
            "reference",
            "--owner",
            "platform",
            "--scope",
            "Reference MCP server for tests",
            "--only",
            only,
            "--register",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("7 tools registered from everything"), "{out}");

    // Drift: the tools not imported are reported as new upstream, exit 1.
    let (code, out, _) = ctl(&fleet, &["--json", "executors", "drift", "everything"], &[]).await;
    assert_eq!(code, 1, "{out}");
    let drift: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(drift["removed"], json!([]));
    assert_eq!(drift["schema_changed"], json!([]));
    assert_eq!(drift["changed"], json!({}), "{drift}");
    assert!(
        drift["added"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "everything_get-env"),
        "{drift}"
    );
    assert_eq!(
        drift["protocol_version"], "2025-11-25",
        "the reference server speaks the session form"
    );

    // Every imported definition is pinned: its content hash, the admin who imported it, the
    // owner row that admitted it.
    let (code, out, err) = ctl(&fleet, &["--json", "tools", "get", "everything_echo"], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let echo: Value = serde_json::from_str(&out).unwrap();
    let pin = &echo["pin"];
    assert!(
        pin["hash"].as_str().unwrap().starts_with("sha256:"),
        "{echo}"
    );
    assert_eq!(pin["by"], "admin", "{echo}");
    assert_eq!(
        pin["basis"],
        "owner:platform (scope: Reference MCP server for tests)"
    );
    assert_eq!(pin["revision"], echo["revision"], "{echo}");
    // The catalogue's text and the upstream's now differ in the description (and, after a
    // re-annotation, in the annotations): drift names the fields, exit 1.
    let mut def = echo["def"].clone();
    def["description"] = json!("Echoes the message back (the catalogue's own wording).");
    // Marking it destructive widens it: an owner's admission is not enough (ADR 0012).
    def["annotations"]["destructive"] = json!(true);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), def.to_string()).unwrap();
    let path = file.path().display().to_string();
    let (code, out, err) = ctl(&fleet, &["--json", "tools", "update", &path], &[]).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("reaches further than the admitted one (now destructive)"),
        "{err}"
    );
    // Narrowing hints needs nothing more.
    def["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("destructive");
    def["annotations"]["read_only"] = json!(true);
    def["annotations"]["open_world"] = json!(false);
    std::fs::write(file.path(), def.to_string()).unwrap();
    let (code, out, err) = ctl(&fleet, &["--json", "tools", "update", &path], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let updated: Value = serde_json::from_str(&out).unwrap();
    assert_ne!(
        updated["pin"]["hash"], pin["hash"],
        "a changed definition is pinned again"
    );
    let (code, out, _) = ctl(&fleet, &["--json", "executors", "drift", "everything"], &[]).await;
    assert_eq!(code, 1, "{out}");
    let drift: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        drift["changed"]["everything_echo"],
        json!(["description", "annotations"]),
        "{drift}"
    );
    assert_eq!(drift["schema_changed"], json!([]), "{drift}");
    let (_, text, _) = ctl(&fleet, &["executors", "drift", "everything"], &[]).await;
    assert!(
        text.contains("changed upstream: everything_echo (description, annotations)"),
        "{text}"
    );

    // Calls through both edges and both protocol versions: content types intact.
    for (edge, version) in [(0, LEGACY), (1, STATELESS)] {
        let client = fleet.client(edge, "qa", "collector", version);
        tp_test_support::eventually(
            "the imported tools to reach the edge",
            Duration::from_secs(10),
            || async {
                let names = client.list_names().await;
                names
                    .iter()
                    .any(|n| n == "everything_get-sum")
                    .then_some(())
            },
        )
        .await;
        let echo = client
            .call("everything_echo", json!({"message": "hello upstream"}))
            .await;
        assert_eq!(echo.result()["isError"], false, "{}", echo.body);
        assert!(
            echo.result()["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("hello upstream"),
            "{}",
            echo.body
        );

        let image = client.call("everything_get-tiny-image", json!({})).await;
        let types = block_types(image.result());
        assert!(types.contains(&"image".to_owned()), "{}", image.body);
        let png = image.result()["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "image")
            .unwrap();
        assert_eq!(png["mimeType"], "image/png");
        assert!(
            png["data"].as_str().unwrap().starts_with("iVBORw0KGgo"),
            "a PNG, base64"
        );

        let structured = client
            .call(
                "everything_get-structured-content",
                json!({"location": "New York"}),
            )
            .await;
        assert!(
            structured.result()["structuredContent"].is_object(),
            "{}",
            structured.body
        );

        let resource = client
            .call(
                "everything_get-resource-reference",
                json!({"resourceType": "Text", "resourceId": 1}),
            )
            .await;
        assert!(
            block_types(resource.result()).contains(&"resource".to_owned()),
            "{}",
            resource.body
        );
        let links = client
            .call("everything_get-resource-links", json!({"count": 2}))
            .await;
        assert!(
            block_types(links.result()).contains(&"resource_link".to_owned()),
            "{}",
            links.body
        );

        // The edge validates arguments against the imported schema before the upstream sees them.
        let bad = client
            .call("everything_get-sum", json!({"a": "one", "b": 2}))
            .await;
        assert_eq!(bad.error()["code"], -32602, "{}", bad.body);
        let sum = client
            .call("everything_get-sum", json!({"a": 1, "b": 2}))
            .await;
        assert!(
            sum.result()["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains('3'),
            "{}",
            sum.body
        );
    }
    // Progress from the upstream reaches the caller's SSE stream.
    let client = fleet.client(0, "qa", "collector", LEGACY);
    let long = client
        .request(9, "tools/call", json!({"name": "everything_trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3}, "_meta": {"progressToken": "up-1"}}))
        .await;
    let progress = long
        .notifications()
        .iter()
        .filter(|n| {
            n["method"] == "notifications/progress" && n["params"]["progressToken"] == "up-1"
        })
        .count();
    assert_eq!(progress, 3, "{}", long.body);
    assert_eq!(long.result()["isError"], false, "{}", long.body);

    // A tool the upstream does not have: the upstream's own answer (an isError result naming
    // the tool), passed through unchanged.
    let mut admin = fleet.cp.admin().await;
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(pb::ToolSpec {
                name: "everything_vanished".into(),
                description: "A tool the upstream no longer has".into(),
                category: "reference".into(),
                input_schema: tp_proto::json::to_struct(&json!({"type": "object"})),
                executor: "everything".into(),
                admission: Some(pb::Admission {
                    owner: "platform".into(),
                    scope: "drift test".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    // (once the registration has reached the edge by push)
    let gone = tp_test_support::eventually(
        "the new tool to reach the edge",
        Duration::from_secs(10),
        || async {
            let reply = client.call("everything_vanished", json!({})).await;
            reply.error().is_null().then_some(reply)
        },
    )
    .await;
    assert_eq!(gone.result()["isError"], true, "{}", gone.body);
    assert!(gone.body.contains("vanished"), "{}", gone.body);
    let (_, out, _) = ctl(&fleet, &["--json", "executors", "drift", "everything"], &[]).await;
    let drift: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(drift["removed"], json!(["everything_vanished"]), "{drift}");

    // The upstream dies: calls fail with a clear error; it comes back: calls work again (the
    // edge opens a new session; the caller never sees one).
    everything.kill9().await;
    let down = client
        .call("everything_echo", json!({"message": "anyone?"}))
        .await;
    assert_eq!(down.result()["isError"], true, "{}", down.body);
    let mut everything = spawn_everything(dir.path(), port, "everything-2.log").await;
    let back = tp_test_support::eventually(
        "the upstream to answer again",
        Duration::from_secs(20),
        || async {
            let reply = client
                .call("everything_echo", json!({"message": "back"}))
                .await;
            (reply.result()["isError"] == false).then_some(reply)
        },
    )
    .await;
    assert!(back.body.contains("back"));
    everything.kill9().await;
    println!(
        "reference MCP server behind the edges: {} tools offered, 7 imported through the ceiling; text, image, structuredContent, resource and resource_link blocks, progress and errors relayed on both edges and both protocol versions; drift reported; survived an upstream restart",
        names.len()
    );
}

/// Another Toolplane edge as the upstream: it speaks 2026-07-28 and wants an API key. The
/// credential comes from the executor's environment variable on the calling edge, never from
/// the caller.
#[tokio::test]
async fn a_toolplane_edge_as_upstream_speaks_2026_07_28_with_the_executors_own_credential() {
    let fleet = Fleet::start(1, "").await;
    let upstream_key = fleet.key("qa", "collector").to_owned();
    let mut admin = fleet.cp.admin().await;
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
            update_mask: None,
            executor: Some(pb::ExecutorInfo {
                name: "downstream".into(),
                endpoint: format!("http://{}/mcp", fleet.edges[0].addr),
                protocol: pb::ExecutorProtocol::Mcp as i32,
                timeout_ms: 10_000,
                max_concurrency: 16,
                tool_prefix: "qa_".into(),
                credential_env: "TOOLPLANE_CRED_TEST_UPSTREAM".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let (code, out, err) = ctl(
        &fleet,
        &[
            "executors",
            "import",
            "downstream",
            "--only",
            "echo,test_tool_with_progress",
            "--adr",
            "ADR-100",
            "--register",
        ],
        &[("TOOLPLANE_UPSTREAM_CREDENTIAL", &upstream_key)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = ctl(
        &fleet,
        &["--json", "executors", "drift", "downstream"],
        &[("TOOLPLANE_UPSTREAM_CREDENTIAL", &upstream_key)],
    )
    .await;
    let drift: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(drift["protocol_version"], "2026-07-28", "{drift}");
    assert_eq!(code, 1, "the upstream has more tools than were imported");

    // An edge that holds the credential: acme's caller reaches the upstream as qa/collector.
    let edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        "",
        &[(
            "TOOLPLANE_CRED_TEST_UPSTREAM",
            format!("Bearer {upstream_key}"),
        )],
    )
    .await;
    let acme = McpHttp::new(&edge.addr, Some(fleet.key("acme", "collector")), LEGACY);
    let echo = acme
        .call("qa_echo", json!({"text": "through two edges"}))
        .await;
    assert_eq!(echo.result()["isError"], false, "{}", echo.body);
    assert_eq!(
        echo.result()["content"][0]["text"],
        "[qa/collector] through two edges",
        "the upstream saw the executor's credential, not the caller's key: {}",
        echo.body
    );
    assert_eq!(echo.result()["structuredContent"]["tenant"], "qa");
    let progress = acme
        .request(3, "tools/call", json!({"name": "qa_test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": 7}}))
        .await;
    let steps: Vec<f64> = progress
        .notifications()
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .filter_map(|n| n["params"]["progress"].as_f64())
        .collect();
    assert_eq!(steps, vec![0.0, 50.0, 100.0], "{}", progress.body);

    // The fleet's own edge has no credential: a clear error naming the missing variable.
    let without = fleet.client(0, "acme", "collector", LEGACY);
    tp_test_support::eventually(
        "the imported tools to reach the fleet's edge",
        Duration::from_secs(10),
        || async {
            let names = without.list_names().await;
            names.iter().any(|n| n == "qa_echo").then_some(())
        },
    )
    .await;
    let refused = without.call("qa_echo", json!({"text": "x"})).await;
    assert_eq!(refused.result()["isError"], true, "{}", refused.body);
    // The caller learns the tool is unavailable, with a reference; the operator reads in the
    // edge's log which variable is missing (configuration is not the tenant's business).
    assert!(
        refused.body.contains("unavailable") && !refused.body.contains("TOOLPLANE_CRED_"),
        "{}",
        refused.body
    );
    tp_test_support::eventually(
        "the edge's log to name the missing variable",
        Duration::from_secs(5),
        || async {
            fleet.edges[0]
                .log()
                .contains("TOOLPLANE_CRED_TEST_UPSTREAM")
                .then_some(())
        },
    )
    .await;
    println!(
        "a Toolplane edge as an MCP upstream: 2026-07-28 negotiated, the executor's credential used (the upstream saw qa/collector while the caller was acme/collector), progress relayed; without the credential: {}",
        refused.result()["content"][0]["text"]
    );
}
