//! MCP authorization end to end: a real OpenID provider (oidc-provider from npm, see
//! clients/idp.mjs), the official Python SDK's OAuth client doing discovery, registration and
//! the authorization-code flow with PKCE and a resource indicator, the edge as the resource
//! server and the control plane verifying the JWTs and mapping their claims to (tenant, role).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::services::free_port;
use tp_test_support::{EdgeProcess, McpHttp, Process, eventually, node, node_dir, python};

use crate::clients::run_client;
use crate::fleet::{Fleet, LEGACY, STATELESS};

/// The provider's users and the claims their access tokens carry.
pub(crate) fn accounts() -> Value {
    json!({
        "alice": {"org": "qa", "groups": ["tp-executors", "staff"]},
        "bob": {"org": "qa", "groups": ["staff"]},
        "carol": {"org": "globex", "groups": ["staff"]},
        "dave": {"org": "globex", "groups": ["guests"]},
        "mallory": {"org": "initech", "groups": ["tp-executors"]},
    })
}

pub(crate) struct Provider {
    pub(crate) issuer: String,
    _process: Process,
}

async fn start_provider(dir: &Path) -> Provider {
    start_provider_with(dir, &json!({})).await
}

/// The provider, with machine clients (`{"id": {"secret": …, "claims": {…}}}`, see idp.mjs).
pub(crate) async fn start_provider_with(dir: &Path, clients: &Value) -> Provider {
    let port = free_port();
    let script = node_dir().join("idp.mjs");
    let log = dir.join("idp.log");
    let process = Process::spawn(
        &node(),
        &[script.display().to_string()],
        &log,
        &[
            ("IDP_PORT", port.to_string()),
            ("IDP_ACCOUNTS", accounts().to_string()),
            ("IDP_CLIENTS", clients.to_string()),
        ],
    );
    let issuer = format!("http://127.0.0.1:{port}");
    eventually(
        "the OpenID provider to start",
        Duration::from_secs(20),
        || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .ok()
                    .filter(|text| text.contains("ready "))
                    .map(|_| ())
            }
        },
    )
    .await;
    Provider {
        issuer,
        _process: process,
    }
}

pub(crate) fn trust(
    issuer: &str,
    org: &str,
    groups: &[(&str, &str)],
    default_role: &str,
) -> pb::TokenIssuer {
    pb::TokenIssuer {
        issuer: issuer.into(),
        tenant_claim: "org".into(),
        tenant_value: org.into(),
        group_roles: groups
            .iter()
            .map(|(group, role)| pb::GroupRole {
                group: (*group).into(),
                role: (*role).into(),
            })
            .collect(),
        default_role: default_role.into(),
        ..Default::default()
    }
}

pub(crate) async fn set_trusts(
    fleet: &Fleet,
    tenant: &str,
    trusts: Vec<pb::TokenIssuer>,
) -> Result<(), tonic::Status> {
    let mut admin = fleet.cp.admin().await;
    let mut current = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: tenant.into() })
        .await
        .unwrap()
        .into_inner();
    current.token_issuers = trusts;
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(current))
        .await
        .map(|_| ())
}

async fn edge_with_oauth(fleet: &Fleet, issuer: &str) -> (EdgeProcess, String) {
    edge_with_oauth_and(fleet, issuer, "").await
}

/// An edge taking `issuer`'s tokens, with `extra` lines in its `[oauth]` section.
async fn edge_with_oauth_and(fleet: &Fleet, issuer: &str, extra: &str) -> (EdgeProcess, String) {
    edge_with_oauth_at(fleet, issuer, extra, free_port()).await
}

/// [`edge_with_oauth_and`] on a port chosen beforehand (its resource URL named in settings
/// made before it starts).
pub(crate) async fn edge_with_oauth_at(
    fleet: &Fleet,
    issuer: &str,
    extra: &str,
    port: u16,
) -> (EdgeProcess, String) {
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        &format!(
            "[oauth]\nresource = {resource:?}\nauthorization_servers = [{issuer:?}]\nresource_name = \"Toolplane test edge\"\n{extra}"
        ),
        &[("TOOLPLANE_EDGE_LISTEN", format!("127.0.0.1:{port}"))],
    )
    .await;
    (edge, resource)
}

