//! Connections (issue 35, ADR 0015): a tenant connects a provider with an API credential; its
//! tools appear on every edge; each call to an MCP upstream carries that tenant's credential
//! and no other; disconnecting takes the tools away; the credential is nowhere in clear — not
//! in the control plane's database, its change log, an export, Redis or any log.

use std::time::Duration;

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::McpHttp;

use crate::fleet::{Fleet, LEGACY, test_tool};
use crate::upstream::ctl;

/// Every file of the control plane's SQLite database (the WAL included), as bytes.
fn database_bytes(fleet: &Fleet) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(&fleet.cp.data_dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("control-plane.db") {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    assert!(
        !bytes.is_empty(),
        "no database under {:?}",
        fleet.cp.data_dir
    );
    bytes
}

/// Everything Redis holds, as the bytes of an uncompressed snapshot.
async fn redis_bytes(fleet: &Fleet) -> Vec<u8> {
    let port = fleet.redis.port.to_string();
    let cli = |args: &[&str]| {
        let output = std::process::Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "redis-cli {args:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    cli(&["CONFIG", "SET", "rdbcompression", "no"]);
    cli(&["SAVE"]);
    let dir = cli(&["CONFIG", "GET", "dir"]);
    let dir = dir.lines().nth(1).unwrap().trim().to_owned();
    let file = cli(&["CONFIG", "GET", "dbfilename"]);
    let file = file.lines().nth(1).unwrap().trim().to_owned();
    let keys = cli(&["DBSIZE"]);
    assert!(
        keys.trim().parse::<u64>().unwrap() > 0,
        "Redis is empty: the check would prove nothing"
    );
    std::fs::read(std::path::Path::new(&dir).join(file)).unwrap()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

async fn echo(client: &McpHttp, text: &str) -> Value {
    client
        .call("crm_echo", json!({"text": text}))
        .await
        .result()
        .clone()
}

async fn sees(client: &McpHttp, tool: &str) -> bool {
    client.list_names().await.iter().any(|n| n == tool)
}

/// The world: provider `crm`; an MCP executor whose upstream is the fleet's edge 0 (it wants
/// an API key, and answers `echo` with the tenant it authenticated); the tool `crm_echo` of
/// provider `crm`.
async fn world(fleet: &Fleet) {
    let mut admin = fleet.cp.admin().await;
    admin
        .catalog
        .upsert_provider(pb::UpsertProviderRequest {
            provider: Some(pb::Provider {
                id: "crm".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
            update_mask: None,
            executor: Some(pb::ExecutorInfo {
                name: "crm".into(),
                endpoint: format!("http://{}/mcp", fleet.edges[0].addr),
                protocol: pb::ExecutorProtocol::Mcp as i32,
                timeout_ms: 10_000,
                max_concurrency: 16,
                tool_prefix: "crm_".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let mut tool = test_tool(
        "crm_echo",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        true,
    );
    tool.provider = "crm".into();
    tool.executor = "crm".into();
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest { tool: Some(tool) })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_connected_tenants_calls_carry_its_own_credential_and_no_secret_is_stored_in_clear() {
    let fleet = Fleet::start(2, "").await;
    world(&fleet).await;
    // The credentials: API keys of the upstream (edge 0), so that its echo names whose
    // credential it received.
    let qa_key = fleet.key("qa", "collector").to_owned();
    let globex_key = fleet.key("globex", "collector").to_owned();
    let acme = [0, 1].map(|edge| fleet.client(edge, "acme", "collector", LEGACY));
    let initech = fleet.client(1, "initech", "collector", LEGACY);
    let globex = fleet.client(1, "globex", "collector", LEGACY);
    assert!(
        !sees(&acme[1], "crm_echo").await,
        "acme has not connected crm"
    );

    // Connect: acme with qa's key, initech with globex's (the CLI reads it from the environment).
    let (code, out, err) = ctl(
        &fleet,
        &["tenants", "connect", "acme", "--provider", "crm"],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", &qa_key)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains(&qa_key) && out.contains("crm"), "{out}");
    let (code, out, err) = ctl(
        &fleet,
        &["tenants", "connect", "initech", "--provider", "crm"],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", &globex_key)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    for client in acme.iter().chain([&initech]) {
        tp_test_support::eventually(
            "the connected provider's tool on every edge",
            Duration::from_secs(10),
            || async { sees(client, "crm_echo").await.then_some(()) },
        )
        .await;
    }

    // Each tenant's calls carry its own credential, on both edges, and only its own.
    for client in &acme {
        let result = echo(client, "from acme").await;
        assert_eq!(
            result["content"][0]["text"], "[qa/collector] from acme",
            "{result}"
        );
    }
    let result = echo(&initech, "from initech").await;
    assert_eq!(
        result["content"][0]["text"], "[globex/collector] from initech",
        "{result}"
    );
    // globex sees every tool but connected nothing: no tenant's credential is used for it, and
    // the upstream refuses a call without one.
    let result = echo(&globex, "from globex").await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(!result.to_string().contains("[qa/") && !result.to_string().contains("[globex/"));

    // Reads show the connection, never its credential.
    let (code, out, err) = ctl(&fleet, &["--json", "tenants", "connections", "acme"], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["provider"], "crm", "{listed}");
    assert_eq!(listed[0]["fingerprint"].as_str().unwrap().len(), 12);
    assert!(!out.contains(&qa_key));
    let (_, tenant, _) = ctl(&fleet, &["--json", "tenants", "get", "acme"], &[]).await;
    assert!(
        tenant.contains("crm") && !tenant.contains(&qa_key),
        "{tenant}"
    );

    // A new credential replaces the old one at once (the edges' copies are dropped by the watch).
    let (code, out, err) = ctl(
        &fleet,
        &["tenants", "connect", "initech", "--provider", "crm"],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", &qa_key)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    tp_test_support::eventually(
        "the replaced credential in use",
        Duration::from_secs(10),
        || async {
            let result = echo(&initech, "again").await;
            (result["content"][0]["text"] == "[qa/collector] again").then_some(())
        },
    )
    .await;

    // An expired credential is not used, and the call does not fall back to the executor's own
    // credential either: it is refused until the tenant connects again (the control plane's
    // sweep, every lifecycle.sunset_check_secs, then disconnects it).
    let expires_at = tp_proto::clock::now_ms() / 1000 + 3;
    let (code, out, err) = ctl(
        &fleet,
        &[
            "tenants",
            "connect",
            "initech",
            "--provider",
            "crm",
            "--expires-at",
            &expires_at.to_string(),
        ],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", &globex_key)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    tp_test_support::eventually(
        "the short-lived credential in use",
        Duration::from_secs(10),
        || async {
            let result = echo(&initech, "short").await;
            (result["content"][0]["text"] == "[globex/collector] short").then_some(())
        },
    )
    .await;
    while tp_proto::clock::now_ms() / 1000 <= expires_at {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let expired = echo(&initech, "late").await;
    assert_eq!(expired["isError"], true, "{expired}");
    let text = expired["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("expired") && !text.contains("[globex/") && !text.contains("[qa/"),
        "{expired}"
    );

    // Disconnect: the tool is gone on both edges and a call fails as unknown.
    let (code, out, err) = ctl(
        &fleet,
        &["tenants", "disconnect", "acme", "--provider", "crm"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    for client in &acme {
        tp_test_support::eventually(
            "the disconnected provider's tool gone",
            Duration::from_secs(10),
            || async { (!sees(client, "crm_echo").await).then_some(()) },
        )
        .await;
        let refused = client.call("crm_echo", json!({"text": "x"})).await;
        assert!(
            !refused.body.contains("[qa/") && refused.body.contains("nknown"),
            "{}",
            refused.body
        );
    }

    // Bad input changes nothing.
    for (args, why) in [
        (
            vec!["tenants", "connect", "acme", "--provider", "nowhere"],
            "unknown provider",
        ),
        (
            vec!["tenants", "connect", "nobody", "--provider", "crm"],
            "not found",
        ),
        (
            vec!["tenants", "disconnect", "acme", "--provider", "crm"],
            "not found",
        ),
    ] {
        let (code, out, err) =
            ctl(&fleet, &args, &[("TOOLPLANE_PROVIDER_CREDENTIAL", "tok")]).await;
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let (code, _, err) = ctl(
        &fleet,
        &["tenants", "connect", "acme", "--provider", "crm"],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", "two words")],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("credential"), "{err}");

    // The secrets are nowhere in clear.
    let exported = fleet.cp.data_dir.join("export.json");
    let sqlite = format!(
        "sqlite://{}",
        fleet.cp.data_dir.join("control-plane.db").display()
    );
    let (code, out, err) = ctl(
        &fleet,
        &[
            "export",
            "--store-url",
            &sqlite,
            "--out",
            exported.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let export = std::fs::read(&exported).unwrap();
    assert!(
        contains(&export, "\"connection\""),
        "the export holds the connections, sealed"
    );
    let database = database_bytes(&fleet);
    let redis = redis_bytes(&fleet).await;
    let logs = [
        fleet.cp.process.log_text(),
        fleet.edges[0].log(),
        fleet.edges[1].log(),
    ]
    .concat();
    for secret in [&qa_key, &globex_key] {
        assert!(!contains(&database, secret), "a credential in the database");
        assert!(!contains(&export, secret), "a credential in the export");
        assert!(!contains(&redis, secret), "a credential in Redis");
        assert!(!logs.contains(secret.as_str()), "a credential in a log");
    }
    println!(
        "connections: two tenants' calls carried their own credentials on both edges; replaced and disconnected within the propagation time; database ({} bytes), export ({} bytes), Redis ({} bytes) and logs ({} bytes) hold neither credential",
        database.len(),
        export.len(),
        redis.len(),
        logs.len()
    );
}

/// A gRPC executor receives the tenant's credential sealed to its key, bound to the one call:
/// the demo executor opens it and names its fingerprint in `echo`.
#[tokio::test]
async fn a_grpc_executor_opens_the_tenants_credential_sealed_to_its_key() {
    let fleet = Fleet::start(1, "").await;
    let token = "sk-qa-testing-0123456789";
    let (code, out, err) = ctl(
        &fleet,
        &["tenants", "connect", "qa", "--provider", "testing"],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", token)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let fingerprint = {
        use sha2::Digest as _;
        hex::encode(&sha2::Sha256::digest(token.as_bytes())[..6])
    };
    let qa = fleet.client(0, "qa", "collector", LEGACY);
    tp_test_support::eventually(
        "the credential on the call",
        Duration::from_secs(10),
        || async {
            let reply = qa.call("echo", json!({"text": "hi"})).await;
            (reply.result()["content"][0]["text"]
                == format!("[qa/collector] hi (with testing's credential {fingerprint})"))
            .then_some(())
        },
    )
    .await;
    // globex sees every tool and connected nothing: its call carries no credential.
    let globex = fleet.client(0, "globex", "collector", LEGACY);
    let reply = globex.call("echo", json!({"text": "hi"})).await;
    assert_eq!(
        reply.result()["content"][0]["text"],
        "[globex/collector] hi",
        "{}",
        reply.body
    );
    let logs = [fleet.executor.process.log_text(), fleet.edges[0].log()].concat();
    assert!(!logs.contains(token), "the credential in a log");
}
