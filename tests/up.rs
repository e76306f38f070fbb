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
        "--admin-listen",
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

/// `up` in `dir` (its data in `dir/data`): the process, the MCP address and the credentials.
pub(crate) async fn start_up(dir: &Path) -> (Process, String, Value) {
    let (process, addr) = start(dir, 0).await;
    let credentials = credentials(dir);
    (process, addr, credentials)
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

    // The two lines under "Try it:" work as printed, in a shell, as a user pastes them
    // (grpcurl from where scripts/prereqs.sh installs it).
    let printed: Vec<String> = log
        .lines()
        .skip_while(|l| l.trim() != "Try it:")
        .skip(1)
        .take(2)
        .map(|l| l.trim().to_owned())
        .collect();
    assert_eq!(printed[0], first["curl"].as_str().unwrap(), "{log}");
    assert_eq!(printed[1], first["grpcurl"].as_str().unwrap(), "{log}");
    let path = format!(
        "{}:{}",
        tp_test_support::grpcurl().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut outputs = Vec::new();
    for line in &printed {
        let output = tokio::process::Command::new("bash")
            .args(["-c", line])
            .env("PATH", &path)
            .current_dir(dir.path())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{line}\n{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        outputs.push(stdout);
    }
    let listed: Value =
        serde_json::from_str(&outputs[0]).unwrap_or_else(|e| panic!("{e}: {}", outputs[0]));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"gmail") && !names.contains(&"salesforce_query"),
        "{names:?}"
    );
    let policy: Value =
        serde_json::from_str(&outputs[1]).unwrap_or_else(|e| panic!("{e}: {}", outputs[1]));
    assert_eq!(policy["ceiling"], 35, "{policy}");
    println!(
        "printed curl line: {} tools for acme/collector; printed grpcurl line: ceiling {} ({})",
        names.len(),
        policy["ceiling"],
        policy["adr"]
    );

    // The MCP client config works in a real MCP client (the official Python SDK), URL and
    // header as written.
    let server = &first["mcp_client_config"]["mcpServers"]["toolplane"];
    let key = server["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap();
    assert_eq!(server["url"], first["mcp_url"]);
    let script = std::fs::canonicalize("clients/python_client.py").unwrap();
    let out = crate::clients::run_client(
        &tp_test_support::python(),
        &[
            script.display().to_string(),
            server["url"].as_str().unwrap().to_owned(),
            key.to_owned(),
            "legacy".to_owned(),
            json!([["gmail", {"query": "from:cfo"}]]).to_string(),
        ],
        dir.path(),
    )
    .await;
    assert_eq!(out["tools"], json!(names), "{out}");
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");

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

/// The README's five-minute tour, run as written (the `tp` line points at the built CLI instead
/// of `cargo run`) in a folder where `toolplanectl up` keeps its data in `./.toolplane`.
#[tokio::test]
async fn the_readme_tour_runs_as_written_against_up() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let tour: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("## A five-minute tour"))
        .skip_while(|l| *l != "```sh")
        .skip(1)
        .take_while(|l| *l != "```")
        .collect();
    assert!(tour.len() > 20, "the tour block is missing from README.md");
    assert!(tour[0].starts_with("tp() {"), "{}", tour[0]);
    let script = format!(
        "tp() {{ {} \"$@\"; }}\n{}\n",
        binary("toolplanectl").display(),
        tour[1..].join("\n")
    );

    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let args: Vec<String> = [
        "up",
        "--data-dir",
        ".toolplane",
        "--mcp-listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
        "--executor-listen",
        "127.0.0.1:0",
        "--wiki-listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--ready-file",
        &ready.display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let log = dir.path().join("up.log");
    let mut process = {
        let mut command = tokio::process::Command::new(binary("toolplanectl"));
        command
            .args(&args)
            .current_dir(dir.path())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("up.err")).unwrap())
            .kill_on_drop(true);
        command.spawn().unwrap()
    };
    tp_test_support::eventually("up is ready", std::time::Duration::from_secs(30), || {
        let ready = ready.clone();
        async move {
            std::fs::read_to_string(&ready)
                .ok()
                .filter(|s| !s.is_empty())
        }
    })
    .await;
    let creds: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".toolplane/credentials.json")).unwrap(),
    )
    .unwrap();
    let grpc = creds["grpc_addr"].as_str().unwrap().to_owned();

    let output = tokio::process::Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", &script])
        .env("TOOLPLANE_ADDR", format!("http://{grpc}"))
        .current_dir(dir.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let _ = process.start_kill();
    assert!(
        output.status.success(),
        "the tour stopped ({}):\n{stdout}\n{stderr}",
        output.status
    );
    for needle in [
        "21 tools: ",
        "13 tools: ",
        "unknown tool: salesforce_query",
        "refused: the ceiling is full",
        "lisbon-office",
        "\"answered\":true",
        "4 tools: ",
        "dispatch_parallel",
        "drift found (exit 1)",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from the tour's output:\n{stdout}\n{stderr}"
        );
    }
    assert!(stderr.contains("35 of 35"), "{stderr}");
    let lines = stdout.lines().filter(|l| l.contains(" tools: ")).count();
    println!(
        "README tour: {} lines of shell ran, {lines} tool listings checked",
        tour.len()
    );
}
