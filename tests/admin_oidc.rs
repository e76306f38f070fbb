//! Admins signing in with an OpenID provider: a real provider (oidc-provider from npm, see
//! clients/idp.mjs) issues access tokens to machine clients (the client-credentials grant, as a
//! CI pipeline signs in); the control plane, configured with `[admin_oidc]`, verifies them
//! against the provider's keys, maps their groups to admin scopes, and records the signed-in
//! name as the author of every write. The configured and issued admin tokens keep working.

use serde_json::{Value, json};
use tonic::Code;
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, binary};

use crate::control_plane::run;
use crate::oauth::start_provider_with;

const AUDIENCE: &str = "urn:toolplane:admin";
const SECRET: &str = "machine-client-secret-0123456789";

/// The provider's machine clients and the groups their tokens carry.
fn clients() -> Value {
    let client = |groups: &[&str]| json!({"secret": SECRET, "claims": {"groups": groups}});
    json!({
        "ci-platform": client(&["staff", "platform"]),
        "ci-viewer": client(&["viewers"]),
        "ci-acme": client(&["acme-admins"]),
        "ci-stranger": client(&["staff"]),
    })
}

/// An access token for `client`, minted for `resource` (RFC 8707).
async fn token(issuer: &str, client: &str, resource: &str) -> String {
    let encode = |s: &str| s.replace(':', "%3A").replace('/', "%2F");
    let body = format!(
        "grant_type=client_credentials&client_id={client}&client_secret={SECRET}&resource={}",
        encode(resource)
    );
    let response = reqwest::Client::new()
        .post(format!("{issuer}/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let reply: Value = response.json().await.unwrap();
    assert!(status.is_success(), "{status}: {reply}");
    reply["access_token"].as_str().unwrap().to_owned()
}

fn code<T: std::fmt::Debug>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    match result {
        Ok(response) => panic!("accepted: {response:?}"),
        Err(status) => status.code(),
    }
}

async fn whoami(admin: &mut tp_client::Admin) -> Result<pb::AdminIdentity, tonic::Status> {
    admin
        .admins
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .map(tonic::Response::into_inner)
}

fn tenant(id: &str) -> pb::CreateTenantRequest {
    pb::CreateTenantRequest {
        tenant: Some(pb::Tenant {
            id: id.into(),
            connected_apis: Some(pb::ConnectedApis::default()),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn admins_sign_in_with_the_openid_provider_and_their_groups_decide_their_scope() {
    let dir = tempfile::tempdir().unwrap();
    let provider = start_provider_with(dir.path(), &clients()).await;
    let issuer = provider.issuer.clone();
    let config = dir.path().join("control-plane.toml");
    std::fs::write(
        &config,
        format!(
            "[admin_oidc]\nissuer = {issuer:?}\naudience = {AUDIENCE:?}\n\
             full_groups = [\"platform\"]\nread_only_groups = [\"viewers\"]\n\
             [admin_oidc.tenant_admin_groups]\nacme-admins = [\"acme\"]\n"
        ),
    )
    .unwrap();
    let data = dir.path().join("cp");
    std::fs::create_dir_all(&data).unwrap();
    let cp = ControlPlaneProcess::start_in(
        &data,
        vec![
            "--demo".into(),
            "--config".into(),
            config.display().to_string(),
        ],
    )
    .await;
    let connect = |token: String| {
        let url = cp.url();
        async move { tp_client::Admin::connect(&url, &token).await.unwrap() }
    };

    // full: every write, recorded under the signed-in name.
    let platform_token = token(&issuer, "ci-platform", AUDIENCE).await;
    let mut platform = connect(platform_token.clone()).await;
    let me = whoami(&mut platform).await.unwrap();
    assert_eq!(me.name, "oidc:ci-platform");
    assert_eq!(me.scope, pb::AdminScope::Full as i32);
    platform
        .tenants
        .create_tenant(tenant("made-by-oidc"))
        .await
        .unwrap();
    let changes = platform
        .admins
        .list_changes(pb::ListChangesRequest {
            author: "oidc:ci-platform".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(
        changes[0].items.iter().any(|i| i.key == "made-by-oidc"),
        "{changes:?}"
    );

    // read_only: reads, no writes.
    let mut viewer = connect(token(&issuer, "ci-viewer", AUDIENCE).await).await;
    assert_eq!(
        whoami(&mut viewer).await.unwrap().scope,
        pb::AdminScope::ReadOnly as i32
    );
    viewer
        .tenants
        .list_tenants(pb::ListTenantsRequest::default())
        .await
        .unwrap();
    assert_eq!(
        code(viewer.tenants.create_tenant(tenant("viewer-made")).await),
        Code::PermissionDenied
    );

    // tenant_admin: its tenant only.
    let mut acme = connect(token(&issuer, "ci-acme", AUDIENCE).await).await;
    let me = whoami(&mut acme).await.unwrap();
    assert_eq!(
        (me.scope, me.tenants),
        (pb::AdminScope::TenantAdmin as i32, vec!["acme".to_owned()])
    );
    acme.tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        code(
            acme.tenants
                .get_tenant(pb::GetTenantRequest {
                    id: "globex".into()
                })
                .await
        ),
        Code::PermissionDenied
    );

    // Signed in, but in no mapped group: nothing, not even reads.
    let mut stranger = connect(token(&issuer, "ci-stranger", AUDIENCE).await).await;
    assert_eq!(
        code(
            stranger
                .catalog
                .list_tools(pb::ListToolsRequest::default())
                .await
        ),
        Code::PermissionDenied
    );

    // Tokens that must not verify: minted for another audience, tampered with, unsigned.
    let other_audience = token(&issuer, "ci-platform", "https://other.example.com/api").await;
    let mut parts: Vec<String> = platform_token.split('.').map(str::to_owned).collect();
    parts[1] = {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut claims: Value = serde_json::from_slice(&engine.decode(&parts[1]).unwrap()).unwrap();
        claims["groups"] = json!(["platform"]);
        claims["sub"] = json!("someone-else");
        engine.encode(serde_json::to_vec(&claims).unwrap())
    };
    let tampered = parts.join(".");
    let unsigned = format!(
        "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{}.",
        platform_token.split('.').nth(1).unwrap()
    );
    for (what, bad) in [
        ("another audience", other_audience),
        ("tampered", tampered),
        ("alg none", unsigned),
    ] {
        let mut admin = connect(bad).await;
        let status = whoami(&mut admin).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
    }

    // The configured admin token and issued tokens work beside it.
    let mut root = cp.admin().await;
    assert_eq!(whoami(&mut root).await.unwrap().name, "admin");

    // The operator's CLI takes the provider's token like any admin token.
    let (status, stdout, stderr) = run(
        &binary("toolplanectl"),
        &["--addr", &cp.addr, "--token", &platform_token, "whoami"],
    )
    .await;
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stdout.trim(), "oidc:ci-platform (full)");
}
