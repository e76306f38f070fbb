//! TLS on every hop that crosses a host, with certificates made by the test (rcgen): clients
//! reach the edge over HTTPS; the edge reaches the control plane and the wiki over mutual TLS
//! (both refuse a client without a certificate their CA signed); `toolplanectl` reaches the
//! control plane with `TOOLPLANE_TLS_*`; and the edge's certificate is replaced on disk and
//! served to the next connection without a restart, while a broken replacement is refused and
//! the previous certificate stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tp_proto::pb;
use tp_test_support::admin::{NewExecutor, issue_key, upsert_executor};
use tp_test_support::{
    ControlPlaneProcess, EdgeProcess, ExecutorProcess, WikiProcess, binary, eventually,
};

/// A test CA and the files it signs.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Toolplane test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).unwrap();
        Pki {
            dir,
            issuer: Issuer::new(params, key),
        }
    }

    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A leaf for `name` (a server certificate for 127.0.0.1 and localhost, or a client one),
    /// written as `<name>.pem` and `<name>.key`.
    pub(crate) fn leaf(&self, name: &str, server: bool) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_path, key_path) = (
            self.dir.path().join(format!("{name}.pem")),
            self.dir.path().join(format!("{name}.key")),
        );
        // Written beside and renamed, as certificate managers do.
        std::fs::write(key_path.with_extension("tmp"), key.serialize_pem()).unwrap();
        std::fs::rename(key_path.with_extension("tmp"), &key_path).unwrap();
        std::fs::write(cert_path.with_extension("tmp"), cert.pem()).unwrap();
        std::fs::rename(cert_path.with_extension("tmp"), &cert_path).unwrap();
        (cert_path, key_path)
    }
}

fn client_tls(
    pki: &Pki,
    identity: Option<(&Path, &Path)>,
) -> Arc<tp_net::dial::ReloadingClientTls> {
    tp_net::dial::ReloadingClientTls::load(tp_net::dial::ClientTlsFiles {
        ca_file: Some(pki.ca()),
        cert_file: identity.map(|(cert, _)| cert.to_owned()),
        key_file: identity.map(|(_, key)| key.to_owned()),
    })
    .unwrap()
}

async fn admin_over_tls(
    addr: &str,
    token: &str,
    tls: &Arc<tp_net::dial::ReloadingClientTls>,
) -> tp_client::Admin {
    let channel = tp_net::dial::dial_with(&format!("https://{addr}"), Arc::clone(tls))
        .unwrap()
        .connect_lazy();
    tp_client::Admin::over(channel, tp_client::Bearer::new(token).unwrap())
}

