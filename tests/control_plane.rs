//! The control plane as a process: grpcurl, the ceiling, durability, Watch, auth, docs.

use std::time::Duration;

use futures::StreamExt;
use tonic::Code;
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, binary, grpcurl};

fn extra_tool(name: &str) -> pb::ToolSpec {
    pb::ToolSpec {
        name: name.into(),
        description: "An extra tool".into(),
        category: "extra".into(),
        input_schema: tp_proto::json::to_struct(&serde_json::json!({"type": "object"})),
        executor: "demo".into(),
        admission: Some(pb::Admission {
            adr: String::new(),
            owner: "qa".into(),
            scope: "tests".into(),
        }),
        ..Default::default()
    }
}

pub(crate) async fn run(program: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let output = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .expect("run");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn grpcurl_lists_and_describes_without_proto_files() {
    let cp = ControlPlaneProcess::start(false).await;
    let grpcurl = grpcurl();
    let (code, listed, stderr) = run(&grpcurl, &["-plaintext", &cp.addr, "list"]).await;
    assert_eq!(code, 0, "{stderr}");
    for service in [
        "toolplane.v1.Catalog",
        "toolplane.v1.Policy",
        "toolplane.v1.Tenants",
        "toolplane.v1.Executors",
        "toolplane.v1.Registry",
        "toolplane.v1.Audit",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(
            listed.lines().any(|l| l == service),
            "{service} missing from:\n{listed}"
        );
    }
    let (code, described, stderr) = run(
        &grpcurl,
        &["-plaintext", &cp.addr, "describe", "toolplane.v1.Catalog"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        described.contains(
            "rpc RegisterTool ( .toolplane.v1.RegisterToolRequest ) returns ( .toolplane.v1.Tool );"
        ),
        "{described}"
    );
    let (code, health, _) = run(
        &grpcurl,
        &["-plaintext", &cp.addr, "grpc.health.v1.Health/Check"],
    )
    .await;
    assert_eq!(code, 0);
    assert!(health.contains("SERVING"));
    // A call without the admin token is refused; with it, it works.
    let (code, _, stderr) = run(
        &grpcurl,
        &["-plaintext", &cp.addr, "toolplane.v1.Policy/GetPolicy"],
    )
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("Unauthenticated"), "{stderr}");
    let auth = format!("authorization: Bearer {}", cp.admin_token());
    let (code, policy, stderr) = run(
        &grpcurl,
        &[
            "-plaintext",
            "-H",
            &auth,
            &cp.addr,
            "toolplane.v1.Policy/GetPolicy",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(policy.contains("\"ceiling\": 35"), "{policy}");
}

#[tokio::test]
async fn the_36th_tool_is_refused_then_admitted_after_an_amendment() {
    let cp = ControlPlaneProcess::start(true).await;
    let mut admin = cp.admin().await;
    let policy = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (policy.count, policy.ceiling, policy.adr.as_str()),
        (34, 35, "ADR-007")
    );
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(extra_tool("tool_35")),
        })
        .await
        .unwrap();
    let refused = admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(extra_tool("tool_36")),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    for needle in ["35 of 35", "ADR-007", "polymorphic", "AmendCeiling"] {
        assert!(
            refused.message().contains(needle),
            "{needle:?} not in {}",
            refused.message()
        );
    }
    admin
        .policy
        .create_adr(pb::CreateAdrRequest {
            adr: Some(pb::Adr {
                id: "ADR-040".into(),
                title: "Raise the tool ceiling to 40".into(),
                status: pb::AdrStatus::Accepted as i32,
                date: "2026-11-22".into(),
                supersedes: "ADR-007".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let amended = admin
        .policy
        .amend_ceiling(pb::AmendCeilingRequest {
            ceiling: 40,
            adr: "ADR-040".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (amended.ceiling, amended.adr.as_str(), amended.history.len()),
        (40, "ADR-040", 2)
    );
    admin
        .catalog
        .register_tool(pb::RegisterToolRequest {
            tool: Some(extra_tool("tool_36")),
        })
        .await
        .unwrap();
    let old = admin
        .policy
        .get_adr(pb::GetAdrRequest {
            id: "ADR-007".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(old.status, pb::AdrStatus::Superseded as i32);
}

#[tokio::test]
async fn fifty_concurrent_registrations_for_one_slot_admit_exactly_one() {
    let cp = ControlPlaneProcess::start(true).await;
    let admin = cp.admin().await;
    let attempts = (0..50).map(|i| {
        let mut catalog = admin.catalog.clone();
        tokio::spawn(async move {
            catalog
                .register_tool(pb::RegisterToolRequest {
                    tool: Some(extra_tool(&format!("racer_{i:02}"))),
                })
                .await
        })
    });
    let results = futures::future::join_all(attempts).await;
    let mut admitted = 0;
    let mut refused = 0;
    for result in results {
        match result.unwrap() {
            Ok(_) => admitted += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
                refused += 1;
            }
        }
    }
    println!("ceiling race: 50 attempts, {admitted} admitted, {refused} refused");
    assert_eq!((admitted, refused), (1, 49));
    let mut policy = admin.policy.clone();
    let status = policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!((status.count, status.ceiling, status.headroom), (35, 35, 0));
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let mut cp = ControlPlaneProcess::start(true).await;
    let mut admin = cp.admin().await;
    let created = admin
        .tenants
        .create_tenant(pb::CreateTenantRequest {
            tenant: Some(pb::Tenant {
                id: "durable".into(),
                connected_apis: Some(pb::ConnectedApis {
                    providers: vec!["aws".into()],
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let key = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "durable".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let before = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    cp.kill9_and_restart().await;
    let mut admin = cp.admin().await;
    let after = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    assert_eq!(after, before, "the revision survives");
    let tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest {
            id: "durable".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(tenant.connected_apis, created.connected_apis);
    let mut edge = cp.as_edge().await;
    let identity = edge
        .registry
        .authenticate(pb::AuthenticateRequest {
            key: key.key,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (identity.tenant.as_str(), identity.role.as_str()),
        ("durable", "collector")
    );
}

fn change_revision(event: &pb::WatchEvent) -> Option<u64> {
    match &event.event {
        Some(pb::watch_event::Event::Change(change)) => Some(change.revision),
        Some(pb::watch_event::Event::Heartbeat(_)) | None => None,
    }
}

#[tokio::test]
async fn watch_resumes_after_a_dropped_stream_without_loss_or_duplicates() {
    let cp = ControlPlaneProcess::start(true).await;
    let mut admin = cp.admin().await;
    let mut edge = cp.as_edge().await;
    let start = admin
        .policy
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner()
        .revision;
    let mut stream = edge
        .registry
        .watch(pb::WatchRequest {
            since_revision: start,
            heartbeat_ms: 200,
        })
        .await
        .unwrap()
        .into_inner();
    let writer = {
        let mut catalog = admin.catalog.clone();
        tokio::spawn(async move {
            for i in 0..100 {
                catalog
                    .upsert_provider(pb::UpsertProviderRequest {
                        provider: Some(pb::Provider {
                            id: format!("p{i:03}"),
                            ..Default::default()
                        }),
                    })
                    .await
                    .unwrap();
            }
        })
    };
    let mut seen = Vec::new();
    while seen.len() < 40 {
        let event = stream.next().await.expect("stream open").expect("event");
        if let Some(revision) = change_revision(&event) {
            seen.push(revision);
        }
    }
    drop(stream);
    let resume_from = *seen.last().unwrap();
    writer.await.unwrap();
    let mut resumed = edge
        .registry
        .watch(pb::WatchRequest {
            since_revision: resume_from,
            heartbeat_ms: 200,
        })
        .await
        .unwrap()
        .into_inner();
    while seen.len() < 100 {
        let event = tokio::time::timeout(Duration::from_secs(10), resumed.next())
            .await
            .expect("events keep coming")
            .expect("stream open")
            .expect("event");
        if let Some(revision) = change_revision(&event) {
            seen.push(revision);
        }
    }
    let expected: Vec<u64> = (start + 1..=start + 100).collect();
    assert_eq!(seen, expected, "every change exactly once, in order");
    // Nothing more arrives but heartbeats.
    let next = tokio::time::timeout(Duration::from_secs(2), resumed.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(next.event, Some(pb::watch_event::Event::Heartbeat(ref beat)) if beat.revision == start + 100)
    );
    // A revision from the future is refused.
    let ahead = edge
        .registry
        .watch(pb::WatchRequest {
            since_revision: start + 1_000,
            heartbeat_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(ahead.code(), Code::OutOfRange);
}

#[tokio::test]
async fn tokens_guard_every_service() {
    let cp = ControlPlaneProcess::start(true).await;
    let wrong = tp_client::Admin::connect(&cp.url(), "not-the-token-at-all")
        .await
        .unwrap();
    let mut wrong_catalog = wrong.catalog.clone();
    assert_eq!(
        wrong_catalog
            .list_roles(pb::ListRolesRequest {})
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    let mut wrong_registry = wrong.registry.clone();
    let refused = wrong_registry
        .authenticate(pb::AuthenticateRequest {
            key: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    // The edge token does not open admin services.
    let mut edge = cp.as_edge().await;
    assert_eq!(
        edge.catalog
            .list_roles(pb::ListRolesRequest {})
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    // Keys: unknown, revoked and expired keys fail alike.
    let mut admin = cp.admin().await;
    let issued = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "executor".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ok = edge
        .registry
        .authenticate(pb::AuthenticateRequest {
            key: issued.key.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((ok.tenant.as_str(), ok.role.as_str()), ("acme", "executor"));
    admin
        .tenants
        .revoke_api_key(pb::RevokeApiKeyRequest {
            id: issued.info.unwrap().id,
        })
        .await
        .unwrap();
    let revoked = edge
        .registry
        .authenticate(pb::AuthenticateRequest {
            key: issued.key,
            ..Default::default()
        })
        .await
        .unwrap_err();
    let unknown = edge
        .registry
        .authenticate(pb::AuthenticateRequest {
            key: format!("tpk_{}", "0".repeat(64)),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (revoked.code(), revoked.message()),
        (unknown.code(), unknown.message())
    );
    assert_eq!(revoked.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn registries_resolve_per_tenant_and_role_over_grpc() {
    let cp = ControlPlaneProcess::start(true).await;
    let mut edge = cp.as_edge().await;
    let resolve = |tenant: &str, role: &str| pb::ResolveRegistryRequest {
        tenant: tenant.into(),
        role: role.into(),
    };
    let acme = edge
        .registry
        .resolve_registry(resolve("acme", "executor"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(acme.tools.len(), 21);
    assert!(
        acme.tools
            .iter()
            .all(|t| t.provider.is_empty() || t.provider == "google" || t.provider == "hubspot")
    );
    let wiki = acme.tools.iter().find(|t| t.name == "client_wiki").unwrap();
    assert_eq!(wiki.allowed_actions, vec!["query", "synonyms"]);
    assert_eq!(
        acme.executors
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        vec!["demo", "wiki"]
    );
    let globex = edge
        .registry
        .resolve_registry(resolve("globex", "collector"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(globex.tools.len(), 34);
    let initech = edge
        .registry
        .resolve_registry(resolve("initech", "collector"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(initech.tools.len(), 13);
    let missing = edge
        .registry
        .resolve_registry(resolve("nobody", "collector"))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
}

#[tokio::test]
async fn docs_check_exits_non_zero_on_a_wrong_count() {
    let cp = ControlPlaneProcess::start(true).await;
    let ctl = binary("toolplanectl");
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.md");
    std::fs::write(&wrong, "# Invariants\n\n7. **31 MCP tools registered** (23 curated + 8 platform). Hard ceiling: 35.\n").unwrap();
    let right = dir.path().join("right.md");
    std::fs::write(&right, "Total: 34 tools\n").unwrap();
    let token_file = cp.data_dir.join("admin-token");
    let base = [
        "--addr",
        &cp.url(),
        "--token-file",
        token_file.to_str().unwrap(),
        "docs",
        "check",
    ];
    let (code, stdout, stderr) = run(&ctl, &[&base[..], &[wrong.to_str().unwrap()]].concat()).await;
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("wrong.md:3: states 31 tools"), "{stdout}");
    let (code, stdout, stderr) = run(&ctl, &[&base[..], &[right.to_str().unwrap()]].concat()).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The rendered TOOLS.md agrees with itself.
    let rendered = dir.path().join("TOOLS.md");
    let (code, _, stderr) = run(
        &ctl,
        &[
            "--addr",
            &cp.url(),
            "--token-file",
            token_file.to_str().unwrap(),
            "docs",
            "render",
            "--out",
            rendered.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&rendered).unwrap();
    assert_eq!(text.lines().filter(|l| l.starts_with("| `")).count(), 34);
    let (code, _, _) = run(&ctl, &[&base[..], &[rendered.to_str().unwrap()]].concat()).await;
    assert_eq!(code, 0);
}

#[tokio::test]
async fn ctl_json_shows_the_stored_tenant_revision() {
    let cp = ControlPlaneProcess::start(true).await;
    let token_file = cp.data_dir.join("admin-token");
    let args = [
        "--addr",
        &cp.url(),
        "--token-file",
        token_file.to_str().unwrap(),
        "--json",
    ];
    let (code, stdout, stderr) = run(
        &binary("toolplanectl"),
        &[&args[..], &["tenants", "get", "acme"]].concat(),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let revision = value[0]["revision"].as_u64().unwrap_or(0);
    assert!(revision > 0, "{stdout}");
}

/// ADR-037's trimming rule, answered: `usage --unused-days N` lists the live tools no tenant
/// called in the last N days (never-called ones included), and nothing else; with `--tenant`
/// it asks about one tenant.
#[tokio::test]
async fn usage_lists_the_tools_no_tenant_called_for_n_days() {
    let cp = ControlPlaneProcess::start(true).await;
    let day_ms = 86_400_000u64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let record = |tenant: &str, tool: &str, at_ms: u64| pb::UsageRecord {
        tenant: tenant.into(),
        role: "collector".into(),
        tool: tool.into(),
        outcome: pb::CallOutcome::Ok as i32,
        at_ms,
        ..Default::default()
    };
    let mut edge = cp.as_edge().await;
    edge.registry
        .report_usage(pb::ReportUsageRequest {
            records: vec![
                // Called yesterday by one tenant, long ago by another: used.
                record("acme", "gmail", now - day_ms),
                record("globex", "gmail", now - 200 * day_ms),
                // Called only 90 days ago: unused for 60 days, used within 100.
                record("acme", "web_fetch", now - 90 * day_ms),
                // Called last week by globex only.
                record("globex", "hubspot_crm", now - 7 * day_ms),
            ],
            ..Default::default()
        })
        .await
        .unwrap();
    // A retired tool is not live: never listed.
    let mut admin = cp.admin().await;
    admin
        .catalog
        .retire_tool(pb::RetireToolRequest {
            name: "salesforce_query".into(),
        })
        .await
        .unwrap();
    let ctl = binary("toolplanectl");
    let token_file = cp.data_dir.join("admin-token");
    let unused = |extra: &[&str]| {
        let mut args = vec![
            "--addr".to_owned(),
            cp.url(),
            "--token-file".to_owned(),
            token_file.display().to_string(),
            "--json".to_owned(),
            "usage".to_owned(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let ctl = ctl.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stdout, stderr) = run(&ctl, &args).await;
            assert_eq!(code, 0, "{stdout}{stderr}");
            let listed: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
            listed
                .iter()
                .map(|t| t["tool"].as_str().unwrap().to_owned())
                .collect::<Vec<String>>()
        }
    };
    let live = admin
        .catalog
        .list_tools(pb::ListToolsRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .tools
        .iter()
        .filter(|t| t.status != pb::ToolStatus::Retired as i32)
        .count();
    let sixty = unused(&["--unused-days", "60"]).await;
    assert!(sixty.contains(&"web_fetch".to_owned()), "{sixty:?}");
    assert!(!sixty.contains(&"gmail".to_owned()), "{sixty:?}");
    assert!(!sixty.contains(&"hubspot_crm".to_owned()), "{sixty:?}");
    assert!(!sixty.contains(&"salesforce_query".to_owned()), "{sixty:?}");
    // Every other live tool was never called.
    assert_eq!(sixty.len(), live - 2, "{sixty:?}");
    // Oldest use first: never-called tools, then web_fetch.
    assert_eq!(sixty.last().map(String::as_str), Some("web_fetch"));
    let hundred = unused(&["--unused-days", "100"]).await;
    assert!(!hundred.contains(&"web_fetch".to_owned()), "{hundred:?}");
    assert_eq!(hundred.len(), live - 3);
    // One tenant: acme never called hubspot_crm.
    let acme = unused(&["--unused-days", "60", "--tenant", "acme"]).await;
    assert!(acme.contains(&"hubspot_crm".to_owned()), "{acme:?}");
    assert!(!acme.contains(&"gmail".to_owned()), "{acme:?}");
    // Bad input: a clear usage error (exit 2), nothing listed.
    for bad in ["0", "-3", "lots", "4000"] {
        let (code, stdout, stderr) = run(
            &ctl,
            &[
                "--addr",
                &cp.url(),
                "--token-file",
                token_file.to_str().unwrap(),
                "usage",
                // `=` so clap reads "-3" as the value, not as a flag.
                &format!("--unused-days={bad}"),
            ],
        )
        .await;
        assert_eq!(code, 2, "{bad}: {stdout}{stderr}");
        assert!(stderr.contains("--unused-days"), "{bad}: {stderr}");
        assert!(stdout.is_empty(), "{bad}: {stdout}");
    }
}

/// Issue 30's first items as an operator meets them: nothing widens by omission. A partial
/// `UpdateTenant` through grpcurl keeps the rest of the tenant (and "every tool" must be said);
/// `tenants create` without a choice of providers is refused; `executors upsert --endpoint`
/// keeps the timeout and concurrency it was not given.
#[tokio::test]
async fn nothing_widens_by_omission() {
    let cp = ControlPlaneProcess::start(true).await;
    let token_file = cp.data_dir.join("admin-token");
    let auth = format!("authorization: Bearer {}", cp.admin_token());
    let grpcurl = grpcurl();
    let mut admin = cp.admin().await;
    let acme = |admin: &mut tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .tenants
                .get_tenant(pb::GetTenantRequest { id: "acme".into() })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let before = acme(&mut admin).await;
    let tools = |admin: &mut tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .tenants
                .preview_registry(pb::PreviewRegistryRequest {
                    tenant: "acme".into(),
                    role: "collector".into(),
                })
                .await
                .unwrap()
                .into_inner()
                .tools
                .len()
        }
    };
    let visible = tools(&mut admin).await;
    // The request of the issue, as it was written: only the rate limit changes.
    let (code, _, stderr) = run(
        &grpcurl,
        &[
            "-plaintext",
            "-H",
            &auth,
            "-d",
            r#"{"tenant":{"id":"acme","rate_limit_per_minute":60}}"#,
            &cp.addr,
            "toolplane.v1.Tenants/UpdateTenant",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let after = acme(&mut admin).await;
    assert_eq!(after.rate_limit_per_minute, 60);
    assert_eq!(after.connected_apis, before.connected_apis);
    assert_eq!(after.display_name, before.display_name);
    assert_eq!(
        tools(&mut admin).await,
        visible,
        "acme's tools did not widen"
    );
    // With a mask: a field named and absent goes back to its default; connected_apis named
    // and absent is refused (every tool is said, never implied).
    let (code, _, stderr) = run(
        &grpcurl,
        &[
            "-plaintext",
            "-H",
            &auth,
            "-d",
            r#"{"tenant":{"id":"acme"},"update_mask":{"paths":["connected_apis"]}}"#,
            &cp.addr,
            "toolplane.v1.Tenants/UpdateTenant",
        ],
    )
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("InvalidArgument"), "{stderr}");
    assert_eq!(tools(&mut admin).await, visible);
    let (code, _, stderr) = run(
        &grpcurl,
        &[
            "-plaintext",
            "-H",
            &auth,
            "-d",
            r#"{"tenant":{"id":"acme"},"update_mask":{"paths":["rate_limit_per_minute"]}}"#,
            &cp.addr,
            "toolplane.v1.Tenants/UpdateTenant",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(acme(&mut admin).await.rate_limit_per_minute, 0);

    // The CLI: a new tenant names its providers, or says every tool.
    let ctl = binary("toolplanectl");
    let base = [
        "--addr",
        &cp.url(),
        "--token-file",
        token_file.to_str().unwrap(),
    ];
    let (code, _, stderr) = run(&ctl, &[&base[..], &["tenants", "create", "hooli"]].concat()).await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains("--connected-apis") && stderr.contains("--all-apis"),
        "{stderr}"
    );
    let listed = admin
        .tenants
        .list_tenants(pb::ListTenantsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tenants;
    assert!(
        listed.iter().all(|t| t.id != "hooli"),
        "nothing was created"
    );
    let (code, _, stderr) = run(
        &ctl,
        &[
            &base[..],
            &["tenants", "create", "hooli", "--connected-apis", ""],
        ]
        .concat(),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let hooli = admin
        .tenants
        .preview_registry(pb::PreviewRegistryRequest {
            tenant: "hooli".into(),
            role: "collector".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .tools;
    assert!(
        hooli.iter().all(|t| t.provider.is_empty()),
        "platform tools only"
    );

    // Executors: an upsert changes what it names.
    let (code, _, stderr) = run(
        &ctl,
        &[
            &base[..],
            &[
                "executors",
                "upsert",
                "demo",
                "--timeout-ms",
                "10000",
                "--max-concurrency",
                "16",
            ],
        ]
        .concat(),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(
        &ctl,
        &[
            &base[..],
            &[
                "executors",
                "upsert",
                "demo",
                "--endpoint",
                "http://127.0.0.1:50099",
            ],
        ]
        .concat(),
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let demo = admin
        .executors
        .get_executor(pb::GetExecutorRequest {
            name: "demo".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(demo.endpoint, "http://127.0.0.1:50099");
    assert_eq!((demo.timeout_ms, demo.max_concurrency), (10_000, 16));
    println!(
        "a partial UpdateTenant kept acme's {visible} tools and its name; tenants create without providers refused; executors upsert --endpoint kept timeout 10 s and concurrency 16"
    );
}

/// What `tools register` says about a bad definition: the misspelling behind a missing field,
/// every problem of a schema at once, and each problem once.
#[tokio::test]
async fn registration_errors_name_the_misspelling_and_every_problem_once() {
    let cp = ControlPlaneProcess::start(true).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = cp.data_dir.join("admin-token");
    let ctl = binary("toolplanectl");
    let register = |definition: serde_json::Value| {
        let file = dir.path().join("tool.json");
        std::fs::write(&file, definition.to_string()).unwrap();
        let ctl = ctl.clone();
        let (addr, token_file) = (cp.url(), token_file.clone());
        async move {
            run(
                &ctl,
                &[
                    "--addr",
                    &addr,
                    "--token-file",
                    token_file.to_str().unwrap(),
                    "tools",
                    "register",
                    file.to_str().unwrap(),
                ],
            )
            .await
        }
    };
    let (code, _, stderr) = register(serde_json::json!({
        "name": "crm_note", "description": "d", "category": "crm",
        "input_schema": {"type": "object"}, "executer": "demo",
        "admission": {"owner": "x", "scope": "y"}}))
    .await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains("missing field `executor`")
            && stderr.contains("`executer` is not a field: did you mean `executor`?"),
        "{stderr}"
    );
    let (code, _, stderr) = register(serde_json::json!({
        "name": "crm_note", "description": "d", "category": "crm", "executor": "demo",
        "input_schema": {"type": "object", "properties": {
            "a": {"type": "strng"}, "b": {"minLength": -1}, "c": {"maxLenght": 3}}},
        "admission": {"owner": "x", "scope": "y"}}))
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("3 problems"), "{stderr}");
    for needle in [
        "/properties/a/type",
        "/properties/b/minLength",
        "unknown keyword \"maxLenght\"",
    ] {
        assert_eq!(stderr.matches(needle).count(), 1, "{needle} once: {stderr}");
    }
}