async fn tool_names(client: &McpHttp) -> (u16, Vec<String>) {
    let reply = client.request(1, "tools/list", json!({})).await;
    if reply.status != 200 {
        return (reply.status, Vec::new());
    }
    let names = reply.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (200, names)
}

async fn python_oauth(resource: &str, login: &str, call: Option<(&str, Value)>) -> Value {
    let script = std::fs::canonicalize("clients/python_oauth.py").expect("python_oauth.py");
    let mut args = vec![
        script.display().to_string(),
        resource.to_owned(),
        login.to_owned(),
    ];
    if let Some((tool, arguments)) = call {
        args.push(tool.to_owned());
        args.push(arguments.to_string());
    }
    run_client(&python(), &args, Path::new(".")).await
}

/// A fleet whose tenant qa trusts a fresh provider: its users in `tp-executors` are qa's
/// executors, the rest qa's collectors.
async fn fleet_trusting_the_provider(dir: &Path) -> (Fleet, Provider) {
    let fleet = Fleet::start(0, "").await;
    let provider = start_provider(dir).await;
    set_trusts(
        &fleet,
        "qa",
        vec![trust(
            &provider.issuer,
            "qa",
            &[("tp-executors", "executor")],
            "collector",
        )],
    )
    .await
    .unwrap();
    (fleet, provider)
}

/// Runs the MCP Inspector's CLI (`mcp-inspector --cli`) against `resource` with `args`, its
/// browser the test's user agent logging in as `login` (clients/browser.py, run through `$BROWSER`
/// as xdg-open runs it), its state under `home`. Returns (exit code, stdout, stderr).
async fn inspector(
    home: &Path,
    login: &str,
    resource: &str,
    args: &[&str],
) -> (i32, String, String) {
    let browser = home.join("browser.sh");
    let script = std::fs::canonicalize("clients/browser.py").expect("browser.py");
    std::fs::write(
        &browser,
        format!(
            "#!/bin/sh\n{:?} {:?} \"$1\" >> {:?} 2>&1 &\n",
            python(),
            script,
            home.join("browser.log")
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let launcher = node_dir()
        .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let mut command = tokio::process::Command::new(node());
    command
        .arg(launcher)
        .args(["--cli", resource, "--transport", "http"])
        .args(["--callback-url", "http://127.0.0.1:0/oauth/callback"])
        .args(["--format", "json"])
        .args(args)
        .env("HOME", home)
        .env("MCP_INSPECTOR_SECRET_STORE", "file")
        .env("MCP_AUTO_OPEN_ENABLED", "true")
        .env("BROWSER", &browser)
        .env("BROWSER_LOGIN", login)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(90), command.output())
        .await
        .expect("the Inspector CLI finished within 90 s")
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_mcp_inspector_cli_signs_in_with_oauth_and_calls_tools() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, provider) = fleet_trusting_the_provider(dir.path()).await;
    let issuer = provider.issuer.as_str();
    // The Inspector registers with the scopes the edge advertises (an empty set is refused by
    // the provider), so this edge names one: in its metadata and in its 401s.
    let (edge, resource) =
        edge_with_oauth_and(&fleet, issuer, "scopes_supported = [\"mcp\"]\n").await;
    let anonymous = McpHttp::new(&edge.addr, None, LEGACY);
    let challenge = anonymous.request(1, "tools/list", json!({})).await.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.ends_with(", scope=\"mcp\""), "{challenge}");
    let home = dir.path().join("inspector-home");
    std::fs::create_dir_all(&home).unwrap();

    // No stored credentials and no way to ask: the CLI says so instead of hanging.
    let (code, _, stderr) = inspector(
        &home,
        "alice",
        &resource,
        &["--method", "tools/list", "--stored-auth-only"],
    )
    .await;
    assert_eq!(code, 3, "auth_required: {stderr}");

    // The full flow: 401 → protected-resource metadata → the provider's metadata → dynamic
    // registration → authorization code with PKCE and the resource indicator (alice logs in at
    // the provider in the "browser") → the token → tools/list with it.
    let (code, stdout, stderr) =
        inspector(&home, "alice", &resource, &["--method", "tools/list"]).await;
    let browser_log = std::fs::read_to_string(home.join("browser.log")).unwrap_or_default();
    assert_eq!(
        code, 0,
        "stdout: {stdout}\nstderr: {stderr}\nbrowser: {browser_log}"
    );
    assert!(
        browser_log.contains(&format!("{issuer}/")) && browser_log.contains("/oauth/callback"),
        "the user agent went through the provider back to the CLI: {browser_log}"
    );
    let listed: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // alice is in tp-executors: qa's executor role, exactly what qa's executor key sees.
    let with_key = McpHttp::new(&edge.addr, Some(fleet.key("qa", "executor")), LEGACY);
    let (status, expected) = tool_names(&with_key).await;
    assert_eq!(status, 200);
    assert_eq!(names, expected);

    // The stored token serves the next run without a browser; the call runs as alice.
    let (code, stdout, stderr) = inspector(
        &home,
        "alice",
        &resource,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "echo",
            "--tool-arg",
            "text=from the inspector",
            "--stored-auth-only",
        ],
    )
    .await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let called: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(called["result"]["isError"], json!(false), "{called}");
    assert!(
        called.to_string().contains("from the inspector"),
        "{called}"
    );
    // A tool outside qa/executor's registry is not on the server for the token's caller (the
    // Inspector looks it up in the listing before calling).
    let (code, stdout, stderr) = inspector(
        &home,
        "alice",
        &resource,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "gmail_send",
            "--stored-auth-only",
        ],
    )
    .await;
    assert_ne!(code, 0, "stdout: {stdout}");
    assert!(stderr.contains("\"tool_not_found\""), "{stderr}");
}

