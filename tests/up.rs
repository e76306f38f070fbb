//! `toolplane up`: the whole stack in one process, as the README's first command runs it
//! (`toolplanectl up`, which hands over to it, in the tour and the first-hour test).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use tp_proto::pb;
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
        &binary("toolplane"),
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
    printed_client_configs_connect(&first, &names, dir.path()).await;

    // Every demo key sees exactly what the control plane resolves for it.
    let mut admin = tp_client::Admin::connect(
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
    // The demo connection: acme's HubSpot tools carry acme's own (demo) credential, sealed to
    // the executor, which names its fingerprint — the one the control plane lists.
    let connections = admin
        .tenants
        .list_connections(pb::ListConnectionsRequest {
            tenant: "acme".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .connections;
    assert_eq!(connections.len(), 1, "{connections:?}");
    let crm = acme
        .call("hubspot_crm", json!({"object": "contacts", "query": "cfo"}))
        .await;
    assert_eq!(
        crm.result()["structuredContent"]["credential"],
        json!({"provider": "hubspot", "fingerprint": connections[0].fingerprint}),
        "{}",
        crm.body
    );
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
/// of `cargo run`) in a folder where `toolplane up` keeps its data in `./.toolplane`.
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
    wait_for_ready(&ready).await;

    let output = tokio::process::Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", &script])
        // No address: the CLI finds `up` through ./.toolplane/credentials.json.
        .env_remove("TOOLPLANE_ADDR")
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
        "unknown action \\\"ingest\\\"",
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

/// The per-client snippets `up` prints work in the clients that run here: Claude Code's
/// `claude mcp add` line (its `mcp get` connects and reports the server's health), and Claude
/// Desktop's entry, run as Desktop runs it, through the `mcp-remote` bridge over stdio. A wrong
/// key fails both, so the checks can fail. Cursor and VS Code cannot run here (see
/// docs/operators-guide.md).
async fn printed_client_configs_connect(credentials: &Value, names: &[&str], dir: &Path) {
    let bin = tp_test_support::node_dir().join("node_modules/.bin");
    let node_bin = tp_test_support::node().parent().unwrap().to_owned();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let key =
        credentials["mcp_client_config"]["mcpServers"]["toolplane"]["headers"]["Authorization"]
            .as_str()
            .unwrap()
            .strip_prefix("Bearer ")
            .unwrap()
            .to_owned();

    // Claude Code: the printed line as a user pastes it, with a wrong key beside it.
    let add = credentials["clients"]["claude_code"]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let wrong = add
        .replace(&key, "tp_wrong_key_0000")
        .replace("toolplane http", "wrongkey http");
    let home = dir.join("claude-home");
    std::fs::create_dir_all(home.join("project")).unwrap();
    let script = format!(
        "set -e\n{add} >/dev/null\n{wrong} >/dev/null\nclaude mcp get toolplane\nclaude mcp get wrongkey"
    );
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new("bash")
            .args(["-c", &script])
            .env("PATH", &path)
            .env("HOME", &home)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(home.join("project"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("claude mcp get finished in 60 s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let statuses: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("Status:"))
        .collect();
    assert!(
        output.status.success() && statuses.len() == 2,
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        statuses[0].contains("Connected") && !statuses[0].contains("Failed"),
        "{stdout}"
    );
    assert!(
        statuses[1].contains("Failed"),
        "a wrong key must not connect: {stdout}"
    );

    // Claude Desktop: the config entry as Desktop runs it (npx resolves the installed bridge).
    let entry = &credentials["clients"]["claude_desktop"]["config"]["mcpServers"]["toolplane"];
    let run = |auth: String| {
        let entry = entry.clone();
        let path = path.clone();
        let home = home.clone();
        async move {
            let args: Vec<String> = entry["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(args[..2], ["-y", "mcp-remote"], "{entry}");
            let mut child = tokio::process::Command::new("mcp-remote")
                .args(&args[2..])
                .env("PATH", &path)
                .env("HOME", &home)
                .env("AUTH_HEADER", auth)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            drive_stdio(&mut child).await
        }
    };
    let listed = run(entry["env"]["AUTH_HEADER"].as_str().unwrap().to_owned()).await;
    let bridged: Vec<&str> = listed
        .as_ref()
        .and_then(|v| v["result"]["tools"].as_array())
        .unwrap_or_else(|| panic!("mcp-remote did not list tools: {listed:?}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(bridged, names, "Claude Desktop through mcp-remote");
    let refused = run("Bearer tp_wrong_key_0000".to_owned()).await;
    assert!(
        refused.is_none(),
        "a wrong key must not list tools through the bridge: {refused:?}"
    );
    println!(
        "client configs: Claude Code connected ({}); Claude Desktop via mcp-remote listed {} tools; wrong keys refused",
        statuses[0].trim(),
        bridged.len()
    );
}

/// Speaks MCP over a stdio child: initialize, initialized, tools/list. The `tools/list`
/// answer, or `None` when the child exits or stays silent for 30 s first.
async fn drive_stdio(child: &mut tokio::process::Child) -> Option<Value> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let send = |message: Value| format!("{message}\n");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "desktop-like", "version": "1"}}});
    stdin.write_all(send(init).as_bytes()).await.ok()?;
    let answer = async {
        let mut listed = false;
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == 1 && message.get("result").is_some() && !listed {
                listed = true;
                let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
                stdin.write_all(send(initialized).as_bytes()).await.ok()?;
                stdin.write_all(send(list).as_bytes()).await.ok()?;
            } else if message["id"] == 2 {
                return Some(message);
            }
        }
        None
    };
    let result = tokio::time::timeout(std::time::Duration::from_secs(30), answer)
        .await
        .ok()
        .flatten();
    let _ = child.start_kill();
    result
}

/// A free port on 127.0.0.1 (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `toolplanectl` in `cwd` without any address or token in the environment.
async fn ctl(cwd: &Path, args: &[&str]) -> (bool, String, String) {
    let output = tokio::process::Command::new(binary("toolplanectl"))
        .args(args)
        .current_dir(cwd)
        .env_remove("TOOLPLANE_ADDR")
        .env_remove("TOOLPLANE_ADMIN_TOKEN")
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The first hour of a new user, as issue 19 found it: the CLI finds `up` on any port through
/// `credentials.json` (with or without a scheme) and says what it tried and what an MCP port
/// is; a second `up` on the same ports names the first; a damaged credentials file stops `up`
/// before anything changes, and moving it aside leaves no orphaned demo key live; bulk
/// registration reports progress; `usage` prints dates.
#[tokio::test]
async fn first_hour_mistakes_get_sentences_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<String> = (0..5)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let up_args = |data_dir: &str, ready: &Path| -> Vec<String> {
        vec![
            "up".into(),
            "--data-dir".into(),
            data_dir.into(),
            "--mcp-listen".into(),
            ports[0].clone(),
            "--grpc-listen".into(),
            ports[1].clone(),
            "--executor-listen".into(),
            ports[2].clone(),
            "--wiki-listen".into(),
            ports[3].clone(),
            "--admin-listen".into(),
            ports[4].clone(),
            "--ready-file".into(),
            ready.display().to_string(),
        ]
    };
    let spawn = |args: Vec<String>, log: &str| {
        tokio::process::Command::new(binary("toolplanectl"))
            .args(args)
            .current_dir(dir.path())
            .env_remove("TOOLPLANE_ADDR")
            .stdout(std::fs::File::create(dir.path().join(format!("{log}.out"))).unwrap())
            .stderr(std::fs::File::create(dir.path().join(format!("{log}.err"))).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let ready = dir.path().join("ready");
    let mut first = spawn(up_args(".toolplane", &ready), "up1");
    wait_for_ready(&ready).await;
    let progress = std::fs::read_to_string(dir.path().join("up1.err")).unwrap();
    for stage in [
        "up: opening the store",
        "up: starting the MCP edge",
        "up: ready in",
    ] {
        assert!(progress.contains(stage), "{stage:?} missing:\n{progress}");
    }
    assert!(
        !progress.contains('\u{1b}'),
        "no colour codes in a file:\n{progress}"
    );

    // 2. No --addr: the address (another port than the default) and the token come from
    // .toolplane/credentials.json.
    let (ok, stdout, stderr) = ctl(dir.path(), &["policy", "show"]).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("35"), "{stdout}");
    // host:port without a scheme.
    let (ok, stdout, stderr) = ctl(dir.path(), &["--addr", &ports[1], "tenants", "list"]).await;
    assert!(ok && stdout.contains("acme"), "{stdout}{stderr}");
    // The MCP port: it says it is the edge.
    let (ok, _, stderr) = ctl(dir.path(), &["--addr", &ports[0], "tenants", "list"]).await;
    assert!(
        !ok && stderr.contains("is a Toolplane MCP edge") && stderr.contains("--addr"),
        "{stderr}"
    );
    // Nothing there: what was tried, where it came from, how to point elsewhere.
    let closed = format!("127.0.0.1:{}", free_port());
    let (ok, _, stderr) = ctl(dir.path(), &["--addr", &closed, "tenants", "list"]).await;
    assert!(
        !ok && stderr.contains(&format!("http://{closed}"))
            && stderr.contains("--addr or TOOLPLANE_ADDR")
            && stderr.contains("toolplane up"),
        "{stderr}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let (ok, _, stderr) = ctl(elsewhere.path(), &["--token", "x", "tenants", "list"]).await;
    assert!(!ok && stderr.contains("the default"), "{stderr}");

    // 11. Bulk registration: one file holding an array, with progress on stderr.
    let defs = json!([
        {"name": "bulk_one", "description": "First bulk tool", "category": "platform",
         "input_schema": {"type": "object"}, "executor": "demo",
         "admission": {"owner": "sre", "scope": "bulk test"}},
        {"name": "bulk_two", "description": "Second bulk tool", "category": "platform",
         "input_schema": {"type": "object"}, "executor": "demo",
         "admission": {"owner": "sre", "scope": "bulk test"}}
    ]);
    std::fs::write(dir.path().join("bulk.json"), defs.to_string()).unwrap();
    for tool in ["web_fetch", "salesforce_query"] {
        let (ok, stdout, stderr) = ctl(dir.path(), &["tools", "retire", tool]).await;
        assert!(ok, "{stdout}{stderr}");
    }
    let (ok, stdout, stderr) = ctl(dir.path(), &["tools", "register", "bulk.json"]).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stderr.contains("registering tools: 2/2") && stderr.contains("registered 2 tools"),
        "{stderr}"
    );
    // 34 of 35: the next run's first tool fills the ceiling and its second is refused, saying
    // how far the run got.
    let third = json!([{"name": "bulk_three", "description": "Third", "category": "platform",
        "input_schema": {"type": "object"}, "executor": "demo",
        "admission": {"owner": "sre", "scope": "bulk test"}},
        {"name": "bulk_four", "description": "Fourth", "category": "platform",
        "input_schema": {"type": "object"}, "executor": "demo",
        "admission": {"owner": "sre", "scope": "bulk test"}}]);
    std::fs::write(dir.path().join("bulk2.json"), third.to_string()).unwrap();
    let (ok, _, stderr) = ctl(dir.path(), &["tools", "register", "bulk2.json"]).await;
    assert!(
        !ok && stderr.contains("bulk_four refused after 1 of 2")
            && stderr.contains("FailedPrecondition"),
        "{stderr}"
    );
    let top = ctl(dir.path(), &["--help"]).await.1;
    assert!(
        top.lines()
            .any(|l| l.trim_start().starts_with("up") && l.contains("wiki")),
        "{top}"
    );
    let help = ctl(dir.path(), &["tools", "register", "--help"]).await.1;
    for field in ["input_schema", "executor", "admission", "polymorphism"] {
        assert!(help.contains(field), "{field} missing from --help:\n{help}");
    }

    // 6. Usage: dates, not epoch milliseconds (edges report usage every few seconds).
    let creds: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".toolplane/credentials.json")).unwrap(),
    )
    .unwrap();
    let key = creds["keys"][0]["key"].as_str().unwrap().to_owned();
    let client = McpHttp::new(
        creds["mcp_url"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .trim_end_matches("/mcp"),
        Some(&key),
        "2025-11-25",
    );
    let call = client.call("gmail", json!({"query": "x"})).await;
    assert_eq!(call.result()["isError"], false, "{}", call.body);
    // The demo's mail is the caller's own, never another demo tenant's.
    let tenant = creds["keys"][0]["tenant"].as_str().unwrap();
    assert!(
        call.body.contains(&format!("@{tenant}.example")),
        "{}",
        call.body
    );
    for other in ["acme", "globex", "initech"]
        .iter()
        .filter(|t| **t != tenant)
    {
        assert!(
            !call.body.contains(&format!("@{other}.example")),
            "{}",
            call.body
        );
    }
    // The wiki's pages are its owner's only, under `up` too.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(".toolplane/wiki"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }
    // A bare edge in a folder without a token says where the token comes from.
    let empty = tempfile::tempdir().unwrap();
    let edge = tokio::process::Command::new(binary("tp-edge"))
        .arg("--check-config")
        .current_dir(empty.path())
        .env_remove("TOOLPLANE_EDGE_EDGE_TOKEN")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&edge.stderr);
    assert!(
        !edge.status.success() && stderr.contains("edge-token") && stderr.contains("toolplane up"),
        "{stderr}"
    );
    let usage =
        tp_test_support::eventually("usage reported", std::time::Duration::from_secs(30), || {
            let dir = dir.path().to_owned();
            async move {
                let (_, stdout, _) = ctl(&dir, &["usage", "--tenant", "acme"]).await;
                stdout.contains("gmail").then_some(stdout)
            }
        })
        .await;
    assert!(
        usage.contains("LAST USED")
            && usage.contains(" UTC (")
            && (usage.contains("ago)") || usage.contains("just now)")),
        "{usage}"
    );

    // 10. A second `up` on the same ports names the first.
    let (ok, _, stderr) = ctl(
        dir.path(),
        &up_args("other-data", &dir.path().join("ready2"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    let pid = first.id().unwrap();
    assert!(
        !ok && stderr.contains("another `toolplane up`")
            && stderr.contains(&format!("pid {pid}"))
            && stderr.contains("--mcp-listen"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("other-data").exists(),
        "a refused `up` leaves no data folder behind"
    );

    // 1. A damaged credentials file stops `up` before anything changes.
    first.kill().await.unwrap();
    let _ = first.wait().await;
    let path = dir.path().join(".toolplane/credentials.json");
    let damaged = "{\"keys\": [ {\"tenant\": \"acme\"";
    std::fs::write(&path, damaged).unwrap();
    let (ok, _, stderr) = ctl(
        dir.path(),
        &up_args(".toolplane", &dir.path().join("ready3"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    assert!(
        !ok && stderr.contains("is damaged") && stderr.contains("mv "),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        damaged,
        "left as it was"
    );

    // Moved aside: new keys, and the six an earlier `up` issued are revoked.
    std::fs::rename(&path, dir.path().join("credentials.damaged")).unwrap();
    let ready4 = dir.path().join("ready4");
    let mut again = spawn(up_args(".toolplane", &ready4), "up4");
    wait_for_ready(&ready4).await;
    let log = std::fs::read_to_string(dir.path().join("up4.err")).unwrap();
    assert!(
        log.contains("revoked the demo keys an earlier `up` issued") && log.contains("revoked=6"),
        "{log}"
    );
    let (ok, stdout, stderr) = ctl(dir.path(), &["--json", "keys", "list"]).await;
    assert!(ok, "{stderr}");
    let keys: Value = serde_json::from_str(&stdout).unwrap();
    let live = keys
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["revoked_at"] == 0)
        .count();
    assert_eq!(live, 6, "one live key per demo (tenant, role): {keys}");
    let old = McpHttp::new(
        creds["mcp_url"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .trim_end_matches("/mcp"),
        Some(&key),
        "2025-11-25",
    );
    let refused = old.request(1, "tools/list", json!({})).await;
    assert_eq!(
        refused.status, 401,
        "the orphaned key is revoked: {}",
        refused.body
    );
    again.kill().await.unwrap();
    println!(
        "first hour: discovery, edge detection, port holder, damaged credentials, bulk progress and usage dates checked"
    );
}

/// Waits (up to 30 s) until `up` has written its ready file.
async fn wait_for_ready(ready: &Path) {
    tp_test_support::eventually("up is ready", std::time::Duration::from_secs(30), || {
        let ready = ready.to_owned();
        async move {
            std::fs::read_to_string(&ready)
                .ok()
                .filter(|s| !s.is_empty())
        }
    })
    .await;
}

/// `up --log-format json` writes nothing on stderr but JSON lines (its own progress included),
/// prints the admin listener's address as an address, and a stop logs no reconnection.
#[tokio::test]
async fn up_with_json_logs_writes_only_json_and_stops_without_reconnecting() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let port = || format!("127.0.0.1:{}", free_port());
    let stderr_file = dir.path().join("up.err");
    let mut up = tokio::process::Command::new(binary("toolplane"))
        .args([
            "up",
            "--log-format",
            "json",
            "--data-dir",
            ".toolplane",
            "--mcp-listen",
            &port(),
            "--grpc-listen",
            &port(),
            "--executor-listen",
            &port(),
            "--wiki-listen",
            &port(),
            "--admin-listen",
            &port(),
            "--ready-file",
            ready.to_str().unwrap(),
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_ready(&ready).await;
    // SIGTERM: the orderly stop.
    let pid = up.id().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), up.wait())
        .await
        .expect("up stopped within 30 s")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let log = std::fs::read_to_string(&stderr_file).unwrap();
    let mut lines = 0;
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let parsed: Result<Value, _> = serde_json::from_str(line);
        assert!(parsed.is_ok(), "not JSON: {line:?}");
        lines += 1;
    }
    assert!(
        log.contains("ready in"),
        "the progress is logged too: {log}"
    );
    assert!(!log.contains("Some("), "{log}");
    assert!(
        !log.contains("reconnecting"),
        "a stopping edge reconnects: {log}"
    );
    println!("up --log-format json: {lines} lines, every one JSON; stopped without reconnecting");
}

/// The CLI links no service: `up`, `export` and `import` are handed over to the `toolplane`
/// launcher beside it (or on PATH). Without one, the CLI says which binary is missing and how
/// to build it, and starts nothing; `--help` reaches the launcher untouched.
#[tokio::test]
async fn the_cli_hands_up_over_to_the_launcher_and_says_so_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let lonely = dir.path().join("toolplanectl");
    std::fs::copy(binary("toolplanectl"), &lonely).unwrap();
    for command in ["up", "export", "import"] {
        let output = tokio::process::Command::new(&lonely)
            .args([command, "--data-dir", "data"])
            .current_dir(dir.path())
            .env("PATH", dir.path().join("empty"))
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "`toolplanectl {command}` is run by the `toolplane` launcher"
            )) && stderr.contains("cargo build --release --bin toolplane"),
            "{stderr}"
        );
    }
    assert!(!dir.path().join("data").exists(), "nothing started");
    let help = tokio::process::Command::new(binary("toolplanectl"))
        .args(["up", "--help"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && stdout.contains("--mcp-listen") && stdout.contains("toolplane up"),
        "{stdout}"
    );
}
