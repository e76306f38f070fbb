//! `toolplanectl up`: the whole stack in one process, as the README's first command runs it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use tp_test_support::process::wait_ready;
use tp_test_support::{McpHttp, Process, binary};

async fn start(dir: &Path, run: u32) -> (Process, String) {
    let ready = dir.join(format!("ready-{run}"));
    let args: Vec<String> = [
        "up",
        "--data-dir",
        &dir.join("data").display().to_string(),
        "--mcp-listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
        "--executor-listen",
        "127.0.0.1:0",
        "--wiki-listen",
        "127.0.0.1:0",
        "--ready-file",
        &ready.display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut process = Process::spawn(
        &binary("toolplanectl"),
        &args,
        &dir.join(format!("up-{run}.log")),
        &[],
    );
    let addr = wait_ready(&ready, &mut process).await;
    (process, addr)
}

fn credentials(dir: &Path) -> Value {
    let path = dir.join("data/credentials.json");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "credentials.json must be private");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[tokio::test]
async fn up_runs_the_seeded_stack_prints_how_to_connect_and_restarts_on_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let (mut process, addr) = start(dir.path(), 1).await;
    let first = credentials(dir.path());
    assert_eq!(first["mcp_url"], format!("http://{addr}/mcp"));
    let keys = first["keys"].as_array().unwrap().clone();
    assert_eq!(
        keys.len(),
        6,
        "a collector and an executor key per demo tenant"
    );
    let log = process.log_text();
    for needle in [
        "Toolplane is up",
        first["mcp_url"].as_str().unwrap(),
        "curl -s",
        "grpcurl -plaintext",
        "mcpServers",
    ] {
        assert!(log.contains(needle), "{needle:?} missing from:\n{log}");
    }

    // Every demo key sees exactly what the control plane resolves for it.
    let mut admin = tp_ctl::Admin::connect(
        &format!("http://{}", first["grpc_addr"].as_str().unwrap()),
        first["admin_token"].as_str().unwrap(),
    )
    .await
    .unwrap();
    let mut counts = Vec::new();
    for key in &keys {
        let (tenant, role) = (
            key["tenant"].as_str().unwrap(),
            key["role"].as_str().unwrap(),
        );
        let expected = crate::fleet::listing_of(&mut admin, tenant, role).await;
        let client = McpHttp::new(&addr, key["key"].as_str(), "2025-11-25");
        assert_eq!(client.list_names().await, expected, "{tenant}/{role}");
        counts.push(format!("{tenant}/{role}={}", expected.len()));
    }
    println!("demo registries: {}", counts.join(" "));
    let acme = McpHttp::new(
        &addr,
        keys.iter()
            .find(|k| k["tenant"] == "acme" && k["role"] == "collector")
            .and_then(|k| k["key"].as_str()),
        "2026-07-28",
    );
    let call = acme.call("gmail", json!({"query": "from:cfo"})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.body);
    // The wiki runs in the same process, its pages under the data dir.
    let ingest = acme
        .call("client_wiki", json!({"action": "ingest", "source": {"type": "text", "text": "Acme Corp opened an office in Lisbon in 2024.", "source_label": "Lisbon office"}}))
        .await;
    assert_eq!(ingest.result()["isError"], false, "{}", ingest.body);
    assert!(
        dir.path()
            .join("data/wiki/acme/wiki/sources/lisbon-office.md")
            .exists()
    );

    // Ctrl-C / SIGTERM stops everything cleanly, even with the edge's watch stream open.
    let status = process.terminate().await.expect("exited within 10 s");
    assert!(status.success(), "{status:?}\n{}", process.log_text());

    // A second `up` reuses the data and the keys.
    let (mut again, addr) = start(dir.path(), 2).await;
    let second = credentials(dir.path());
    assert_eq!(
        second["keys"], first["keys"],
        "keys are kept across restarts"
    );
    assert!(!again.log_text().contains("seeded the demo world"));
    let acme = McpHttp::new(&addr, acme.key.as_deref(), "2025-11-25");
    let call = acme.call("gmail", json!({"query": "from:cfo"})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.body);
    let answer = acme
        .call("client_wiki", json!({"action": "query", "question": "Where did Acme Corp open an office?", "persist_output": false}))
        .await;
    assert_eq!(
        answer.result()["structuredContent"]["answered"],
        true,
        "wiki pages survive a restart: {}",
        answer.body
    );
    let status = again.terminate().await.expect("exited within 10 s");
    assert!(status.success());
}
