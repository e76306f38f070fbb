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
    // History: calls through an edge (the demo's executors are not running: they fail, and
    // are audited and counted all the same), one of a tool that does not exist.
    let edge = EdgeProcess::start(&source, &[source.url()], None, "").await;
    let client = McpHttp::new(&edge.addr, Some(&key), "2025-11-25");
    for name in [
        tools_before[0].as_str(),
        tools_before[1].as_str(),
        "no_such_tool",
    ] {
        client.call(name, json!({})).await;
    }
    let trail = |admin: &tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .audit
                .list_audit_records(pb::ListAuditRecordsRequest {
                    page_size: 1000,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .records
                .into_iter()
                .map(|r| (r.request_id, r.tool, r.outcome))
                .collect::<Vec<_>>()
        }
    };
    let usage = |admin: &tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .audit
                .get_usage(pb::GetUsageRequest {
                    tenant: "acme".into(),
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let trail_before = eventually("three audit records", Duration::from_secs(10), || async {
        let trail = trail(&admin).await;
        (trail.len() == 3).then_some(trail)
    })
    .await;
    let usage_before = usage(&admin).await;
    drop(edge);
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
    // The history came along: the same trail, and the same usage (so `usage --unused-days`
    // does not call every tool unused after the move).
    assert_eq!(trail(&admin).await, trail_before);
    assert_eq!(usage(&admin).await, usage_before);
    assert!(!usage_before.tools.is_empty(), "{usage_before:?}");
    println!(
        "migrated SQLite → PostgreSQL: {} tools for acme, ceiling {}, keys intact, {} audit records and {} usage counters carried",
        tools_before.len(),
        policy.ceiling,
        trail_before.len(),
        usage_before.tools.len()
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
        let date = time::OffsetDateTime::now_utc().date() + time::Duration::days(offset);
        format!(
            "{:04}-{:02}-{:02}",
            date.year(),
            u8::from(date.month()),
            date.day()
        )
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

/// A PostgreSQL server of the test's own (Debian's binaries, run as the `postgres` user) that
/// serves TLS with a certificate signed by the test's CA.
struct TlsPostgres {
    port: u16,
    _server: tokio::process::Child,
    _dir: tempfile::TempDir,
}

fn postgres_user() -> (u32, u32) {
    let id = |flag: &str| {
        let out = std::process::Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("id");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .expect("a postgres user (Debian's postgresql package makes it)")
    };
    (id("-u"), id("-g"))
}

fn postgres_bin(name: &str) -> std::path::PathBuf {
    std::fs::read_dir("/usr/lib/postgresql")
        .expect(
            "PostgreSQL's server binaries under /usr/lib/postgresql (Debian's postgresql package)",
        )
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin").join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no {name} under /usr/lib/postgresql/*/bin"))
}

impl TlsPostgres {
    async fn start(cert: &std::path::Path, key: &std::path::Path) -> TlsPostgres {
        use std::os::unix::fs::PermissionsExt as _;
        use std::os::unix::process::CommandExt as _;
        let (uid, gid) = postgres_user();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        let status = std::process::Command::new(postgres_bin("initdb"))
            .args([
                "-D",
                data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ])
            .uid(uid)
            .gid(gid)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "initdb failed");
        for (from, to) in [(cert, "server.pem"), (key, "server.key")] {
            let target = data.join(to);
            std::fs::copy(from, &target).unwrap();
            std::os::unix::fs::chown(&target, Some(uid), Some(gid)).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let port = tp_test_support::free_port();
        let server = tokio::process::Command::new(postgres_bin("postgres"))
            .args([
                "-D",
                data.to_str().unwrap(),
                "-p",
                &port.to_string(),
                "-k",
                dir.path().to_str().unwrap(),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "ssl=on",
                "-c",
                "ssl_cert_file=server.pem",
                "-c",
                "ssl_key_file=server.key",
                "-c",
                "fsync=off",
            ])
            .uid(uid)
            .gid(gid)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        tp_test_support::wait_for_port(port, "the TLS PostgreSQL").await;
        TlsPostgres {
            port,
            _server: server,
            _dir: dir,
        }
    }

    fn url(&self, ca: &std::path::Path) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?sslmode=verify-full&sslrootcert={}",
            self.port,
            ca.display()
        )
    }
}

