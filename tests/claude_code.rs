//! Claude Code itself against an edge: every tool the edge lists for a tenant and role is one
//! Claude Code hands to the model. Claude Code runs headless (`claude -p`) with its model API
//! pointed at a stand-in that records the request it receives — the `tools` array is what
//! Claude Code accepted from the MCP server — and answers with an error, so no model and no
//! network are needed. Its debug log must have no "Skipping tool" line, and every schema it
//! sends must meet what the Anthropic and OpenAI tool APIs document for tool input schemas.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_proto::pb;

use crate::fleet::{Fleet, LEGACY};

/// A stand-in for the Anthropic Messages API: records each request body, answers 400.
struct ModelApi {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ModelApi {
    async fn start() -> ModelApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let mut data = Vec::new();
                    let mut buffer = [0u8; 65536];
                    let (head_end, length) = loop {
                        let Ok(n) = stream.read(&mut buffer).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        data.extend_from_slice(&buffer[..n]);
                        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
                            let length = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            break (end + 4, length);
                        }
                    };
                    while data.len() < head_end + length {
                        let Ok(n) = stream.read(&mut buffer).await else {
                            return;
                        };
                        if n == 0 {
                            break;
                        }
                        data.extend_from_slice(&buffer[..n]);
                    }
                    if let Ok(body) = serde_json::from_slice::<Value>(&data[head_end..]) {
                        recorded.lock().unwrap().push(body);
                    }
                    let answer = r#"{"type":"error","error":{"type":"invalid_request_error","message":"a test stand-in: no model here"}}"#;
                    let response = format!(
                        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        ModelApi { url, requests }
    }

    /// The tools of the last request Claude Code sent.
    fn tools(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find_map(|r| r["tools"].as_array().cloned())
            .unwrap_or_default()
    }
}

/// Runs `claude -p` against `edge` with `key`; its debug log.
async fn claude_lists(edge: &str, key: &str, api: &ModelApi, home: &std::path::Path) -> String {
    let bin = tp_test_support::node_dir().join("node_modules/.bin");
    let node_bin = tp_test_support::node().parent().unwrap().to_owned();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _ = std::fs::remove_dir_all(home);
    std::fs::create_dir_all(home.join("project")).unwrap();
    let config = json!({"mcpServers": {"toolplane": {"type": "http", "url": format!("http://{edge}/mcp"),
        "headers": {"Authorization": format!("Bearer {key}")}}}});
    let config_file = home.join("mcp.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new("claude")
            .args([
                "-p",
                "Which tools do you have?",
                "--debug",
                "--strict-mcp-config",
                "--mcp-config",
            ])
            .arg(&config_file)
            .env("PATH", &path)
            .env("HOME", home)
            .env("ANTHROPIC_API_KEY", "sk-ant-test-stand-in")
            .env("ANTHROPIC_BASE_URL", &api.url)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(home.join("project"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("claude -p finished in 90 s")
    .unwrap();
    let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
    for entry in std::fs::read_dir(home.join(".claude/debug"))
        .into_iter()
        .flatten()
        .flatten()
    {
        log.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    log
}

/// What the Anthropic and OpenAI tool APIs document for a tool: a name of letters, digits,
/// `_` and `-` (64 at most, OpenAI's bound; Anthropic allows 128), and an input schema that is
/// one object schema, without `oneOf`, `anyOf`, `allOf`, `not`, `enum` or `const` at its top.
fn check_model_api_constraints(name: &str, schema: &Value) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!("name {name:?}"));
    }
    tp_registry::listing::check_listable(schema)
}

/// Claude Code drops no tool of any (tenant, role) of the demo world (globex listed in full, so
/// that every polymorphic tool is among them): the tools it sends the model are exactly what the
/// edge lists, each with a schema both model APIs accept.
#[tokio::test]
async fn claude_code_accepts_every_tool_the_edge_lists() {
    let fleet = Fleet::start(1, "").await;
    fleet
        .set_disclosure(
            "globex",
            pb::Disclosure {
                mode: pb::DisclosureMode::Full as i32,
                ..Default::default()
            },
        )
        .await;
    let api = ModelApi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let mut polymorphic = 0;
    for (tenant, role) in [
        ("globex", "collector"),
        ("globex", "executor"),
        ("acme", "collector"),
    ] {
        let listed = fleet
            .client(0, tenant, role, LEGACY)
            .request(1, "tools/list", json!({}))
            .await;
        let mut expected: Vec<String> = listed.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        // The listing is complete on one page for these tenants.
        assert!(listed.result().get("nextCursor").is_none());
        for tool in listed.result()["tools"].as_array().unwrap() {
            let name = tool["name"].as_str().unwrap();
            check_model_api_constraints(name, &tool["inputSchema"])
                .unwrap_or_else(|e| panic!("{tenant}/{role}: {name}: {e}"));
            polymorphic +=
                usize::from(tool["inputSchema"]["properties"]["action"]["enum"].is_array());
        }
        let log = claude_lists(
            &fleet.edges[0].addr,
            fleet.key(tenant, role),
            &api,
            &dir.path().join(format!("{tenant}-{role}")),
        )
        .await;
        let skipped: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("Skipping tool"))
            .collect();
        assert!(skipped.is_empty(), "{tenant}/{role}: {skipped:#?}");
        let sent = api.tools();
        let mut accepted: Vec<String> = sent
            .iter()
            .filter_map(|t| t["name"].as_str()?.strip_prefix("mcp__toolplane__"))
            .map(str::to_owned)
            .collect();
        assert!(
            !accepted.is_empty(),
            "{tenant}/{role}: no request reached the model API:\n{log}"
        );
        accepted.sort();
        expected.sort();
        assert_eq!(accepted, expected, "{tenant}/{role}");
        for tool in sent.iter().filter(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("mcp__toolplane__"))
        }) {
            tp_registry::listing::check_listable(&tool["input_schema"]).unwrap_or_else(|e| {
                panic!("{tenant}/{role}: Claude Code sent {}: {e}", tool["name"])
            });
        }
        checked += accepted.len();
    }
    assert!(polymorphic >= 3, "the polymorphic tools were among them");
    println!(
        "Claude Code accepted all {checked} tools of globex (collector, executor) and acme (collector), {polymorphic} of them polymorphic; no tool skipped; every schema passes the Anthropic and OpenAI constraints"
    );
}