#[tokio::test]
async fn mcp_clients_sign_in_with_oauth_and_see_exactly_their_tenant_and_role() {
    let dir = tempfile::tempdir().unwrap();
    let (fleet, provider) = fleet_trusting_the_provider(dir.path()).await;
    let issuer = provider.issuer.as_str();
    // globex through the CLI: a mapping without roles is refused before anything is sent.
    let ctl = |args: &[&str]| {
        std::process::Command::new(tp_test_support::binary("toolplanectl"))
            .args([
                "--addr",
                &fleet.cp.url(),
                "--token",
                &fleet.cp.admin_token(),
            ])
            .args(args)
            .output()
            .unwrap()
    };
    let no_role = ctl(&["tenants", "trust", "globex", "--issuer", issuer]);
    assert!(!no_role.status.success());
    assert!(String::from_utf8_lossy(&no_role.stderr).contains("--group-role"));
    let trusted = ctl(&[
        "tenants",
        "trust",
        "globex",
        "--issuer",
        issuer,
        "--tenant-claim",
        "org=globex",
        "--group-role",
        "staff=collector",
    ]);
    let stdout = String::from_utf8_lossy(&trusted.stdout);
    assert!(
        trusted.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "trusts {issuer} where org=globex: groups staff=collector"
        )),
        "{stdout}"
    );
    // A third tenant trusting the same issuer without telling its users apart is refused: it
    // would accept qa's and globex's tokens.
    let clash = set_trusts(
        &fleet,
        "initech",
        vec![pb::TokenIssuer {
            tenant_claim: String::new(),
            tenant_value: String::new(),
            ..trust(issuer, "", &[], "collector")
        }],
    )
    .await
    .unwrap_err();
    assert_eq!(clash.code(), tonic::Code::InvalidArgument, "{clash:?}");
    assert!(
        clash.message().contains("tenant_claim"),
        "{}",
        clash.message()
    );

    let (edge, resource) = edge_with_oauth(&fleet, issuer).await;

    // RFC 9728 metadata, at the path the resource implies and at the root.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let (status, body) = edge.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let metadata: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(metadata["resource"], json!(resource));
        assert_eq!(metadata["authorization_servers"], json!([issuer]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
    assert_eq!(
        edge.get("/.well-known/oauth-protected-resource/other")
            .await
            .0,
        404
    );
    // A 401 without credentials points at it, without an error code (RFC 6750 §3.1).
    let anonymous = McpHttp::new(&edge.addr, None, LEGACY);
    let missing = anonymous.request(1, "tools/list", json!({})).await;
    assert_eq!(missing.status, 401);
    let challenge = missing.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        challenge,
        format!(
            "Bearer realm=\"toolplane\", resource_metadata=\"http://{}/.well-known/oauth-protected-resource/mcp\"",
            edge.addr
        )
    );

    // The SDK's OAuth flow: alice (group tp-executors) is qa's executor, bob qa's collector,
    // carol globex's collector; each sees exactly what that (tenant, role)'s API key sees.
    let mut tokens = Vec::new();
    for (login, tenant, role) in [
        ("alice", "qa", "executor"),
        ("bob", "qa", "collector"),
        ("carol", "globex", "collector"),
    ] {
        let call = (login == "alice").then(|| ("echo", json!({"text": "signed in"})));
        let out = python_oauth(&resource, login, call).await;
        assert!(out.get("exception").is_none(), "{login}: {out}");
        let with_key = McpHttp::new(&edge.addr, Some(fleet.key(tenant, role)), LEGACY);
        let (status, expected) = tool_names(&with_key).await;
        assert_eq!(status, 200);
        assert_eq!(
            out["tools"],
            json!(expected),
            "{login} sees {tenant}/{role}'s tools"
        );
        // The token is the provider's JWT for this edge: aud is the resource, the issuer the
        // provider, the subject the user.
        assert_eq!(out["claims"]["aud"], json!(resource), "{out}");
        assert_eq!(out["claims"]["iss"], json!(issuer));
        assert_eq!(out["claims"]["sub"], json!(login));
        if login == "alice" {
            assert_eq!(out["call"]["is_error"], json!(false), "{out}");
            assert!(
                out["call"]["text"].as_str().unwrap().contains("signed in"),
                "{out}"
            );
        }
        tokens.push(out["access_token"].as_str().unwrap().to_owned());
    }
    // The group mapping made the difference: alice's token sees exactly what qa's executor key
    // sees (actions included), bob's what the collector's sees, and the two differ.
    let alice = McpHttp::new(&edge.addr, Some(&tokens[0]), LEGACY);
    let bob = McpHttp::new(&edge.addr, Some(&tokens[1]), LEGACY);
    let listing = |client: McpHttp| async move {
        client.request(1, "tools/list", json!({})).await.result()["tools"].clone()
    };
    let executor = McpHttp::new(&edge.addr, Some(fleet.key("qa", "executor")), LEGACY);
    let collector = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    assert_eq!(listing(alice.clone()).await, listing(executor).await);
    assert_eq!(listing(bob.clone()).await, listing(collector).await);
    assert_ne!(listing(alice.clone()).await, listing(bob).await);

    // dave holds no mapped group and globex has no default role; mallory's org is trusted by
    // no tenant: both get through the provider and are refused by the edge.
    for login in ["dave", "mallory"] {
        let out = python_oauth(&resource, login, None).await;
        assert!(out.get("tools").is_none(), "{login}: {out}");
        assert!(
            out["access_token"].is_string(),
            "{login} did get a token: {out}"
        );
        let client = McpHttp::new(&edge.addr, out["access_token"].as_str(), LEGACY);
        assert_eq!(tool_names(&client).await.0, 401, "{login}");
    }

    // Forged tokens: a changed payload (bob claiming tp-executors), the same with "alg": "none",
    // and an HMAC token: all 401 with invalid_token.
    let segments: Vec<&str> = tokens[1].split('.').collect();
    let mut claims: Value = serde_json::from_slice(&b64(segments[1])).unwrap();
    claims["groups"] = json!(["tp-executors"]);
    let forged_payload = b64e(claims.to_string().as_bytes());
    let forged = [
        format!("{}.{forged_payload}.{}", segments[0], segments[2]),
        format!(
            "{}.{forged_payload}.{}",
            b64e(br#"{"alg":"none","typ":"JWT"}"#),
            segments[2]
        ),
        format!(
            "{}.{forged_payload}.{}",
            b64e(br#"{"alg":"HS256","typ":"JWT"}"#),
            segments[2]
        ),
    ];
    for token in &forged {
        let reply = McpHttp::new(&edge.addr, Some(token), LEGACY)
            .request(1, "tools/list", json!({}))
            .await;
        assert_eq!(reply.status, 401, "{token}");
        let challenge = reply.headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    }

    // A token minted for one edge is not accepted by another service: a second edge with its
    // own resource URL refuses alice's token (audience), and takes its own.
    let (other, _) = edge_with_oauth(&fleet, issuer).await;
    let replayed = McpHttp::new(&other.addr, Some(&tokens[0]), LEGACY);
    assert_eq!(tool_names(&replayed).await.0, 401);

    // The tenant stops trusting the provider: its tokens stop working on the next request.
    set_trusts(&fleet, "qa", Vec::new()).await.unwrap();
    eventually("qa's tokens to be refused", Duration::from_secs(10), || {
        let alice = alice.clone();
        async move { (tool_names(&alice).await.0 == 401).then_some(()) }
    })
    .await;
    // globex's still work.
    let carol = McpHttp::new(&edge.addr, Some(&tokens[2]), LEGACY);
    assert_eq!(tool_names(&carol).await.0, 200);
}

fn b64(segment: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(segment)
        .unwrap()
}

fn b64e(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An issuer the test controls: its metadata and key set served over HTTP, its keys generated
/// here, so tokens can be made that a real provider would never issue.
pub(crate) struct TestIssuer {
    pub(crate) url: String,
    keys: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    fetches: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub(crate) struct SigningKey {
    kid: String,
    key: jsonwebtoken::EncodingKey,
    jwk: Value,
}

pub(crate) fn signing_key(kid: &str) -> SigningKey {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &aws_lc_rs::rand::SystemRandom::new(),
    )
    .unwrap();
    let key = jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref());
    let mut jwk = serde_json::to_value(
        jsonwebtoken::jwk::Jwk::from_encoding_key(&key, jsonwebtoken::Algorithm::ES256).unwrap(),
    )
    .unwrap();
    jwk["kid"] = json!(kid);
    SigningKey {
        kid: kid.into(),
        key,
        jwk,
    }
}

impl TestIssuer {
    pub(crate) async fn start() -> TestIssuer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let keys = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
        let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (served_keys, served_fetches, issuer) = (keys.clone(), fetches.clone(), url.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut request = vec![0u8; 4096];
                let n = stream.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..n]).to_string();
                let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
                let body = match path.as_str() {
                    "/.well-known/openid-configuration" => {
                        json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")})
                    }
                    "/jwks" => {
                        served_fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        json!({"keys": *served_keys.lock().unwrap()})
                    }
                    _ => Value::Null,
                };
                let status = if body.is_null() {
                    "404 Not Found"
                } else {
                    "200 OK"
                };
                let body = body.to_string();
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        TestIssuer { url, keys, fetches }
    }

    pub(crate) fn publish(&self, keys: &[&SigningKey]) {
        *self.keys.lock().unwrap() = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    pub(crate) fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(crate) fn token(&self, key: &SigningKey, claims: Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(key.kid.clone());
        let mut all = json!({"iss": self.url, "sub": "user-1", "aud": RESOURCE, "exp": now() + 300, "org": "acme"});
        for (name, value) in claims.as_object().unwrap() {
            if value.is_null() {
                all.as_object_mut().unwrap().remove(name);
            } else {
                all[name] = value.clone();
            }
        }
        jsonwebtoken::encode(&header, &all, &key.key).unwrap()
    }
}

pub(crate) const RESOURCE: &str = "https://mcp.example.com/mcp";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn the_control_plane_refuses_every_token_it_should() {
    let dir = tempfile::tempdir().unwrap();
    let cp = tp_test_support::ControlPlaneProcess::start_with_env(
        dir.path(),
        vec!["--demo".into()],
        vec![("TOOLPLANE_CP_AUTH__TOKEN_KEY_REFETCH_SECS", "1".into())],
    )
    .await;
    let issuer = TestIssuer::start().await;
    let stranger = TestIssuer::start().await;
    let first = signing_key("k1");
    issuer.publish(&[&first]);
    stranger.publish(&[&first]);
    let mut admin = cp.admin().await;
    let mut acme = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    acme.token_issuers = vec![pb::TokenIssuer {
        issuer: issuer.url.clone(),
        default_role: "collector".into(),
        ..Default::default()
    }];
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(acme))
        .await
        .unwrap();
    let mut edge = cp.as_edge().await;
    let mut authenticate = async |token: String, resource: &str| {
        edge.registry
            .authenticate(pb::AuthenticateRequest {
                key: token,
                resource: resource.into(),
            })
            .await
            .map(tonic::Response::into_inner)
    };

    let good = issuer.token(&first, json!({}));
    let identity = authenticate(good.clone(), RESOURCE).await.unwrap();
    assert_eq!(
        (identity.tenant.as_str(), identity.role.as_str()),
        ("acme", "collector")
    );
    assert_eq!(identity.key_id, format!("{}#user-1", issuer.url));
    assert!(identity.expires_at > now());
    assert_eq!(issuer.fetches(), 1);

    let forged_key = signing_key("k1");
    let hmac = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"iss": issuer.url, "sub": "x", "aud": RESOURCE, "exp": now() + 300}),
        &jsonwebtoken::EncodingKey::from_secret(first.jwk["x"].as_str().unwrap().as_bytes()),
    )
    .unwrap();
    let refused = [
        ("expired", issuer.token(&first, json!({"exp": now() - 120}))),
        (
            "not yet valid",
            issuer.token(&first, json!({"nbf": now() + 600})),
        ),
        ("no exp", issuer.token(&first, json!({"exp": null}))),
        (
            "another audience",
            issuer.token(&first, json!({"aud": "https://other.example.com/mcp"})),
        ),
        ("no audience", issuer.token(&first, json!({"aud": null}))),
        ("no subject", issuer.token(&first, json!({"sub": null}))),
        (
            "signed by another key with the same kid",
            issuer.token(&forged_key, json!({})),
        ),
        ("HMAC keyed with the public key", hmac),
        (
            "an issuer no tenant trusts",
            stranger.token(&first, json!({})),
        ),
    ];
    for (what, token) in refused {
        let status = authenticate(token, RESOURCE).await.unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{what}: {status:?}"
        );
    }
    // An edge with OAuth off (no resource URL) takes no tokens at all.
    let off = authenticate(good.clone(), "").await.unwrap_err();
    assert_eq!(off.code(), tonic::Code::Unauthenticated);
    // Nothing above made the control plane contact the stranger, nor refetch keys.
    assert_eq!(stranger.fetches(), 0);
    assert_eq!(issuer.fetches(), 1);

    // The provider rotates: a token under a new kid makes one refetch (once the refetch
    // interval, 1 s here, has passed), and the old key is gone.
    let second = signing_key("k2");
    issuer.publish(&[&second]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let rotated = authenticate(issuer.token(&second, json!({})), RESOURCE)
        .await
        .unwrap();
    assert_eq!(rotated.tenant, "acme");
    assert_eq!(issuer.fetches(), 2);
    // Random kids do not make it fetch again and again.
    for i in 0..5 {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(format!("random-{i}"));
        let token = jsonwebtoken::encode(
            &header,
            &json!({"iss": issuer.url, "sub": "x", "aud": RESOURCE, "exp": now() + 300}),
            &second.key,
        )
        .unwrap();
        assert!(authenticate(token, RESOURCE).await.is_err());
    }
    assert_eq!(
        issuer.fetches(),
        2,
        "unknown kids within the interval are refused from cache"
    );
}

