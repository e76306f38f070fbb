//! Connections (issue 35, ADR 0015): a tenant connects a provider with an API credential; its
//! tools appear on every edge; each call to an MCP upstream carries that tenant's credential
//! and no other; disconnecting takes the tools away; the credential is nowhere in clear — not
//! in the control plane's database, its change log, an export, Redis or any log.

use std::time::Duration;

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::services::free_port;
use tp_test_support::{McpHttp, Process};

use crate::fleet::{Fleet, LEGACY, STATELESS, test_tool};
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

/// `crm_echo` appears to acme (on both edges) and initech, and each one's calls reach the
/// upstream with its own credential: acme's as qa's, initech's as globex's.
async fn tools_appear_and_calls_carry_their_own(acme: &[McpHttp; 2], initech: &McpHttp) {
    for client in acme.iter().chain([initech]) {
        tp_test_support::eventually(
            "the connected provider's tool on every edge",
            Duration::from_secs(10),
            || async { sees(client, "crm_echo").await.then_some(()) },
        )
        .await;
    }
    for client in acme {
        let result = echo(client, "from acme").await;
        assert_eq!(
            result["content"][0]["text"], "[qa/collector] from acme",
            "{result}"
        );
    }
    let result = echo(initech, "from initech").await;
    assert_eq!(
        result["content"][0]["text"], "[globex/collector] from initech",
        "{result}"
    );
}

