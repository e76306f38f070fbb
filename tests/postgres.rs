//! Two control-plane replicas on one PostgreSQL database: edges watching different replicas
//! converge on every change whichever replica took the write; the ceiling holds across
//! replicas; killing a replica moves its edges to the other.

use std::time::{Duration, Instant};

use serde_json::json;
use tp_proto::json::to_struct;
use tp_proto::pb;
use tp_test_support::{ControlPlaneProcess, EdgeProcess, McpHttp, PgDatabase, eventually};

async fn replica(db: &PgDatabase, dir: &std::path::Path, demo: bool) -> ControlPlaneProcess {
    // Both replicas share the tokens (edges and operators use either).
    std::fs::write(
        dir.join("admin-token"),
        "tpt_shared_admin_token_for_both_replicas",
    )
    .unwrap();
    std::fs::write(
        dir.join("edge-token"),
        "tpt_shared_edge_token_for_both_replicas",
    )
    .unwrap();
    let args = if demo {
        vec!["--demo".to_owned()]
    } else {
        Vec::new()
    };
    ControlPlaneProcess::start_with_env(dir, args, vec![("TOOLPLANE_CP_STORE_URL", db.url.clone())])
        .await
}

async fn set_apis(cp: &ControlPlaneProcess, apis: &[&str]) {
    let mut admin = cp.admin().await;
    let mut tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    tenant.connected_apis = Some(pb::ConnectedApis {
        providers: apis.iter().map(|s| (*s).to_owned()).collect(),
        ..Default::default()
    });
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(tenant))
        .await
        .unwrap();
}