/// Scopes that name providers narrow a caller's tools (ADR 0015, phase 3): with the trust's
/// `provider_scope_prefix`, a token whose scopes (`scp`) hold `provider:hubspot` sees acme's
/// HubSpot tools and the platform tools but not Google's, and a call to a Google tool fails as
/// unknown; a token of the same tenant and role without such scopes sees everything acme
/// sees; a trust without the prefix ignores the scopes.
#[tokio::test]
async fn scopes_naming_providers_narrow_what_a_token_sees_and_calls() {
    const SECRET: &str = "secret-of-a-machine-client-0123";
    let dir = tempfile::tempdir().unwrap();
    let client = |scp: &[&str]| json!({"secret": SECRET, "claims": {"org": "acme", "scp": scp}});
    let clients = json!({
        "narrow": client(&["provider:hubspot", "other:thing"]),
        "wide": client(&[]),
    });
    let provider = start_provider_with(dir.path(), &clients).await;
    let fleet = Fleet::start(1, "").await;
    let (edge, resource) = edge_with_oauth(&fleet, &provider.issuer).await;
    let mut trust = trust(&provider.issuer, "acme", &[], "collector");
    trust.provider_scope_prefix = "provider:".into();
    set_trusts(&fleet, "acme", vec![trust.clone()])
        .await
        .unwrap();
    let token = |client: &'static str| {
        let (issuer, resource) = (provider.issuer.clone(), resource.clone());
        async move {
            let body = format!(
                "grant_type=client_credentials&client_id={client}&client_secret={SECRET}&resource={}",
                resource.replace(':', "%3A").replace('/', "%2F")
            );
            let reply: Value = reqwest::Client::new()
                .post(format!("{issuer}/token"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            reply["access_token"].as_str().expect("a token").to_owned()
        }
    };
    let narrow = McpHttp::new(&edge.addr, Some(&token("narrow").await), LEGACY);
    let wide = McpHttp::new(&edge.addr, Some(&token("wide").await), LEGACY);

    let (status, seen) = tool_names(&narrow).await;
    assert_eq!(status, 200);
    assert!(seen.contains(&"hubspot_crm".to_owned()), "{seen:?}");
    assert!(
        seen.contains(&"agent_state".to_owned()),
        "platform tools stay: {seen:?}"
    );
    assert!(!seen.iter().any(|n| n.starts_with("google")), "{seen:?}");
    let (_, all) = tool_names(&wide).await;
    assert!(
        all.contains(&"google_ads".to_owned()) && all.len() > seen.len(),
        "{all:?}"
    );
    // Hidden tools cannot be called either: they fail as unknown, as for any tool not seen.
    let refused = narrow.call("google_ads", json!({})).await;
    assert!(refused.body.contains("nknown"), "{}", refused.body);
    let allowed = narrow
        .call("hubspot_crm", json!({"action": "search"}))
        .await;
    assert!(!allowed.body.contains("nknown"), "{}", allowed.body);

    // Change streams follow what each caller sees: a new Google tool for acme is announced to
    // the wide token's listener and not to the narrowed one's (it would tell that caller of a
    // tool it cannot see); a new HubSpot tool is announced to both.
    let listen = |token: String| {
        let addr = edge.addr.clone();
        async move {
            let (status, mut stream) = McpHttp::new(&addr, Some(&token), STATELESS)
                .stream(
                    1,
                    "subscriptions/listen",
                    json!({"notifications": {"toolsListChanged": true}}),
                )
                .await;
            assert_eq!(status, 200);
            let acknowledged = tokio::time::timeout(Duration::from_secs(5), stream.recv()).await;
            assert!(matches!(acknowledged, Ok(Some(_))), "no acknowledgement");
            stream
        }
    };
    let mut narrow_listener = listen(token("narrow").await).await;
    let mut wide_listener = listen(token("wide").await).await;
    async fn heard(
        stream: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
        within: Duration,
    ) -> bool {
        let next = async {
            while let Some(message) = stream.recv().await {
                if message["method"] == "notifications/tools/list_changed" {
                    return true;
                }
            }
            false
        };
        tokio::time::timeout(within, next).await == Ok(true)
    }
    let mut admin = fleet.cp.admin().await;
    for (name, provider) in [
        ("google_new_report", "google"),
        ("hubspot_new_deal", "hubspot"),
    ] {
        let mut tool = crate::fleet::test_tool(name, json!({"type": "object"}), true);
        tool.provider = provider.into();
        admin
            .catalog
            .register_tool(pb::RegisterToolRequest { tool: Some(tool) })
            .await
            .unwrap();
        assert!(
            heard(&mut wide_listener, Duration::from_secs(10)).await,
            "the wide token's listener heard nothing of {name}"
        );
        let narrow_heard = heard(&mut narrow_listener, Duration::from_secs(2)).await;
        assert_eq!(
            narrow_heard,
            provider == "hubspot",
            "the narrowed listener and {name}"
        );
    }

    // Without the prefix the trust ignores scopes: the same token sees everything (a fresh
    // token, so the edge's identity cache does not answer with the narrowed caller).
    trust.provider_scope_prefix = String::new();
    set_trusts(&fleet, "acme", vec![trust]).await.unwrap();
    let again = McpHttp::new(&edge.addr, Some(&token("narrow").await), LEGACY);
    eventually(
        "the trust's change on the edge",
        Duration::from_secs(10),
        || async {
            let (_, names) = tool_names(&again).await;
            names.contains(&"google_ads".to_owned()).then_some(())
        },
    )
    .await;
    println!(
        "provider scopes: a token naming provider:hubspot saw {} of acme's {} tools (no Google tool; a Google call unknown)",
        seen.len(),
        all.len()
    );
}