/// The store over TLS: a control plane reaches PostgreSQL with `sslmode=verify-full` and the
/// CA that signed the server's certificate, keeps its world there across a restart; given a
/// CA that did not sign it, it refuses to start and says why.
#[tokio::test]
async fn the_store_on_postgresql_over_tls_with_verify_full() {
    let pki = crate::tls::Pki::new();
    let (cert, key) = pki.leaf("postgres", true);
    let pg = TlsPostgres::start(&cert, &key).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cp = ControlPlaneProcess::start_with_env(
        dir.path(),
        vec!["--demo".to_owned()],
        vec![("TOOLPLANE_CP_STORE_URL", pg.url(&pki.ca()))],
    )
    .await;
    let tools = registry(&cp).await;
    assert!(!tools.is_empty());
    cp.kill9_and_restart().await;
    assert_eq!(
        registry(&cp).await,
        tools,
        "the world is kept in the TLS store"
    );
    // Another CA: verify-full refuses the server's certificate; the control plane says so.
    let stranger = crate::tls::Pki::new();
    let other = tempfile::tempdir().unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(tp_test_support::binary("tp-control-plane"))
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(other.path())
            .env("TOOLPLANE_CP_STORE_URL", pg.url(&stranger.ca()))
            .output(),
    )
    .await
    .expect("the control plane gives up")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.to_lowercase().contains("certificate") || stderr.to_lowercase().contains("tls"),
        "the error should name the certificate: {stderr}"
    );
    println!(
        "PostgreSQL over TLS (verify-full): the store works and survives kill -9; a wrong CA is refused: {}",
        stderr.lines().last().unwrap_or_default()
    );
}

/// Purges outlive the replica that queued them: tenant data purges wait in the store, so when
/// the replica that deleted the tenant dies before the executor answers, another replica
/// finishes the purge.
#[tokio::test]
async fn a_purge_queued_by_a_replica_that_dies_is_finished_by_another() {
    use tp_store::Store as _;
    let db = PgDatabase::create();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = replica(&db, dir_a.path(), true).await;
    let b = replica(&db, dir_b.path(), false).await;
    let mut wiki = tp_test_support::WikiProcess::start().await;
    let mut admin = a.admin().await;
    tp_test_support::admin::upsert_executor(
        &mut admin,
        tp_test_support::admin::NewExecutor::grpc("wiki", wiki.url()),
    )
    .await;
    admin
        .tenants
        .create_tenant(pb::CreateTenantRequest {
            tenant: Some(pb::Tenant {
                id: "doomed".into(),
                connected_apis: Some(pb::ConnectedApis {
                    providers: vec!["google".into()],
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    // The executor is away when the tenant is deleted: the purge waits, in the store.
    wiki.process.kill9().await;
    admin
        .tenants
        .delete_tenant(pb::DeleteTenantRequest {
            id: "doomed".into(),
        })
        .await
        .unwrap();
    let store = tp_store::PostgresStore::connect(&db.url).await.unwrap();
    let queued = eventually("the purge queued", Duration::from_secs(10), || async {
        let pending = store.pending_purges().await.unwrap();
        (pending
            .iter()
            .any(|p| p.tenant == "doomed" && p.executor == "wiki"))
        .then_some(pending)
    })
    .await;
    // The replica that queued it dies; the executor comes back; the other replica purges.
    a.process.kill9().await;
    wiki.kill9_and_restart().await;
    let started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pending = store.pending_purges().await.unwrap();
        // (The demo world's other executor is not running here: its purge stays queued.)
        if !pending
            .iter()
            .any(|p| p.tenant == "doomed" && p.executor == "wiki")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other replica did not purge: {pending:?}\n{}",
            b.process.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        b.process.log_text().contains("tenant data purged"),
        "{}",
        b.process.log_text()
    );
    println!(
        "purge of {} queued by a replica that was then killed: finished by the other replica {:?} after the executor returned",
        queued[0].tenant,
        started.elapsed()
    );
}
