//! Admin identities against a real control plane: scoped admin tokens (read-only,
//! tenant-admin for named tenants, full) allow exactly what their scope says over gRPC and
//! through `toolplanectl`; they are shown once, stored hashed, survive a restart, expire and
//! can be revoked; and every committed write records who made it.

use std::time::Duration;

use tonic::Code;
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, binary};

use crate::control_plane::run;

async fn issue(
    admin: &mut tp_client::Admin,
    scope: pb::AdminScope,
    tenants: &[&str],
    label: &str,
) -> (String, String) {
    let issued = admin
        .admins
        .issue_admin_token(pb::IssueAdminTokenRequest {
            scope: scope as i32,
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
            label: label.into(),
            expires_at: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let info = issued.info.unwrap();
    assert!(issued.token.starts_with("tpa_"), "{}", issued.token);
    (issued.token, info.id)
}

async fn revision(admin: &mut tp_client::Admin) -> u64 {
    admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision
}

fn code<T: std::fmt::Debug>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    match result {
        Ok(response) => panic!("accepted: {response:?}"),
        Err(status) => status.code(),
    }
}

fn key_request(tenant: &str) -> pb::IssueApiKeyRequest {
    pb::IssueApiKeyRequest {
        tenant: tenant.into(),
        role: "collector".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn scoped_admin_tokens_allow_what_their_scope_says_and_every_write_names_its_author() {
    let mut cp = ControlPlaneProcess::start(true).await;
    let mut root = cp.admin().await;
    let me = root
        .admins
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (me.name.as_str(), me.scope),
        ("admin", pb::AdminScope::Full as i32)
    );

    // Bad requests change nothing.
    let before = revision(&mut root).await;
    let now = tp_proto::clock::now_ms() / 1000;
    for (what, request, expected) in [
        (
            "no scope",
            pb::IssueAdminTokenRequest::default(),
            Code::InvalidArgument,
        ),
        (
            "a tenant admin of nothing",
            pb::IssueAdminTokenRequest {
                scope: pb::AdminScope::TenantAdmin as i32,
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
        (
            "a tenant admin of a tenant that does not exist",
            pb::IssueAdminTokenRequest {
                scope: pb::AdminScope::TenantAdmin as i32,
                tenants: vec!["nope".into()],
                ..Default::default()
            },
            Code::NotFound,
        ),
        (
            "a read-only token naming tenants",
            pb::IssueAdminTokenRequest {
                scope: pb::AdminScope::ReadOnly as i32,
                tenants: vec!["acme".into()],
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
        (
            "an expiry in the past",
            pb::IssueAdminTokenRequest {
                scope: pb::AdminScope::Full as i32,
                expires_at: now - 10,
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
        (
            "a label of 1000 characters",
            pb::IssueAdminTokenRequest {
                scope: pb::AdminScope::Full as i32,
                label: "x".repeat(1000),
                ..Default::default()
            },
            Code::InvalidArgument,
        ),
    ] {
        let got = code(root.admins.issue_admin_token(request).await);
        assert_eq!(got, expected, "{what}");
    }
    assert_eq!(revision(&mut root).await, before);

    let (read_only, read_only_id) =
        issue(&mut root, pb::AdminScope::ReadOnly, &[], "dashboards").await;
    let (acme_admin, acme_id) = issue(
        &mut root,
        pb::AdminScope::TenantAdmin,
        &["acme"],
        "acme team",
    )
    .await;
    let (full, full_id) = issue(&mut root, pb::AdminScope::Full, &[], "ci").await;
    let listed = root
        .admins
        .list_admin_tokens(pb::ListAdminTokensRequest {})
        .await
        .unwrap()
        .into_inner()
        .tokens;
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|t| t.created_by == "admin"));
    // The secrets are nowhere but in the answers that issued them.
    let stored = format!("{listed:?}");
    for secret in [&read_only, &acme_admin, &full] {
        assert!(!stored.contains(secret.as_str()));
    }

    // Read-only: every read, no write.
    let mut ro = tp_client::Admin::connect(&cp.url(), &read_only)
        .await
        .unwrap();
    ro.catalog
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap();
    let tenants = ro
        .tenants
        .list_tenants(pb::ListTenantsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tenants;
    assert!(tenants.len() >= 3);
    ro.tenants
        .list_api_keys(pb::ListApiKeysRequest::default())
        .await
        .unwrap();
    assert_eq!(
        code(ro.tenants.issue_api_key(key_request("acme")).await),
        Code::PermissionDenied
    );
    assert_eq!(
        code(
            ro.catalog
                .retire_tool(pb::RetireToolRequest {
                    name: "gmail".into()
                })
                .await
        ),
        Code::PermissionDenied
    );
    assert_eq!(
        code(
            ro.admins
                .issue_admin_token(pb::IssueAdminTokenRequest {
                    scope: pb::AdminScope::Full as i32,
                    ..Default::default()
                })
                .await
        ),
        Code::PermissionDenied
    );
    assert_eq!(
        code(
            ro.admins
                .list_admin_tokens(pb::ListAdminTokensRequest {})
                .await
        ),
        Code::PermissionDenied
    );

    // Tenant admin of acme: acme, and nothing else.
    let mut acme = tp_client::Admin::connect(&cp.url(), &acme_admin)
        .await
        .unwrap();
    acme.catalog
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap();
    let seen: Vec<String> = acme
        .tenants
        .list_tenants(pb::ListTenantsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tenants
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(seen, ["acme"]);
    let acme_key = acme
        .tenants
        .issue_api_key(key_request("acme"))
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap()
        .id;
    let globex_key = root
        .tenants
        .issue_api_key(key_request("globex"))
        .await
        .unwrap()
        .into_inner()
        .info
        .unwrap()
        .id;
    let keys = acme
        .tenants
        .list_api_keys(pb::ListApiKeysRequest::default())
        .await
        .unwrap()
        .into_inner()
        .keys;
    assert!(keys.iter().all(|k| k.tenant == "acme"), "{keys:?}");
    assert!(keys.iter().any(|k| k.id == acme_key));
    // Another tenant's key is "not found", as an unknown one is (no oracle of key ids).
    assert_eq!(
        code(
            acme.tenants
                .revoke_api_key(pb::RevokeApiKeyRequest {
                    id: globex_key.clone(),
                })
                .await,
        ),
        Code::NotFound
    );
    for denied in [
        code(acme.tenants.issue_api_key(key_request("globex")).await),
        code(
            acme.tenants
                .get_tenant(pb::GetTenantRequest {
                    id: "globex".into(),
                })
                .await,
        ),
        code(
            acme.tenants
                .preview_registry(pb::PreviewRegistryRequest {
                    tenant: "globex".into(),
                    role: "collector".into(),
                })
                .await,
        ),
        code(
            acme.audit
                .list_audit_records(pb::ListAuditRecordsRequest {
                    tenant: "globex".into(),
                    ..Default::default()
                })
                .await,
        ),
        code(
            acme.audit
                .get_usage(pb::GetUsageRequest {
                    tenant: "globex".into(),
                })
                .await,
        ),
        code(
            acme.tenants
                .create_tenant(pb::CreateTenantRequest {
                    tenant: Some(pb::Tenant {
                        id: "acme2".into(),
                        ..Default::default()
                    }),
                })
                .await,
        ),
        code(
            acme.catalog
                .retire_tool(pb::RetireToolRequest {
                    name: "gmail".into(),
                })
                .await,
        ),
    ] {
        assert_eq!(denied, Code::PermissionDenied);
    }
    // Its audit view and usage counters default to its tenant.
    acme.audit
        .list_audit_records(pb::ListAuditRecordsRequest::default())
        .await
        .unwrap();
    acme.audit
        .get_usage(pb::GetUsageRequest::default())
        .await
        .unwrap();
    // The usage counters are an admin read: the edge token (which every edge holds) cannot
    // read any tenant's.
    let mut as_edge = tp_client::Admin::connect(&cp.url(), &cp.edge_token())
        .await
        .unwrap();
    let refused = as_edge
        .audit
        .get_usage(pb::GetUsageRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    acme.tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: acme_key.clone(),
        })
        .await
        .unwrap();

    // Full: everything, admin tokens included; its writes carry its id.
    let mut ci = tp_client::Admin::connect(&cp.url(), &full).await.unwrap();
    let (_, issued_by_ci) = issue(&mut ci, pb::AdminScope::ReadOnly, &[], "by ci").await;
    ci.catalog
        .deprecate_tool(pb::DeprecateToolRequest {
            name: "gmail".into(),
            sunset_date: "2027-06-30".into(),
        })
        .await
        .unwrap();

    // Who wrote what.
    let changes = root
        .admins
        .list_changes(pb::ListChangesRequest {
            since_revision: before,
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    let by = |author: &str| -> Vec<String> {
        changes
            .iter()
            .filter(|c| c.author == author)
            .flat_map(|c| c.items.iter().map(|i| i.key.clone()))
            .collect()
    };
    assert_eq!(
        by("admin"),
        [
            read_only_id.clone(),
            acme_id.clone(),
            full_id.clone(),
            globex_key.clone()
        ]
    );
    assert_eq!(by(&acme_id), [acme_key.clone(), acme_key.clone()]);
    assert_eq!(by(&full_id), [issued_by_ci.clone(), "gmail".to_owned()]);
    // The seeded world was written by the system.
    let seeded = root
        .admins
        .list_changes(pb::ListChangesRequest {
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(seeded.changes[0].author, "system");
    assert_eq!(seeded.next_since_revision, 1);
    // A tenant admin sees only what touched its tenants.
    let acme_view = acme
        .admins
        .list_changes(pb::ListChangesRequest {
            since_revision: before,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    let keys: Vec<&str> = acme_view
        .iter()
        .flat_map(|c| c.items.iter().map(|i| i.key.as_str()))
        .collect();
    assert_eq!(keys, [acme_key.as_str(), acme_key.as_str()]);
    // Each change says what it did: the key issued, then revoked (not "put" twice).
    let verbs: Vec<&str> = acme_view
        .iter()
        .flat_map(|c| c.items.iter().map(|i| i.verb.as_str()))
        .collect();
    assert_eq!(verbs, ["issue", "revoke"]);

    // toolplanectl with each token.
    let ctl = binary("toolplanectl");
    let (status, stdout, stderr) = run(
        &ctl,
        &["--addr", &cp.addr, "--token", &acme_admin, "whoami"],
    )
    .await;
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stdout.trim(), format!("{acme_id} (tenant-admin: acme)"));
    let (status, _, stderr) = run(
        &ctl,
        &[
            "--addr", &cp.addr, "--token", &read_only, "tools", "retire", "gmail",
        ],
    )
    .await;
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("may not call"), "{stderr}");
    let (status, stdout, stderr) = run(
        &ctl,
        &[
            "--addr", &cp.addr, "--token", &full, "--json", "changes", "--author", &full_id,
        ],
    )
    .await;
    assert_eq!(status, 0, "{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[1]["items"][0]["key"], "gmail");
    assert_eq!(lines[1]["items"][0]["kind"], "tool");
    assert_eq!(lines[1]["items"][0]["verb"], "deprecate");
    let (status, stdout, stderr) = run(
        &ctl,
        &[
            "--addr",
            &cp.addr,
            "--token",
            &full,
            "admin-tokens",
            "issue",
            "--scope",
            "tenant-admin",
            "--tenant",
            "globex",
            "--label",
            "globex team",
        ],
    )
    .await;
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.trim().starts_with("tpa_") && stderr.contains("shown once"));
    let (status, _, stderr) = run(
        &ctl,
        &[
            "--addr",
            &cp.addr,
            "--token",
            &full,
            "admin-tokens",
            "issue",
            "--scope",
            "root",
        ],
    )
    .await;
    assert_eq!(status, 2, "{stderr}");

    // Revoked: refused at once; tokens and revocations survive a restart.
    root.admins
        .revoke_admin_token(pb::RevokeAdminTokenRequest {
            id: acme_id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(
        code(acme.tenants.list_tenants(pb::ListTenantsRequest {}).await),
        Code::Unauthenticated
    );
    assert_eq!(
        code(
            root.admins
                .revoke_admin_token(pb::RevokeAdminTokenRequest {
                    id: acme_id.clone()
                })
                .await
        ),
        Code::FailedPrecondition
    );
    cp.kill9_and_restart().await;
    let mut ro = tp_client::Admin::connect(&cp.url(), &read_only)
        .await
        .unwrap();
    ro.catalog
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap();
    let mut acme = tp_client::Admin::connect(&cp.url(), &acme_admin)
        .await
        .unwrap();
    assert_eq!(
        code(acme.tenants.list_tenants(pb::ListTenantsRequest {}).await),
        Code::Unauthenticated
    );
    let mut stranger = tp_client::Admin::connect(&cp.url(), "tpa_not-a-token")
        .await
        .unwrap();
    assert_eq!(
        code(
            stranger
                .catalog
                .list_tools(pb::ListToolsRequest::default())
                .await
        ),
        Code::Unauthenticated
    );

    // Expiry.
    let mut root = cp.admin().await;
    let issued = root
        .admins
        .issue_admin_token(pb::IssueAdminTokenRequest {
            scope: pb::AdminScope::ReadOnly as i32,
            expires_at: tp_proto::clock::now_ms() / 1000 + 2,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut brief = tp_client::Admin::connect(&cp.url(), &issued.token)
        .await
        .unwrap();
    brief
        .catalog
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_eq!(
        code(
            brief
                .catalog
                .list_tools(pb::ListToolsRequest::default())
                .await
        ),
        Code::Unauthenticated
    );
}