/// The world: provider `crm`; an MCP executor whose upstream is `upstream` (an edge: it wants
/// a key or token, and answers `echo` with the tenant it authenticated); the tool `crm_echo`
/// of provider `crm`.
async fn world(fleet: &Fleet, upstream: &str) {
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
                endpoint: upstream.to_owned(),
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
    world(&fleet, &format!("http://{}/mcp", fleet.edges[0].addr)).await;
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
    // Each tenant's calls carry its own credential, on both edges, and only its own.
    tools_appear_and_calls_carry_their_own(&acme, &initech).await;
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

    // GetCredential hands credentials to edges only: the admin token, accepted on the Registry
    // service for debugging, is refused.
    let ask = || pb::GetCredentialRequest {
        tenant: "acme".into(),
        provider: "crm".into(),
        ..Default::default()
    };
    let mut admin = fleet.cp.admin().await;
    let refused = admin.registry.get_credential(ask()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let mut edge = tp_client::Admin::connect(&fleet.cp.url(), &fleet.cp.edge_token())
        .await
        .unwrap();
    let handed = edge
        .registry
        .get_credential(ask())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(handed.credential, qa_key);
    assert!(
        !format!("{handed:?}").contains(&qa_key),
        "Debug prints no secret"
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
/// The text of a call's answer.
fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `toolplanectl connections VERB acme --provider crm [--user USER]`.
async fn on_acme_crm(fleet: &Fleet, verb: &str, user: Option<&str>) -> (i32, String, String) {
    let mut args = vec!["connections", verb, "acme", "--provider", "crm"];
    if let Some(user) = user {
        args.extend(["--user", user]);
    }
    ctl(fleet, &args, &[]).await
}

/// Connections of one user (issue 35): alice connects the provider for herself; her calls, on
/// both edges, carry her credential; bob — same tenant, same role, no connection of his own and
/// none of the tenant's — is refused with how to connect, never given hers; once the tenant
/// connects, bob's calls carry the tenant's and alice's still hers; alice disconnecting falls
/// back to the tenant's; the provider leaves connected_apis with its last connection. Bad
/// requests change nothing; the control plane never hands a user's request the tenant's
/// credential (nor another user's).
#[tokio::test]
async fn a_users_own_connection_serves_their_calls_and_no_one_elses() {
    let fleet = Fleet::start(2, "").await;
    world(&fleet, &format!("http://{}/mcp", fleet.edges[0].addr)).await;
    // Credentials: upstream keys, so its echo names whose credential a call carried.
    let alices_credential = fleet.key("qa", "collector").to_owned();
    let tenants_credential = fleet.key("globex", "collector").to_owned();
    let mut admin = fleet.cp.admin().await;
    let mut callers = Vec::new();
    for label in ["alice", "bob"] {
        let issued = admin
            .tenants
            .issue_api_key(pb::IssueApiKeyRequest {
                tenant: "acme".into(),
                role: "collector".into(),
                label: label.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        callers.push((issued.info.unwrap().id, issued.key));
    }
    let [(alice_id, alice_key), (bob_id, bob_key)] =
        <[(String, String); 2]>::try_from(callers).unwrap();
    let alice = [0, 1].map(|edge| McpHttp::new(&fleet.edges[edge].addr, Some(&alice_key), LEGACY));
    let bob = McpHttp::new(&fleet.edges[1].addr, Some(&bob_key), LEGACY);
    let fleet_ref = &fleet;
    let connect = move |user: Option<&str>, credential: &str| {
        let mut args = vec!["connections", "connect", "acme", "--provider", "crm"];
        if let Some(user) = user {
            args.extend(["--user", user]);
        }
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let credential = credential.to_owned();
        let fleet = fleet_ref;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ctl(
                fleet,
                &args,
                &[("TOOLPLANE_PROVIDER_CREDENTIAL", &credential)],
            )
            .await
        }
    };

    // Bad requests change nothing.
    for user in ["has space", &"x".repeat(301)] {
        let (code, _, err) = connect(Some(user), &alices_credential).await;
        assert_ne!(code, 0, "{user:?}");
        assert!(err.contains("user"), "{err}");
    }
    let (code, _, err) = on_acme_crm(&fleet, "disconnect", Some(&alice_id)).await;
    assert_ne!(code, 0);
    assert!(err.contains("not found"), "{err}");
    let (_, out, _) = ctl(&fleet, &["--json", "connections", "list", "acme"], &[]).await;
    assert_eq!(out.trim(), "[]");

    // Listeners (2026-07-28 `subscriptions/listen`): bob's, of acme, hears the change a
    // connection makes; initech's hears nothing of acme's.
    let listen = |key: String| async move {
        let (status, mut stream) = McpHttp::new(&fleet_ref.edges[1].addr, Some(&key), STATELESS)
            .stream(
                1,
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": true}}),
            )
            .await;
        assert_eq!(status, 200);
        let acknowledged = tokio::time::timeout(Duration::from_secs(5), stream.recv())
            .await
            .unwrap();
        assert!(acknowledged.is_some(), "no acknowledgement");
        stream
    };
    let mut acme_listener = listen(bob_key.clone()).await;
    let mut initech_listener = listen(fleet.key("initech", "collector").to_owned()).await;

    // Alice connects for herself: the tool appears to acme; her calls carry her credential.
    let (code, out, err) = connect(Some(&alice_id), &alices_credential).await;
    assert_eq!(code, 0, "{out}{err}");
    let is_list_changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    let heard = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(message) = acme_listener.recv().await {
            if is_list_changed(&message) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(heard, Ok(true), "acme's listener heard no list_changed");
    while let Ok(Some(message)) =
        tokio::time::timeout(Duration::from_millis(300), initech_listener.recv()).await
    {
        assert!(
            !is_list_changed(&message),
            "initech heard acme's change: {message}"
        );
    }
    for client in alice.iter().chain([&bob]) {
        tp_test_support::eventually(
            "the provider's tool for acme's callers",
            Duration::from_secs(10),
            || async { sees(client, "crm_echo").await.then_some(()) },
        )
        .await;
    }
    for client in &alice {
        assert_eq!(
            text_of(&echo(client, "alice").await),
            "[qa/collector] alice"
        );
    }
    // Bob has no credential to act with: refused, told how to connect, never given alice's.
    let refused = echo(&bob, "bob").await;
    assert_eq!(refused["isError"], true, "{refused}");
    let said = text_of(&refused);
    assert!(
        said.contains("--user") && said.contains(&bob_id) && !said.contains("[qa/"),
        "{said}"
    );
    // The control plane hands a user's request only that user's credential.
    let mut edge = tp_client::Admin::connect(&fleet.cp.url(), &fleet.cp.edge_token())
        .await
        .unwrap();
    let ask = |user: &str| pb::GetCredentialRequest {
        tenant: "acme".into(),
        provider: "crm".into(),
        user: user.into(),
        features: vec!["user_connections".into()],
    };
    let handed = edge.registry.get_credential(ask(&alice_id)).await.unwrap();
    assert_eq!(handed.get_ref().credential, alices_credential);
    assert_eq!(handed.get_ref().user, alice_id);
    // An edge predating users' connections (it would hand the tenant's credential to every
    // caller) gets none for this provider.
    let older = pb::GetCredentialRequest {
        features: Vec::new(),
        ..ask(&alice_id)
    };
    let refused = edge.registry.get_credential(older).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("upgrade the edge"),
        "{}",
        refused.message()
    );
    for other in [bob_id.as_str(), ""] {
        let refused = edge.registry.get_credential(ask(other)).await.unwrap_err();
        assert_eq!(
            refused.code(),
            tonic::Code::NotFound,
            "{other:?}: {refused:?}"
        );
    }

    // The tenant connects too: bob's calls carry the tenant's credential, alice's still hers.
    let (code, out, err) = connect(None, &tenants_credential).await;
    assert_eq!(code, 0, "{out}{err}");
    tp_test_support::eventually(
        "bob's calls with the tenant's credential",
        Duration::from_secs(10),
        || async { (text_of(&echo(&bob, "bob").await) == "[globex/collector] bob").then_some(()) },
    )
    .await;
    for client in &alice {
        assert_eq!(
            text_of(&echo(client, "alice").await),
            "[qa/collector] alice"
        );
    }
    let (code, out, _) = ctl(&fleet, &["--json", "connections", "list", "acme"], &[]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).unwrap();
    let users: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["user"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["", alice_id.as_str()], "{listed}");
    assert!(!out.contains(&alices_credential) && !out.contains(&tenants_credential));
    let (code, out, err) = on_acme_crm(&fleet, "status", Some(&alice_id)).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("{alice_id} of acme")), "{out}");

    // Alice disconnects: her calls fall back to the tenant's; the provider stays connected.
    let (code, out, err) = on_acme_crm(&fleet, "disconnect", Some(&alice_id)).await;
    assert_eq!(code, 0, "{out}{err}");
    for client in &alice {
        tp_test_support::eventually(
            "alice's calls with the tenant's credential",
            Duration::from_secs(10),
            || async {
                (text_of(&echo(client, "alice").await) == "[globex/collector] alice").then_some(())
            },
        )
        .await;
    }
    // The last connection goes: so does the provider, for everyone.
    let (code, out, err) = on_acme_crm(&fleet, "disconnect", None).await;
    assert_eq!(code, 0, "{out}{err}");
    for client in alice.iter().chain([&bob]) {
        tp_test_support::eventually(
            "the provider's tool gone",
            Duration::from_secs(10),
            || async { (!sees(client, "crm_echo").await).then_some(()) },
        )
        .await;
    }
    let (_, tenant, _) = ctl(&fleet, &["--json", "tenants", "get", "acme"], &[]).await;
    assert!(!tenant.contains("\"crm\""), "{tenant}");
}

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

/// The provider's authorization server for the OAuth test: oidc-provider (clients/idp.mjs) on
/// `port`, with Toolplane's control plane as a web client whose callback is `redirect`; its
/// access tokens live `ttl` seconds and every token it issues is logged.
fn provider_at(dir: &std::path::Path, port: u16, redirect: &str, ttl: u64) -> Process {
    provider_with(dir, port, redirect, ttl, &[])
}

/// [`provider_at`] with more of idp.mjs's settings (`IDP_ROTATE_REFRESH_TOKENS`).
fn provider_with(
    dir: &std::path::Path,
    port: u16,
    redirect: &str,
    ttl: u64,
    more: &[(&str, String)],
) -> Process {
    let clients = json!({"toolplane": {"secret": CLIENT_SECRET, "redirect_uris": [redirect]}});
    let log = dir.join(format!("idp-{}.log", tp_proto::clock::now_ms()));
    let mut envs = vec![
        ("IDP_PORT", port.to_string()),
        ("IDP_ACCOUNTS", crate::oauth::accounts().to_string()),
        ("IDP_CLIENTS", clients.to_string()),
        ("IDP_ACCESS_TOKEN_TTL", ttl.to_string()),
        ("IDP_LOG_TOKENS", "1".to_owned()),
    ];
    envs.extend(more.iter().cloned());
    Process::spawn(
        &tp_test_support::node(),
        &[tp_test_support::node_dir()
            .join("idp.mjs")
            .display()
            .to_string()],
        &log,
        &envs,
    )
}

async fn provider_ready(process: &Process) {
    tp_test_support::eventually(
        "the provider's authorization server to start",
        Duration::from_secs(20),
        || async { process.log_text().contains("ready ").then_some(()) },
    )
    .await;
}

/// The control plane's settings for connecting `crm` by OAuth at `issuer` (codes exchanged at
/// `token_endpoint`, tokens for `resource`), its callback on `callback_port` and renewals
/// looked for every second; the client secret is written to a file in `dir`.
fn oauth_settings(
    dir: &std::path::Path,
    issuer: &str,
    token_endpoint: &str,
    resource: &str,
    callback_port: u16,
) -> Vec<(&'static str, String)> {
    let secret_file = dir.join("client-secret");
    std::fs::write(&secret_file, format!("{CLIENT_SECRET}\n")).unwrap();
    let oauth = format!(
        "[{{provider = \"crm\", authorization_endpoint = \"{issuer}/auth\", token_endpoint = \"{token_endpoint}\", client_id = \"toolplane\", client_secret_file = {:?}, scopes = [\"mcp\"], resource = \"{resource}\"}}]",
        secret_file.display().to_string()
    );
    vec![
        (
            "TOOLPLANE_CP_CONNECTIONS__CALLBACK_LISTEN",
            format!("127.0.0.1:{callback_port}"),
        ),
        ("TOOLPLANE_CP_CONNECTIONS__REFRESH_CHECK_SECS", "1".into()),
        ("TOOLPLANE_CP_CONNECTIONS__OAUTH", oauth),
    ]
}

const CLIENT_SECRET: &str = "secret-of-toolplane-at-the-provider";

/// The connections' key-encryption keys the OAuth test gives in an environment variable.
const KEK_NEW: &str = "bmV3LWtlay1vZi10aGUtb2F1dGgtdGVzdC0zMmJ5dGU=";
const KEK_OLD: &str = "b2xkLWtlay1vZi10aGUtb2F1dGgtdGVzdC0zMmJ5dGU=";

/// The tokens the provider issued (from its log): access and refresh tokens.
fn issued(process: &Process) -> Vec<String> {
    process
        .log_text()
        .lines()
        .filter_map(|line| line.strip_prefix("issued "))
        .filter_map(|json| serde_json::from_str::<Value>(json).ok())
        .flat_map(|body| {
            ["access_token", "refresh_token"]
                .into_iter()
                .filter_map(move |field| body[field].as_str().map(str::to_owned))
        })
        .collect()
}

/// The user at the browser: opens `url` logged in as `login` and follows the redirects back
/// to the control plane's callback (clients/browser.py). Returns the exit code and the hops.
async fn browse(url: &str, login: &str) -> (i32, String) {
    let script = std::fs::canonicalize("clients/browser.py").expect("browser.py");
    let output = tokio::process::Command::new(tp_test_support::python())
        .arg(script)
        .arg(url)
        .env("BROWSER_LOGIN", login)
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// `connections connect TENANT --provider crm` by OAuth, completed by `login`: the URL the
/// browser was sent back to (the callback, with its code and state).
async fn connect_by_oauth(fleet: &Fleet, tenant: &str, login: &str, user: Option<&str>) -> String {
    let mut args = vec![
        "--json",
        "connections",
        "connect",
        tenant,
        "--provider",
        "crm",
    ];
    if let Some(user) = user {
        args.extend(["--user", user]);
    }
    let (code, out, err) = ctl(fleet, &args, &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    let begun: Value = serde_json::from_str(&out).unwrap();
    let url = begun["authorization_url"].as_str().unwrap();
    assert!(
        url.contains("code_challenge_method=S256") && url.contains("state="),
        "{url}"
    );
    let (code, hops) = browse(url, login).await;
    assert_eq!(code, 0, "the flow failed: {hops}");
    let last = hops.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("200 ") && last.contains("/connections/callback?"),
        "{hops}"
    );
    last.trim_start_matches("200 ").trim().to_owned()
}

/// `connections status` as JSON, with its exit code.
async fn status(fleet: &Fleet, tenant: &str) -> (i32, Value) {
    let (code, out, err) = ctl(
        fleet,
        &[
            "--json",
            "connections",
            "status",
            tenant,
            "--provider",
            "crm",
        ],
        &[],
    )
    .await;
    (
        code,
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}")),
    )
}

/// Connections by OAuth: the control plane is the provider's OAuth client (authorization
/// code, PKCE, state sealed); two tenants connect with two of the provider's users; each call
/// of each tenant carries exactly the token issued for its user; the token is renewed before
/// it expires; an unreachable provider keeps the connection, a provider that forgot the grant
/// (restarted: `invalid_grant`) removes it and its tools; no token the provider issued is in
/// clear in the database, an export, Redis or any log.
#[tokio::test]
async fn tenants_connect_by_oauth_tokens_are_renewed_and_a_revoked_grant_disconnects() {
    let dir = tempfile::tempdir().unwrap();
    let (idp_port, callback_port, upstream_port) = (free_port(), free_port(), free_port());
    let issuer = format!("http://127.0.0.1:{idp_port}");
    let callback = format!("http://127.0.0.1:{callback_port}/connections/callback");
    let resource = format!("http://127.0.0.1:{upstream_port}/mcp");
    let ttl = 20;
    let mut idp = provider_at(dir.path(), idp_port, &callback, ttl);
    provider_ready(&idp).await;
    let mut settings = oauth_settings(
        dir.path(),
        &issuer,
        &format!("{issuer}/token"),
        &resource,
        callback_port,
    );
    settings.extend([
        // The upstream takes the restarted provider's new signing keys at once.
        ("TOOLPLANE_CP_AUTH__TOKEN_KEY_REFETCH_SECS", "1".into()),
        // The key-encryption keys from a variable (a new first key, an old second).
        (
            "TOOLPLANE_CP_AUTH__CONNECTIONS_KEYS_ENV",
            "TP_TEST_CONNECTION_KEYS".into(),
        ),
        ("TP_TEST_CONNECTION_KEYS", format!("{KEK_NEW},\n{KEK_OLD}")),
    ]);
    let fleet = Fleet::start_with_cp_env(2, "", settings).await;
    // The upstream: an edge taking the provider's tokens for its resource; qa's users (alice)
    // and globex's (carol) map to those tenants there, so its echo names whose token it got.
    let (_upstream, _) = crate::oauth::edge_with_oauth_at(&fleet, &issuer, "", upstream_port).await;
    for (tenant, org) in [("qa", "qa"), ("globex", "globex")] {
        let trust = crate::oauth::trust(&issuer, org, &[], "collector");
        crate::oauth::set_trusts(&fleet, tenant, vec![trust])
            .await
            .unwrap();
    }
    world(&fleet, &resource).await;
    let acme = [0, 1].map(|edge| fleet.client(edge, "acme", "collector", LEGACY));
    let initech = fleet.client(1, "initech", "collector", LEGACY);
    assert!(!sees(&acme[0], "crm_echo").await);

    // Bad requests change nothing.
    let (code, _, err) = ctl(
        &fleet,
        &["connections", "connect", "acme", "--provider", "testing"],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("not configured for OAuth"), "{err}");
    let (code, _, err) = ctl(
        &fleet,
        &["connections", "connect", "nobody", "--provider", "crm"],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("not found"), "{err}");
    let http = reqwest::Client::new();
    // A page anyone can send a browser to repeats no words of theirs: neither a description
    // without a state of ours nor an error that is not an OAuth error code.
    for (query, status, says, never) in [
        ("", 400, "needs the provider", ""),
        ("?code=x&state=garbage", 400, "bad state", ""),
        (
            "?error=access_denied&error_description=Call+0800+to+restore+access",
            400,
            "access_denied",
            "0800",
        ),
        (
            "?error=Visit+evil.example&error_description=x",
            400,
            "an unnamed error",
            "evil",
        ),
    ] {
        let answer = http.get(format!("{callback}{query}")).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), status, "{query}");
        assert_eq!(answer.headers()["cache-control"], "no-store");
        let body = answer.text().await.unwrap();
        assert!(body.contains(says), "{query}: {body}");
        assert!(never.is_empty() || !body.contains(never), "{query}: {body}");
    }

    // Connect: acme with alice's account, initech with carol's.
    connect_by_oauth(&fleet, "acme", "alice", None).await;
    connect_by_oauth(&fleet, "initech", "carol", None).await;
    tools_appear_and_calls_carry_their_own(&acme, &initech).await;
    // What reads show: an OAuth connection, renewed by the control plane, never a token.
    let (code, first) = status(&fleet, "acme").await;
    assert_eq!(code, 0, "{first}");
    assert_eq!(first["kind"], "oauth");
    assert_eq!(first["refreshable"], true);
    assert_eq!(first["scopes"], json!(["mcp"]));
    let expires_at = first["expires_at"].as_u64().unwrap();
    assert!(expires_at > 0, "{first}");

    // Renewed before it expires (at half its 20 s lifetime), and calls after the first
    // token's expiry carry the new one.
    let renewed = tp_test_support::eventually(
        "the access token renewed",
        Duration::from_secs(ttl + 10),
        || async {
            let now = status(&fleet, "acme").await.1;
            assert_eq!(
                now["connected"],
                true,
                "the connection went instead: {}",
                fleet.cp.process.log_text()
            );
            (now["fingerprint"] != first["fingerprint"]).then_some(now)
        },
    )
    .await;
    let renewed_at = renewed["issued_at"].as_u64().unwrap();
    assert!(
        renewed_at < expires_at,
        "renewed at {renewed_at}, after the token expired at {expires_at}"
    );
    while tp_proto::clock::now_ms() / 1000 <= expires_at {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for client in &acme {
        let result = echo(client, "after the first token expired").await;
        assert_eq!(
            result["content"][0]["text"], "[qa/collector] after the first token expired",
            "{result}"
        );
    }

    // The provider unreachable: renewals fail and are retried; the connection stays.
    let tokens = issued(&idp);
    assert!(
        tokens.len() >= 5,
        "the provider's log holds its tokens: {tokens:?}"
    );
    idp.kill9().await;
    let due = status(&fleet, "acme").await.1["expires_at"]
        .as_u64()
        .unwrap();
    tp_test_support::eventually(
        "a renewal to fail while the provider is down",
        Duration::from_secs(ttl + 10),
        || async {
            fleet
                .cp
                .process
                .log_text()
                .contains("renewing a connection's token failed")
                .then_some(())
        },
    )
    .await;
    let (_, still) = status(&fleet, "acme").await;
    assert_eq!(still["connected"], true, "{still}");

    // The provider back without its grants (restarted, its memory gone): `invalid_grant`,
    // and the connections go, with their tools, on both edges.
    let idp2 = provider_at(dir.path(), idp_port, &callback, ttl);
    provider_ready(&idp2).await;
    tp_test_support::eventually(
        "the connection removed after invalid_grant",
        Duration::from_secs(ttl + 15),
        || async { (status(&fleet, "acme").await.0 == 1).then_some(()) },
    )
    .await;
    for client in &acme {
        tp_test_support::eventually(
            "the provider's tool gone",
            Duration::from_secs(10),
            || async { (!sees(client, "crm_echo").await).then_some(()) },
        )
        .await;
        let refused = client.call("crm_echo", json!({"text": "x"})).await;
        assert!(refused.body.contains("nknown"), "{}", refused.body);
    }
    let (code, changes, err) = ctl(&fleet, &["--json", "changes"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        changes.contains("system:connection-refresh-failed"),
        "{changes}"
    );
    assert!(
        due > 0 && fleet.cp.process.log_text().contains("invalid_grant"),
        "the log says why"
    );

    // Connected again after the revocation. Its callback link replayed — as is, or with a
    // fresh code of another user's (the link is a capability until its deadline) — connects
    // nothing; nor does one tampered with. A link naming a tenant that does not exist gets
    // the same page as one for a tenant that does: the pages tell nobody which tenants exist.
    let finished = connect_by_oauth(&fleet, "acme", "alice", None).await;
    let before = status(&fleet, "acme").await.1;
    assert_eq!(before["connected"], true, "{before}");
    let replayed = http.get(&finished).send().await.unwrap();
    assert_eq!(replayed.status().as_u16(), 400);
    let page = replayed.text().await.unwrap();
    assert!(page.contains("already used"), "{page}");
    let state = finished
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("state="))
        .unwrap();
    let other_code = finished.replace(
        finished
            .split(['?', '&'])
            .find(|pair| pair.starts_with("code="))
            .unwrap(),
        "code=another-users-code",
    );
    let answer = http.get(&other_code).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    let tampered = finished.replace("state=", "state=A");
    let answer = http.get(&tampered).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    let decoded: Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            state, // base64url: nothing in it is percent-encoded
        )
        .unwrap(),
    )
    .unwrap();
    // The link moved to another tenant, to one that does not exist, or to a user (a tenant's
    // link to a user, or a user's to another): none opens, and all get the same page.
    let mut pages = Vec::new();
    for (field, value) in [("t", "initech"), ("t", "no-such-tenant"), ("u", "someone")] {
        let mut moved = decoded.clone();
        moved[field] = json!(value);
        let moved = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            serde_json::to_vec(&moved).unwrap(),
        );
        let answer = http
            .get(format!("{callback}?code=x&state={moved}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{field}={value}");
        pages.push(answer.text().await.unwrap());
    }
    assert!(
        pages.iter().all(|page| *page == pages[0]),
        "the pages differ: {pages:?}"
    );
    assert!(!pages[1].contains("no-such-tenant"), "{}", pages[1]);
    assert_eq!(
        status(&fleet, "acme").await.1["fingerprint"],
        before["fingerprint"]
    );

    // One user of initech connects their own account (alice's; the tenant's own connection
    // went with the provider's grants): that caller's calls carry alice's token, and the
    // connection is listed as that user's.
    let mut admin = fleet.cp.admin().await;
    let keys = admin
        .tenants
        .list_api_keys(pb::ListApiKeysRequest {
            tenant: "initech".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .keys;
    let caller = keys
        .iter()
        .find(|key| key.role == "collector")
        .map(|key| key.id.clone())
        .unwrap();
    connect_by_oauth(&fleet, "initech", "alice", Some(&caller)).await;
    tp_test_support::eventually(
        "initech's caller acting with their own account",
        Duration::from_secs(20),
        || async {
            let result = echo(&initech, "mine").await;
            (result["content"][0]["text"] == "[qa/collector] mine").then_some(())
        },
    )
    .await;
    let (_, listed, _) = ctl(&fleet, &["--json", "connections", "list", "initech"], &[]).await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["user"], caller.as_str(), "{listed}");
    assert_eq!(listed[0]["kind"], "oauth", "{listed}");
    let tokens = [tokens, issued(&idp2)].concat();

    // No token the provider issued is anywhere in clear.
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
    let database = database_bytes(&fleet);
    let redis = redis_bytes(&fleet).await;
    let logs = [
        fleet.cp.process.log_text(),
        fleet.edges[0].log(),
        fleet.edges[1].log(),
    ]
    .concat();
    for token in &tokens {
        assert!(!contains(&database, token), "a token in the database");
        assert!(!contains(&export, token), "a token in the export");
        assert!(!contains(&redis, token), "a token in Redis");
        assert!(!logs.contains(token.as_str()), "a token in a log");
    }
    assert!(!logs.contains(CLIENT_SECRET), "the client secret in a log");
    for key in [KEK_NEW, KEK_OLD] {
        assert!(!logs.contains(key), "a key-encryption key in a log");
        assert!(
            !contains(&database, key),
            "a key-encryption key in the database"
        );
    }
    println!(
        "connections by OAuth: two tenants connected through the provider's authorization-code flow; each call carried its user's token; renewed {} s before expiry; kept while the provider was down; removed on invalid_grant; {} issued tokens absent from the database, export, Redis and logs",
        expires_at.saturating_sub(renewed_at),
        tokens.len()
    );
}