async fn registry(cp: &ControlPlaneProcess) -> Vec<String> {
    cp.admin()
        .await
        .tenants
        .preview_registry(pb::PreviewRegistryRequest {
            tenant: "acme".into(),
            role: "collector".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect()
}

#[tokio::test]
async fn two_replicas_on_postgres_serve_one_truth() {
    let db = PgDatabase::create();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = replica(&db, dirs[0].path(), true).await;
    let mut b = replica(&db, dirs[1].path(), false).await;
    assert_eq!(
        registry(&a).await,
        registry(&b).await,
        "B loaded what A seeded"
    );
    // acme stays in full disclosure however many tools it gets, so listings are registries.
    let mut admin = a.admin().await;
    let mut tenant = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    tenant.disclosure = Some(pb::Disclosure {
        mode: pb::DisclosureMode::Full as i32,
        ..Default::default()
    });
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest::replacing(tenant))
        .await
        .unwrap();
    let key = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .key;
    // Edge 0 watches A first, edge 1 watches B first; each fails over to the other.
    let edges = [
        EdgeProcess::start(&a, &[a.url(), b.url()], None, "").await,
        EdgeProcess::start(&b, &[b.url(), a.url()], None, "").await,
    ];
    let clients: Vec<McpHttp> = edges
        .iter()
        .map(|e| McpHttp::new(&e.addr, Some(&key), "2025-11-25"))
        .collect();

    // Writes alternate between replicas; both edges converge on every one.
    let mut slowest = Duration::ZERO;
    let sets: [&[&str]; 6] = [
        &["google", "hubspot", "aws"],
        &["google"],
        &["google", "microsoft", "salesforce"],
        &["hubspot"],
        &["google", "hubspot", "aws", "microsoft"],
        &["google", "hubspot"],
    ];
    for (i, apis) in sets.iter().enumerate() {
        let writer = if i % 2 == 0 { &a } else { &b };
        let started = Instant::now();
        set_apis(writer, apis).await;
        let expected = registry(writer).await;
        let other = if i % 2 == 0 { &b } else { &a };
        eventually(
            "the other replica to catch up",
            Duration::from_secs(3),
            || async { (registry(other).await == expected).then_some(()) },
        )
        .await;
        for client in &clients {
            eventually("both edges to converge", Duration::from_secs(3), || async {
                (client.list_names().await == expected).then_some(())
            })
            .await;
        }
        slowest = slowest.max(started.elapsed());
    }
    println!("6 writes alternating between replicas: both edges converged, slowest {slowest:?}");

    // Every revision reached both replicas' Watch streams, in order, with no gaps.
    for replica in [&a, &b] {
        let mut edge = replica.as_edge().await;
        let mut stream = edge
            .registry
            .watch(pb::WatchRequest {
                since_revision: 0,
                heartbeat_ms: 100,
            })
            .await
            .unwrap()
            .into_inner();
        let mut revisions = Vec::new();
        while let Ok(Some(Ok(event))) =
            tokio::time::timeout(Duration::from_millis(500), stream.message())
                .await
                .map(|m| m.transpose())
        {
            if let Some(pb::watch_event::Event::Change(change)) = event.event {
                revisions.push(change.revision);
            } else {
                break;
            }
        }
        assert!(!revisions.is_empty());
        assert_eq!(revisions, (1..=revisions.len() as u64).collect::<Vec<_>>());
    }

    // The ceiling holds across replicas: 34 tools under 35, ten registrations race through
    // both replicas, exactly one is admitted.
    let attempts = (0..10).map(|i| {
        let replica = if i % 2 == 0 { &a } else { &b };
        async move {
            let mut admin = replica.admin().await;
            admin
                .catalog
                .register_tool(pb::RegisterToolRequest {
                    tool: Some(pb::ToolSpec {
                        name: format!("race_{i}"),
                        description: "Race".into(),
                        category: "platform".into(),
                        input_schema: to_struct(&json!({"type": "object"})),
                        executor: "demo".into(),
                        admission: Some(pb::Admission {
                            owner: "sre".into(),
                            scope: "ceiling race".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                })
                .await
        }
    });
    let outcomes = futures::future::join_all(attempts).await;
    let admitted = outcomes.iter().filter(|o| o.is_ok()).count();
    for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert_eq!(
            refused.code(),
            tonic::Code::FailedPrecondition,
            "{refused:?}"
        );
    }
    assert_eq!(admitted, 1, "ceiling 35 with 34 tools: one slot");
    println!("ceiling race across 2 replicas: 10 attempts, {admitted} admitted");

    // Kill B: edge 1 (watching B) moves to A and still follows changes.
    b.process.kill9().await;
    set_apis(&a, &["google", "aws"]).await;
    let expected = registry(&a).await;
    let killed = Instant::now();
    for client in &clients {
        eventually(
            "edges to follow A after B died",
            Duration::from_secs(10),
            || async { (client.list_names().await == expected).then_some(()) },
        )
        .await;
    }
    println!(
        "after killing replica B, both edges followed A within {:?}",
        killed.elapsed()
    );
}

fn ctl(args: &[&str]) -> std::process::Output {
    std::process::Command::new(tp_test_support::binary("toolplanectl"))
        .args(args)
        .output()
        .expect("toolplanectl")
}

#[tokio::test]
async fn export_and_import_move_a_sqlite_world_to_postgres_intact() {
    // A world on SQLite, with a key and a changed tenant.
    let mut source = ControlPlaneProcess::start(true).await;
    let mut admin = source.admin().await;
    let key = admin
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .key;
    set_apis(&source, &["google", "aws"]).await;
    let tools_before = registry(&source).await;
    let policy_before = admin
        .policy
        .get_policy(pb::GetPolicyRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(source.process.terminate().await.is_some());

    let work = tempfile::tempdir().unwrap();
    let doc = work.path().join("world.json");
    let sqlite = format!(
        "sqlite://{}",
        source.data_dir.join("control-plane.db").display()
    );
    let out = ctl(&[
        "export",
        "--store-url",
        &sqlite,
        "--out",
        doc.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&doc).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let db = PgDatabase::create();
    let out = ctl(&["import", doc.to_str().unwrap(), "--store-url", &db.url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A second import into the now non-empty store is refused and changes nothing.
    let again = ctl(&["import", doc.to_str().unwrap(), "--store-url", &db.url]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    // So is a document that is not an export.
    let junk = work.path().join("junk.json");
    std::fs::write(&junk, "{\"format\": \"something-else\", \"objects\": []}").unwrap();
    let fresh = PgDatabase::create();
    let refused = ctl(&["import", junk.to_str().unwrap(), "--store-url", &fresh.url]);
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // A control plane on PostgreSQL serves the same world; the old key still works.
    let dir = tempfile::tempdir().unwrap();
    let target = replica(&db, dir.path(), false).await;
    assert_eq!(registry(&target).await, tools_before);
    let mut admin = target.admin().await;
    let policy = admin
        .policy
        .get_policy(pb::GetPolicyRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(policy.ceiling, policy_before.ceiling);
    assert_eq!(policy.count, policy_before.count);
    assert_eq!(policy.history, policy_before.history);
    let identity = target
        .as_edge()
        .await
        .registry
        .authenticate(pb::AuthenticateRequest {
            key,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (identity.tenant.as_str(), identity.role.as_str()),
        ("acme", "collector")
    );
    println!(
        "migrated SQLite → PostgreSQL: {} tools for acme, ceiling {}, keys intact",
        tools_before.len(),
        policy.ceiling
    );
}

/// Lifecycle: a sunset date already past is refused (and changes nothing); a tool whose sunset
/// passed is retired by the control plane itself — once, though two replicas on one database
/// both look at start — announced to the edges (it leaves their listing) and recorded under
/// the author `system:sunset`.
#[tokio::test]
async fn a_past_sunset_is_refused_and_a_passed_one_retires_the_tool_once_across_replicas() {
    let mut source = ControlPlaneProcess::start(true).await;
    let mut admin = source.admin().await;
    let tool = registry(&source).await[0].clone();
    let day = |offset: i64| {
        let days = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 86_400) as i64
            + offset;
        let (y, m, d) = tp_telemetry::civil_from_days(days);
        format!("{y:04}-{m:02}-{d:02}")
    };
    let refused = admin
        .catalog
        .deprecate_tool(pb::DeprecateToolRequest {
            name: tool.clone(),
            sunset_date: day(-1),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().contains("in the past") && refused.message().contains("retire"),
        "{}",
        refused.message()
    );
    let status = |admin: &mut tp_client::Admin, name: String| {
        let mut admin = admin.clone();
        async move {
            admin
                .catalog
                .get_tool(pb::GetToolRequest { name })
                .await
                .unwrap()
                .into_inner()
        }
    };
    assert_eq!(
        status(&mut admin, tool.clone()).await.status,
        pb::ToolStatus::Active as i32,
        "a refused deprecation changes nothing"
    );
    // Today is the last day it may be given ("removed after").
    admin
        .catalog
        .deprecate_tool(pb::DeprecateToolRequest {
            name: tool.clone(),
            sunset_date: day(0),
        })
        .await
        .unwrap();
    assert!(source.process.terminate().await.is_some());

    // The same world, its sunset since passed, on PostgreSQL under two replicas.
    let work = tempfile::tempdir().unwrap();
    let doc = work.path().join("world.json");
    let sqlite = format!(
        "sqlite://{}",
        source.data_dir.join("control-plane.db").display()
    );
    let out = ctl(&[
        "export",
        "--store-url",
        &sqlite,
        "--out",
        doc.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut world: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&doc).unwrap()).unwrap();
    let mut edited = 0;
    for object in world["objects"].as_array_mut().unwrap() {
        if object["kind"] == "tool" && object["object"]["name"] == tool.as_str() {
            assert_eq!(object["object"]["status"]["sunset"], day(0).as_str());
            object["object"]["status"]["sunset"] = json!(day(-3));
            edited += 1;
        }
    }
    assert_eq!(edited, 1);
    std::fs::write(&doc, serde_json::to_string(&world).unwrap()).unwrap();
    let db = PgDatabase::create();
    let out = ctl(&["import", doc.to_str().unwrap(), "--store-url", &db.url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = tokio::join!(
        replica(&db, dir_a.path(), false),
        replica(&db, dir_b.path(), false)
    );
    let mut admin = a.admin().await;
    eventually("the tool retired", Duration::from_secs(15), || {
        let mut admin = admin.clone();
        let tool = tool.clone();
        async move {
            let info = status(&mut admin, tool).await;
            (info.status == pb::ToolStatus::Retired as i32).then_some(())
        }
    })
    .await;
    // Both replicas agree, and the edge watching B no longer lists it.
    let edge = EdgeProcess::start(&b, &[b.url()], None, "").await;
    let key = b
        .admin()
        .await
        .tenants
        .issue_api_key(pb::IssueApiKeyRequest {
            tenant: "acme".into(),
            role: "collector".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .key;
    let listed = McpHttp::new(&edge.addr, Some(&key), "2025-11-25")
        .list_names()
        .await;
    assert!(!listed.contains(&tool), "{tool} still listed: {listed:?}");
    assert!(!registry(&b).await.contains(&tool));
    // One change retired it, by the control plane.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let changes = admin
        .admins
        .list_changes(pb::ListChangesRequest {
            since_revision: 0,
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .changes;
    let retirements: Vec<&pb::Change> = changes
        .iter()
        .filter(|c| c.items.iter().any(|i| i.key == tool && i.verb == "retire"))
        .collect();
    assert_eq!(retirements.len(), 1, "{changes:#?}");
    assert_eq!(retirements[0].author, "system:sunset");
    println!(
        "{tool}: deprecation with a past date refused; after its sunset passed, retired once (revision {}) by system:sunset with two replicas looking",
        retirements[0].revision
    );
    drop(edge);
}