/// A TLS connection to `addr` trusting the test CA: the certificate the server presented.
async fn handshake(
    pki: &Pki,
    addr: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in tp_net::tls::certificates(&pki.ca()).unwrap() {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(tp_net::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await
}

async fn served_certificate(pki: &Pki, addr: &str) -> Vec<u8> {
    let stream = handshake(pki, addr).await.unwrap();
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// `POST /mcp` over HTTPS: the whole answer.
async fn https_post(pki: &Pki, addr: &str, key: &str, body: &serde_json::Value) -> String {
    let mut stream = handshake(pki, addr).await.unwrap();
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn every_hop_speaks_tls_and_certificates_reload_without_a_restart() {
    let pki = Pki::new();
    let (cp_cert, cp_key) = pki.leaf("control-plane", true);
    let (wiki_cert, wiki_key) = pki.leaf("wiki", true);
    let (demo_cert, demo_key) = pki.leaf("demo-executor", true);
    let (edge_cert, edge_key) = pki.leaf("edge", true);
    let (edge_client_cert, edge_client_key) = pki.leaf("edge-client", false);
    let (operator_cert, operator_key) = pki.leaf("operator", false);
    let ca = pki.ca().display().to_string();

    // The control plane: TLS, client certificates required.
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlaneProcess::start_with_env(
        dir.path(),
        vec!["--demo".into()],
        vec![
            ("TOOLPLANE_CP_TLS__CERT_FILE", cp_cert.display().to_string()),
            ("TOOLPLANE_CP_TLS__KEY_FILE", cp_key.display().to_string()),
            ("TOOLPLANE_CP_TLS__CLIENT_CA_FILE", ca.clone()),
        ],
    )
    .await;
    let operator = client_tls(&pki, Some((&operator_cert, &operator_key)));
    let mut admin = admin_over_tls(&cp.addr, &cp.admin_token(), &operator).await;
    admin
        .catalog
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap();
    // No client certificate, or plain text: refused before any token is looked at.
    let mut anonymous = admin_over_tls(&cp.addr, &cp.admin_token(), &client_tls(&pki, None)).await;
    assert!(
        anonymous
            .catalog
            .list_tools(pb::ListToolsRequest::default())
            .await
            .is_err()
    );
    let plain = tp_client::Admin::connect(&cp.url(), &cp.admin_token()).await;
    match plain {
        Err(_) => {}
        Ok(mut plain) => assert!(
            plain
                .catalog
                .list_tools(pb::ListToolsRequest::default())
                .await
                .is_err()
        ),
    }
    // toolplanectl, configured by the environment.
    let output = tokio::process::Command::new(binary("toolplanectl"))
        .args([
            "--addr",
            &format!("https://{}", cp.addr),
            "--token-file",
            &dir.path().join("admin-token").display().to_string(),
            "whoami",
        ])
        .env("TOOLPLANE_TLS_CA_FILE", &ca)
        .env("TOOLPLANE_TLS_CLIENT_CERT_FILE", &operator_cert)
        .env("TOOLPLANE_TLS_CLIENT_KEY_FILE", &operator_key)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "admin (full)"
    );
    // The same with a named profile and no TOOLPLANE_* variable at all.
    let config = dir.path().join("cli.toml");
    std::fs::write(
        &config,
        format!(
            "default_profile = \"other\"\n\n[profiles.other]\naddr = \"127.0.0.1:1\"\n\n[profiles.prod]\naddr = \"https://{}\"\nca_file = {ca:?}\nclient_cert_file = {:?}\nclient_key_file = {:?}\ntoken_file = {:?}\n",
            cp.addr,
            operator_cert.display().to_string(),
            operator_key.display().to_string(),
            dir.path().join("admin-token").display().to_string()
        ),
    )
    .unwrap();
    let ctl = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = tokio::process::Command::new(binary("toolplanectl"));
        command
            .args(args)
            .env_remove("TOOLPLANE_TLS_CA_FILE")
            .env_remove("TOOLPLANE_TLS_CLIENT_CERT_FILE")
            .env_remove("TOOLPLANE_TLS_CLIENT_KEY_FILE")
            .env_remove("TOOLPLANE_ADDR")
            .env_remove("TOOLPLANE_ADMIN_TOKEN")
            .env("TOOLPLANE_CONFIG", &config);
        for (k, v) in env {
            command.env(k, v);
        }
        command.output()
    };
    let output = ctl(&["--profile", "prod", "whoami"], &[]).await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "admin (full)"
    );
    let output = ctl(&["--profile", "staging", "whoami"], &[]).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("profiles: other, prod"),
        "{stderr}"
    );
    // Without a client certificate, the error says which setting is missing.
    let output = ctl(
        &[
            "--addr",
            &format!("https://{}", cp.addr),
            "--token-file",
            &dir.path().join("admin-token").display().to_string(),
            "whoami",
        ],
        &[("TOOLPLANE_TLS_CA_FILE", ca.as_str())],
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("TOOLPLANE_TLS_CLIENT_CERT_FILE"),
        "{stderr}"
    );
    assert!(!stderr.contains("toolplane up"), "{stderr}");

    // The wiki: TLS with client certificates required; the edge calls it over https.
    let wiki = WikiProcess::start_with_args(&[
        "--tls-cert",
        wiki_cert.to_str().unwrap(),
        "--tls-key",
        wiki_key.to_str().unwrap(),
        "--tls-client-ca",
        &ca,
    ])
    .await;
    upsert_executor(
        &mut admin,
        NewExecutor::grpc("wiki", format!("https://{}", wiki.addr)),
    )
    .await;
    // The demo executor: TLS with client certificates required too.
    let demo = ExecutorProcess::start_with_args(vec![
        "--tls-cert".into(),
        demo_cert.display().to_string(),
        "--tls-key".into(),
        demo_key.display().to_string(),
        "--tls-client-ca".into(),
        ca.clone(),
    ])
    .await;
    upsert_executor(
        &mut admin,
        NewExecutor {
            timeout_ms: 5_000,
            ..NewExecutor::grpc("demo", format!("https://{}", demo.addr))
        },
    )
    .await;
    let key = issue_key(&mut admin, "acme", "collector").await;

    // The edge: HTTPS for clients, mutual TLS to the control plane and the wiki.
    let edge = EdgeProcess::start_with_env(
        &cp,
        &[format!("https://{}", cp.addr)],
        None,
        &format!(
            "[tls]\ncert_file = {:?}\nkey_file = {:?}\n",
            edge_cert.display().to_string(),
            edge_key.display().to_string()
        ),
        &[
            ("TOOLPLANE_TLS_CA_FILE", ca.clone()),
            (
                "TOOLPLANE_TLS_CLIENT_CERT_FILE",
                edge_client_cert.display().to_string(),
            ),
            (
                "TOOLPLANE_TLS_CLIENT_KEY_FILE",
                edge_client_key.display().to_string(),
            ),
        ],
    )
    .await;
    let answer = https_post(
        &pki,
        &edge.addr,
        &key,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "client_wiki", "arguments": {"action": "ingest", "source": {"type": "text",
                "source_label": "TLS", "text": "Every hop between hosts is encrypted."}}}}),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""isError":false"#), "{answer}");
    let answer = https_post(
        &pki,
        &edge.addr,
        &key,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "discover_apis", "arguments": {}}}),
    )
    .await;
    assert!(
        answer.contains(r#""isError":false"#),
        "demo executor over mTLS: {answer}"
    );
    // Plain HTTP to the HTTPS port gets no HTTP answer.
    let mut tcp = tokio::net::TcpStream::connect(&edge.addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut reply)).await;
    assert!(!reply.starts_with(b"HTTP/1.1 200"));

    // Rotation: a new certificate on disk is served to the next connection, no restart.
    let before = served_certificate(&pki, &edge.addr).await;
    assert_eq!(
        before,
        tp_net::tls::certificates(&edge_cert).unwrap()[0].to_vec()
    );
    pki.leaf("edge", true);
    let rotated = tp_net::tls::certificates(&edge_cert).unwrap()[0].to_vec();
    assert_ne!(before, rotated);
    eventually(
        "the edge to serve the rotated certificate",
        Duration::from_secs(15),
        || async { (served_certificate(&pki, &edge.addr).await == rotated).then_some(()) },
    )
    .await;
    // A broken replacement is refused; the last good certificate stays in use.
    std::fs::write(&edge_cert, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
    tokio::time::sleep(tp_net::tls::RELOAD_EVERY * 2).await;
    assert_eq!(served_certificate(&pki, &edge.addr).await, rotated);
    let answer = https_post(
        &pki,
        &edge.addr,
        &key,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "client_wiki", "arguments": {"action": "query",
                "question": "Is every hop encrypted?"}}}),
    )
    .await;
    assert!(answer.contains(r#""isError":false"#), "{answer}");
}

/// An MCP upstream behind mutual TLS with a private CA (another Toolplane edge serving HTTPS
/// that requires a client certificate): an edge given the CA and a client certificate
/// (`executors.upstream_*`) calls through it; an edge without the certificate is refused by
/// the upstream, and its caller gets "unavailable", not a hang.
#[tokio::test]
async fn an_mcp_upstream_behind_mutual_tls_is_reached_with_the_private_ca_and_a_client_certificate()
{
    let pki = Pki::new();
    let (server_cert, server_key) = pki.leaf("upstream", true);
    let (client_cert, client_key) = pki.leaf("edge-client", false);
    let fleet = crate::fleet::Fleet::start(0, "").await;
    let upstream = EdgeProcess::start(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        &format!(
            "[tls]\ncert_file = {:?}\nkey_file = {:?}\nclient_ca_file = {:?}\n",
            server_cert.display().to_string(),
            server_key.display().to_string(),
            pki.ca().display().to_string()
        ),
    )
    .await;
    let mut admin = fleet.cp.admin().await;
    admin
        .executors
        .upsert_executor(pb::UpsertExecutorRequest {
            update_mask: None,
            executor: Some(pb::ExecutorInfo {
                name: "secure".into(),
                endpoint: format!("https://{}/mcp", upstream.addr),
                protocol: pb::ExecutorProtocol::Mcp as i32,
                timeout_ms: 10_000,
                max_concurrency: 8,
                tool_prefix: "secure_".into(),
                credential_env: "TOOLPLANE_CRED_SECURE".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let mut tool = crate::fleet::test_tool(
        "secure_echo",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        true,
    );
    tool.executor = "secure".into();
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest { tool: Some(tool) })
        .await
        .unwrap();
    let credential = (
        "TOOLPLANE_CRED_SECURE",
        format!("Bearer {}", fleet.key("qa", "collector")),
    );
    let with_certificate = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        &format!(
            "[executors]\nupstream_ca_file = {:?}\nupstream_cert_file = {:?}\nupstream_key_file = {:?}\n",
            pki.ca().display().to_string(),
            client_cert.display().to_string(),
            client_key.display().to_string()
        ),
        std::slice::from_ref(&credential),
    )
    .await;
    let caller = fleet.key("qa", "executor").to_owned();
    let client = tp_test_support::McpHttp::new(&with_certificate.addr, Some(&caller), "2025-11-25");
    let reply = client
        .call("secure_echo", json!({"text": "over mutual TLS"}))
        .await;
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    assert_eq!(
        reply.result()["content"][0]["text"],
        "[qa/collector] over mutual TLS",
        "{}",
        reply.body
    );
    // The CA but no client certificate: the upstream refuses the handshake.
    let without = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        &format!(
            "[executors]\nupstream_ca_file = {:?}\n",
            pki.ca().display().to_string()
        ),
        std::slice::from_ref(&credential),
    )
    .await;
    let refused = tp_test_support::McpHttp::new(&without.addr, Some(&caller), "2025-11-25")
        .call("secure_echo", json!({"text": "x"}))
        .await;
    assert_eq!(refused.result()["isError"], true, "{}", refused.body);
    assert!(refused.body.contains("unavailable"), "{}", refused.body);
    // Neither the CA: the system's roots do not know the private CA.
    let untrusting = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        None,
        "",
        std::slice::from_ref(&credential),
    )
    .await;
    let refused = tp_test_support::McpHttp::new(&untrusting.addr, Some(&caller), "2025-11-25")
        .call("secure_echo", json!({"text": "x"}))
        .await;
    assert_eq!(refused.result()["isError"], true, "{}", refused.body);
    println!(
        "MCP upstream behind mutual TLS: reached with the private CA and a client certificate; refused without the certificate, and without the CA"
    );
}