/// What the token-exchange server (clients/token_exchange.py) answered, by subject: the
/// SHA-256 prefix of each subject token with the statuses it got.
fn exchanges(server: &Process) -> Vec<(String, u64)> {
    server
        .log_text()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|line| {
            (
                line["subject"].as_str().unwrap_or_default().to_owned(),
                line["status"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

fn digest(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))[..12].to_owned()
}

/// RFC 8693 token exchange towards an MCP upstream (issue 35): an executor naming a token
/// exchange never sends a tenant's connection token to the upstream; the edge exchanges it at
/// the upstream's authorization server (client authentication, the upstream as `resource`)
/// and sends the token issued for the upstream, per tenant, kept while it lives. A subject the
/// server refuses fails the call — no fallback to the tenant's token or the executor's. Bad
/// settings are refused and change nothing.
#[tokio::test]
async fn an_upstream_gets_a_token_exchanged_for_it_never_the_tenants_own() {
    let dir = tempfile::tempdir().unwrap();
    // The control plane's drift check stays off: it would list the upstream with no credential
    // (401 in the upstream's log, which must show only the edges' requests).
    let fleet = Fleet::start_with_cp_env(
        1,
        "",
        vec![("TOOLPLANE_CP_LIFECYCLE__DRIFT_CHECK_SECS", "0".to_owned())],
    )
    .await;
    let upstream = format!("http://{}/mcp", fleet.edges[0].addr);
    world(&fleet, &upstream).await;
    // The subject tokens tenants connect with mean nothing to the upstream; the exchange turns
    // them into upstream keys, so the upstream's echo names which one it received.
    let (acme_subject, initech_subject) = (
        "acme-connection-token-7f3a",
        "initech-connection-token-91c2",
    );
    let tokens = json!({
        acme_subject: fleet.key("qa", "collector"),
        initech_subject: fleet.key("globex", "collector"),
    });
    let secret = "secret-of-the-edges-at-the-upstreams-server";
    let port = free_port();
    let server = Process::spawn(
        &tp_test_support::python(),
        &[std::fs::canonicalize("clients/token_exchange.py")
            .unwrap()
            .display()
            .to_string()],
        &dir.path().join("token-exchange.log"),
        &[
            ("TX_PORT", port.to_string()),
            ("TX_CLIENT_ID", "toolplane edges".to_owned()),
            ("TX_CLIENT_SECRET", secret.to_owned()),
            ("TX_RESOURCE", upstream.clone()),
            ("TX_TOKENS", tokens.to_string()),
        ],
    );
    tp_test_support::eventually(
        "the token exchange server",
        Duration::from_secs(20),
        || async { server.log_text().contains("ready ").then_some(()) },
    )
    .await;
    let exchange = |endpoint: &str, secret_env: &str| pb::TokenExchange {
        token_endpoint: endpoint.to_owned(),
        client_id: "toolplane edges".into(),
        client_secret_env: secret_env.to_owned(),
        ..Default::default()
    };
    let upsert = |name: &str, exchange: pb::TokenExchange| pb::UpsertExecutorRequest {
        executor: Some(pb::ExecutorInfo {
            name: name.to_owned(),
            token_exchange: Some(exchange),
            ..Default::default()
        }),
        update_mask: Some(prost_types::FieldMask {
            paths: vec!["token_exchange".into()],
        }),
    };
    let mut admin = fleet.cp.admin().await;
    let endpoint = format!("http://127.0.0.1:{port}/token");
    // Bad settings: refused, nothing changes.
    for (name, bad) in [
        (
            "crm",
            exchange("http://exchange.example/token", "TOOLPLANE_CRED_TX"),
        ),
        ("crm", exchange(&endpoint, "lower_case")),
        ("crm", exchange("", "")),
        ("demo", exchange(&endpoint, "")),
    ] {
        let refused = admin
            .executors
            .upsert_executor(upsert(name, bad))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(
            refused.message().contains("token_exchange"),
            "{}",
            refused.message()
        );
    }
    let (_, listed, _) = ctl(&fleet, &["--json", "executors", "list"], &[]).await;
    assert!(!listed.contains("token_exchange"), "{listed}");
    // Set with the CLI (a typo in a field is refused there), read back with the secret's name.
    let (code, _, err) = ctl(
        &fleet,
        &[
            "executors",
            "upsert",
            "crm",
            "--token-exchange",
            r#"{"token_endpont": "x"}"#,
        ],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("unknown field"), "{err}");
    let settings = json!({
        "token_endpoint": endpoint,
        "client_id": "toolplane edges",
        "client_secret_env": "TOOLPLANE_CRED_TX_SECRET",
    });
    let (code, out, err) = ctl(
        &fleet,
        &[
            "executors",
            "upsert",
            "crm",
            "--token-exchange",
            &settings.to_string(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let (_, listed, _) = ctl(&fleet, &["--json", "executors", "list"], &[]).await;
    assert!(
        listed.contains("TOOLPLANE_CRED_TX_SECRET") && !listed.contains(secret),
        "{listed}"
    );

    // An edge holding the client secret; acme and initech connect with their subject tokens.
    let edge = tp_test_support::services::EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        "",
        &[("TOOLPLANE_CRED_TX_SECRET", secret.to_owned())],
    )
    .await;
    for (tenant, subject) in [("acme", acme_subject), ("initech", initech_subject)] {
        let (code, out, err) = ctl(
            &fleet,
            &["tenants", "connect", tenant, "--provider", "crm"],
            &[("TOOLPLANE_PROVIDER_CREDENTIAL", subject)],
        )
        .await;
        assert_eq!(code, 0, "{out}{err}");
    }
    let acme = McpHttp::new(&edge.addr, Some(fleet.key("acme", "collector")), LEGACY);
    let initech = McpHttp::new(&edge.addr, Some(fleet.key("initech", "collector")), LEGACY);
    for (client, says) in [
        (&acme, "[qa/collector] hi"),
        (&initech, "[globex/collector] hi"),
    ] {
        tp_test_support::eventually(
            "a call with the token exchanged for the upstream",
            Duration::from_secs(10),
            || async { (text_of(&echo(client, "hi").await) == says).then_some(()) },
        )
        .await;
    }
    // An edge predating token exchange (it would send the tenant's token as is) gets no
    // credential of this provider.
    let mut edge_client = tp_client::Admin::connect(&fleet.cp.url(), &fleet.cp.edge_token())
        .await
        .unwrap();
    let ask = |features: Vec<String>| pb::GetCredentialRequest {
        tenant: "acme".into(),
        provider: "crm".into(),
        user: String::new(),
        features,
    };
    let refused = edge_client
        .registry
        .get_credential(ask(Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("token_exchange"),
        "{}",
        refused.message()
    );
    let handed = edge_client
        .registry
        .get_credential(ask(vec!["token_exchange".into()]))
        .await
        .unwrap();
    assert_eq!(handed.get_ref().credential, acme_subject);
    // Kept while it lives: more calls, no more exchanges.
    let before = exchanges(&server);
    for _ in 0..3 {
        assert_eq!(text_of(&echo(&acme, "again").await), "[qa/collector] again");
    }
    assert_eq!(exchanges(&server), before, "an exchange per call");
    for subject in [acme_subject, initech_subject] {
        assert!(
            before.contains(&(digest(subject), 200)),
            "{subject}: {before:?}"
        );
    }

    // A subject the server refuses (a revoked connection token): the call fails, and neither
    // the tenant's token nor anything else goes to the upstream in its place.
    let revoked = "acme-connection-token-revoked";
    let (code, out, err) = ctl(
        &fleet,
        &["tenants", "connect", "acme", "--provider", "crm"],
        &[("TOOLPLANE_PROVIDER_CREDENTIAL", revoked)],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    tp_test_support::eventually(
        "the refused exchange fails the call",
        Duration::from_secs(10),
        || async {
            let result = echo(&acme, "refused").await;
            (result["isError"] == true && exchanges(&server).contains(&(digest(revoked), 400)))
                .then_some(result)
        },
    )
    .await;
    // The refusal is acme's to fix, told as such, and trips no breaker: acme's next calls get
    // the same answer, and initech's calls on the same executor still go through.
    for _ in 0..6 {
        let again = text_of(&echo(&acme, "refused").await);
        assert!(
            again.contains("invalid_grant") && again.contains("must be made again"),
            "{again}"
        );
    }
    assert_eq!(
        text_of(&echo(&initech, "still").await),
        "[globex/collector] still"
    );
    // The upstream refused nothing: no request ever reached it with a token it did not issue
    // (a subject token sent as is would have been answered 401).
    let upstream_log = fleet.edges[0].log();
    assert!(
        upstream_log.contains("status=200") && !upstream_log.contains("status=401"),
        "the upstream was sent a token it refused:\n{upstream_log}"
    );
    assert!(!edge.log().contains(secret), "the client secret in a log");
}

/// A TCP relay to `127.0.0.1:target` that holds the answer to every refresh-token request for
/// `hold` before passing it on (the provider has already answered, and spent the old refresh
/// token, by then). Each hold is reported on the returned channel as it begins. Returns the
/// relay's port.
async fn holding_relay(
    target: u16,
    hold: Duration,
) -> (u16, tokio::sync::mpsc::UnboundedReceiver<()>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (held, holds) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                continue;
            };
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let refreshing = Arc::new(AtomicBool::new(false));
            let asked = refreshing.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 16 * 1024];
                while let Ok(n) = client_read.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    if contains(&buffer[..n], "grant_type=refresh_token") {
                        asked.store(true, Ordering::SeqCst);
                    }
                    if server_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let held = held.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 16 * 1024];
                while let Ok(n) = server_read.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    if refreshing.swap(false, Ordering::SeqCst) {
                        let _ = held.send(());
                        tokio::time::sleep(hold).await;
                    }
                    if client_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, holds)
}

/// A renewal under way when the control plane is told to stop (SIGTERM) is finished and
/// stored before it exits. The provider rotates refresh tokens: the renewal spends the stored
/// one, and the new one exists only in the answer, held back by a relay while the control
/// plane is stopped. Restarted, the control plane has the renewed credential, and its next
/// renewal (with the rotated refresh token) succeeds; a control plane that dropped the
/// renewal at the stop would hold a spent refresh token, which the provider answers with
/// `invalid_grant`, disconnecting the tenant.
#[tokio::test]
async fn a_renewal_under_way_at_a_stop_is_stored_so_a_rotated_refresh_token_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (idp_port, callback_port) = (free_port(), free_port());
    let issuer = format!("http://127.0.0.1:{idp_port}");
    let callback = format!("http://127.0.0.1:{callback_port}/connections/callback");
    let resource = format!("http://127.0.0.1:{}/mcp", free_port());
    let ttl = 12;
    let idp = provider_with(
        dir.path(),
        idp_port,
        &callback,
        ttl,
        &[("IDP_ROTATE_REFRESH_TOKENS", "1".to_owned())],
    );
    provider_ready(&idp).await;
    let (relay, mut holds) = holding_relay(idp_port, Duration::from_secs(4)).await;
    // Codes and renewals go to the provider through the relay.
    let mut settings = oauth_settings(
        dir.path(),
        &issuer,
        &format!("http://127.0.0.1:{relay}/token"),
        &resource,
        callback_port,
    );
    settings.push(("TOOLPLANE_CP_LIFECYCLE__DRIFT_CHECK_SECS", "0".into()));
    let mut fleet = Fleet::start_with_cp_env(1, "", settings).await;
    world(&fleet, &resource).await;
    connect_by_oauth(&fleet, "acme", "alice", None).await;
    let (code, first) = status(&fleet, "acme").await;
    assert_eq!(code, 0, "{first}");
    assert_eq!(first["refreshable"], true, "{first}");

    // The renewal (at half the token's lifetime) is under way: the provider has answered and
    // spent the first refresh token; the relay holds the answer. Stop the control plane now.
    tokio::time::timeout(Duration::from_secs(ttl + 10), holds.recv())
        .await
        .expect("a renewal within the token's lifetime")
        .expect("the relay runs");
    let refresh_tokens = || {
        idp.log_text()
            .lines()
            .filter_map(|line| line.strip_prefix("issued "))
            .filter_map(|json| serde_json::from_str::<Value>(json).ok())
            .filter_map(|body| body["refresh_token"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    tp_test_support::eventually(
        "the provider to issue the rotated refresh token",
        Duration::from_secs(3),
        || async { (refresh_tokens().len() >= 2).then_some(()) },
    )
    .await;
    let stopped_at = std::time::Instant::now();
    let exit = fleet.cp.process.terminate().await;
    let log = fleet.cp.process.log_text();
    assert!(
        exit.is_some_and(|status| status.success()),
        "the control plane did not stop cleanly within 10 s ({exit:?}): {log}"
    );
    assert!(
        stopped_at.elapsed() >= Duration::from_secs(2),
        "the control plane exited at once, before the held answer came: {log}"
    );
    assert!(!log.contains("still under way"), "{log}");

    // Restarted on the same data: the renewed credential is there, and the rotated refresh
    // token renews it again.
    fleet.cp.restart_same_port().await;
    let (code, renewed) = status(&fleet, "acme").await;
    assert_eq!(code, 0, "the connection went: {renewed}");
    assert_ne!(
        renewed["fingerprint"], first["fingerprint"],
        "the renewal under way at the stop was not stored"
    );
    let spent = refresh_tokens().len();
    tp_test_support::eventually(
        "a renewal with the rotated refresh token",
        Duration::from_secs(ttl + 15),
        || async {
            let (code, now) = status(&fleet, "acme").await;
            assert_eq!(
                code,
                0,
                "the connection went after the restart: {}",
                fleet.cp.process.log_text()
            );
            (now["fingerprint"] != renewed["fingerprint"]).then_some(())
        },
    )
    .await;
    assert!(refresh_tokens().len() > spent, "{}", idp.log_text());
    assert!(
        !fleet.cp.process.log_text().contains("invalid_grant"),
        "{}",
        fleet.cp.process.log_text()
    );
}
