//! The trust boundary of the wiki service (threat model in docs/reliability.md): the URL
//! fetcher's reach, tenant deletion, hostile HTML, crashed writers, and one tenant's work
//! against the others'.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_proto::pb;
use tp_test_support::{McpHttp, WikiProcess, eventually};

use crate::fleet::{Fleet, LEGACY};

/// Files (not folders) under `path`, recursively.
fn files_under(path: &std::path::Path) -> usize {
    std::fs::read_dir(path).map_or(0, |entries| {
        entries
            .flatten()
            .map(|entry| {
                let path = entry.path();
                if path.is_dir() { files_under(&path) } else { 1 }
            })
            .sum()
    })
}

fn structured(reply: &tp_test_support::HttpReply) -> &Value {
    &reply.result()["structuredContent"]
}

/// A signed `Invoke` of `client_wiki` for `tenant` with `arguments`.
pub(crate) async fn invoke_wiki(
    addr: &str,
    tenant: &str,
    arguments: Value,
) -> Result<Value, tonic::Status> {
    let (key, _) = tp_test_support::executor_key();
    let key = tp_proto::invoke_auth::ExecutorKey::parse(key).unwrap();
    let mut client = pb::executor_client::ExecutorClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(pb::InvokeRequest {
        tool: "client_wiki".into(),
        action: arguments["action"].as_str().unwrap_or_default().to_owned(),
        arguments: tp_proto::json::to_struct(&arguments),
        tenant: tenant.into(),
        role: "collector".into(),
        request_id: "trust".into(),
        deadline_ms: 4_102_444_800_000,
        ..Default::default()
    });
    key.sign_request("Invoke", &mut request);
    let mut stream = client.invoke(request).await?.into_inner();
    while let Some(event) = stream.message().await? {
        if let Some(pb::invoke_event::Event::Result(result)) = event.event {
            return Ok(result
                .structured
                .as_ref()
                .map(tp_proto::json::from_struct)
                .unwrap_or(Value::Null));
        }
    }
    Err(tonic::Status::internal("no result"))
}

/// T7. The URL fetcher reaches public addresses only: every special-purpose block of IANA's
/// registries (benchmarking, NAT64, 6to4, IPv4-compatible, site-local, Teredo, discard-only,
/// …) and names that resolve into them are refused before any connection.
#[tokio::test]
async fn t7_the_wiki_fetches_no_special_purpose_address() {
    let wiki = WikiProcess::start_strict().await;
    let mut refused = 0;
    for url in [
        "https://198.18.0.1/",
        "https://[64:ff9b::7f00:1]/",
        "https://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
        "https://[2002:7f00:1::1]/",
        "https://[::127.0.0.1]/",
        "https://[::ffff:169.254.169.254]/",
        "https://[fec0::1]/",
        "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
        "https://[100::1]/",
        "https://127.0.0.1/",
        "https://100.100.100.200/",
        "https://192.0.0.170/",
        "https://localhost/",
        // A name of this machine's /etc/hosts that resolves to loopback.
        "https://vm/",
    ] {
        let status = invoke_wiki(
            &wiki.addr,
            "acme",
            json!({"action": "ingest", "source": {"type": "url", "url": url}}),
        )
        .await
        .unwrap_err();
        assert_eq!(
            status.code(),
            tonic::Code::FailedPrecondition,
            "{url}: {status:?}"
        );
        let message = status.message();
        assert!(
            message.contains("not a public address") || message.contains("non-public"),
            "{url}: {message}"
        );
        refused += 1;
    }
    println!(
        "T7 held: {refused} URLs into special-purpose address blocks (and names resolving to loopback) refused before connecting"
    );
}

/// T10. Deleting a tenant deletes its wiki (the control plane purges every executor), and a
/// tenant created again under the same id never reads its predecessor's pages — even when the
/// wiki was down while the tenant was deleted and re-created.
#[tokio::test]
async fn t10_a_deleted_tenants_wiki_is_gone_for_its_successor() {
    let mut fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    let create = |admin: &mut tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .tenants
                .create_tenant(pb::CreateTenantRequest {
                    tenant: Some(pb::Tenant {
                        id: "temp".into(),
                        connected_apis: Some(pb::ConnectedApis::default()),
                        disclosure: Some(pb::Disclosure {
                            mode: pb::DisclosureMode::Full as i32,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let issue = |admin: &mut tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .tenants
                .issue_api_key(pb::IssueApiKeyRequest {
                    tenant: "temp".into(),
                    role: "collector".into(),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .key
        }
    };
    let delete = |admin: &mut tp_client::Admin| {
        let mut admin = admin.clone();
        async move {
            admin
                .tenants
                .delete_tenant(pb::DeleteTenantRequest { id: "temp".into() })
                .await
                .unwrap();
        }
    };
    let ingest = |client: McpHttp, text: &'static str, label: &'static str| async move {
        let reply = client
            .call(
                "client_wiki",
                json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": label}}),
            )
            .await;
        assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    };
    let asks = |client: McpHttp| async move {
        let reply = client
            .call(
                "client_wiki",
                json!({"action": "query", "question": "What is the launch code of Project Falcon?", "persist_output": false}),
            )
            .await;
        reply.body
    };
    let first = create(&mut admin).await;
    let key = issue(&mut admin).await;
    let client = McpHttp::new(&fleet.edges[0].addr, Some(&key), LEGACY);
    eventually(
        "the new tenant on the edge",
        Duration::from_secs(5),
        || async { (client.list_names().await.iter().any(|n| n == "client_wiki")).then_some(()) },
    )
    .await;
    ingest(
        client.clone(),
        "The launch code of Project Falcon is 7431-ALPHA. Project Falcon ships in March.",
        "Falcon secrets",
    )
    .await;
    assert!(asks(client.clone()).await.contains("7431-ALPHA"));
    let pages = fleet.wiki.tenant_dir("temp").join("wiki");
    assert!(files_under(&pages) > 0);
    // 1. Deleted while the wiki is up: the purge reaches it.
    delete(&mut admin).await;
    eventually(
        "the purge to delete the tenant's pages",
        Duration::from_secs(10),
        || async { (files_under(&pages) == 0).then_some(()) },
    )
    .await;
    let second = create(&mut admin).await;
    assert_ne!(first.uid, second.uid, "a new incarnation");
    let key = issue(&mut admin).await;
    let client = McpHttp::new(&fleet.edges[0].addr, Some(&key), LEGACY);
    eventually(
        "the re-created tenant on the edge",
        Duration::from_secs(5),
        || async { (client.list_names().await.iter().any(|n| n == "client_wiki")).then_some(()) },
    )
    .await;
    assert!(!asks(client.clone()).await.contains("7431-ALPHA"));
    ingest(
        client.clone(),
        "The launch code of Project Falcon is 9902-BRAVO.",
        "Falcon again",
    )
    .await;
    // 2. Deleted and re-created while the wiki is down: its successor still sees nothing of it,
    // and the late purge of the old incarnation spares the new one's pages.
    fleet.wiki.process.kill9().await;
    delete(&mut admin).await;
    let third = create(&mut admin).await;
    let key = issue(&mut admin).await;
    fleet.wiki.kill9_and_restart().await;
    let client = McpHttp::new(&fleet.edges[0].addr, Some(&key), LEGACY);
    eventually(
        "the third incarnation on the edge",
        Duration::from_secs(5),
        || async { (client.list_names().await.iter().any(|n| n == "client_wiki")).then_some(()) },
    )
    .await;
    let body = asks(client.clone()).await;
    assert!(
        !body.contains("9902-BRAVO") && !body.contains("7431-ALPHA"),
        "{body}"
    );
    ingest(client.clone(), "Project Heron starts in May.", "Heron").await;
    eventually(
        "the late purge to be delivered",
        Duration::from_secs(20),
        || async {
            // The queue is in the store (shared by every replica).
            use tp_store::Store as _;
            let store = tp_store::SqliteStore::open(&fleet.cp.data_dir.join("control-plane.db"))
                .await
                .unwrap();
            let pending = store.pending_purges().await.unwrap();
            (!pending.iter().any(|p| p.tenant == "temp")).then_some(())
        },
    )
    .await;
    let reply = client
        .call(
            "client_wiki",
            json!({"action": "query", "question": "When does Project Heron start?", "persist_output": false}),
        )
        .await;
    assert!(
        reply.body.contains("May"),
        "the new incarnation's pages survive: {}",
        reply.body
    );
    println!(
        "T10 held: three incarnations of tenant temp ({}, {}, {}); the first's pages purged when it was deleted, the second's unreadable by the third though the wiki was down during the deletion, the late purge sparing the third's pages",
        first.uid, second.uid, third.uid
    );
}

/// Serves `body` as text/html to every request on a local port; returns the URL.
async fn serve_html(body: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/page.html")
}

/// T11. Hostile HTML cannot crash the wiki, and a writer that dies mid-write blocks nobody: its
/// lease is taken over at once and its journal replayed, so no half-written ingest is seen.
#[tokio::test]
async fn t11_unicode_html_and_a_dead_writer_neither_crash_nor_block_the_wiki() {
    let mut fleet = Fleet::start(0, "").await;
    let url = serve_html(
        "<html><head><title>İstanbul İİİ</title></head><body><p>İzmir and \u{212A}elvin met in İstanbul.</p><SCRIPT>İ</SCRIPT><p>\u{130}\u{212A}ß ﬁ</p></body></html>",
    )
    .await;
    let done = invoke_wiki(
        &fleet.wiki.addr,
        "acme",
        json!({"action": "ingest", "source": {"type": "url", "url": url}}),
    )
    .await
    .unwrap();
    assert!(done["source"].as_str().is_some(), "{done}");
    // A writer of this host that died holding acme's lease, with a journal half applied.
    let tenant = fleet.wiki.tenant_dir("acme");
    std::fs::write(
        tenant.join(".lock"),
        format!(
            "gone {} {} 4194999",
            u64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis()
            )
            .unwrap()
                + 600_000,
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap()
                .trim()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(tenant.join(".journal")).unwrap();
    std::fs::write(
        tenant.join(".journal/1-dead.json"),
        json!({"writes": {"wiki/acme/wiki/entities/replayed.md": "---\ntitle: Replayed\nkind: entity\n---\n# Replayed\n"}}).to_string(),
    )
    .unwrap();
    fleet.wiki.kill9_and_restart().await;
    assert!(
        tenant.join("wiki/entities/replayed.md").exists(),
        "the journal was replayed at start"
    );
    let started = Instant::now();
    invoke_wiki(
        &fleet.wiki.addr,
        "acme",
        json!({"action": "ingest", "source": {"type": "text", "text": "Beta Corp opened in Porto.", "source_label": "Porto"}}),
    )
    .await
    .unwrap();
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "the dead writer's lease blocked for {waited:?}"
    );
    assert!(!tenant.join(".journal/1-dead.json").exists());
    println!(
        "T11 held: HTML with İ, K (Kelvin), ß and ﬁ ingested without a panic; a dead writer's lease taken over and its journal replayed, the next ingest done in {:.0} ms (the old 60 s lease would have blocked it)",
        waited.as_secs_f64() * 1000.0
    );
}

/// T12. One tenant's ingest cannot flood its wiki with pages, and its large ingests and lints
/// run off the request threads: in `toolplane up` (everything in one process) another
/// tenant's `tools/list` is answered meanwhile.
#[tokio::test]
async fn t12_one_tenants_wiki_work_neither_floods_pages_nor_stalls_others() {
    let fleet = Fleet::start(1, "").await;
    let collector = fleet.client(0, "acme", "collector", LEGACY);
    // 400 distinct names in one document.
    let text: String = (0..400)
        .map(|i| format!("Zorblax{i} Quentaro met Vellmira{i} Ostrakon in Harbourtown{i}. "))
        .collect();
    let reply = collector
        .call(
            "client_wiki",
            json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": "Crowd"}}),
        )
        .await;
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    let entities = structured(&reply)["entities"]
        .as_array()
        .map_or(0, Vec::len);
    let written = std::fs::read_dir(fleet.wiki.tenant_dir("acme").join("wiki/entities"))
        .map_or(0, Iterator::count);
    assert!(
        entities <= 40 && written <= 40,
        "{entities} entities, {written} entity pages"
    );
    println!(
        "T12a held: a document naming 1,200 entities made {written} entity pages (max_entities_per_ingest 40)"
    );
}

/// T12b. In `up`, where the wiki and the edge share one process, one tenant's large lint runs
/// off the request threads: another tenant's `tools/list` is answered meanwhile.
#[tokio::test]
async fn t12b_a_large_lint_in_up_does_not_stall_another_tenants_list() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, addr, credentials) = crate::up::start_up(dir.path()).await;
    let key = |tenant: &str, role: &str| {
        credentials["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["tenant"] == tenant && k["role"] == role)
            .unwrap()["key"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let acme = McpHttp::new(&addr, Some(&key("acme", "collector")), LEGACY);
    let globex = McpHttp::new(&addr, Some(&key("globex", "executor")), LEGACY);
    for doc in 0..40 {
        let text: String = (0..150)
            .map(|i| format!("Company{doc}x{i} Holdings reported revenue growth in Region{doc}y{i} during the quarter. "))
            .collect();
        let reply = acme
            .call(
                "client_wiki",
                json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": format!("Report {doc}")}}),
            )
            .await;
        assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    }
    let lint = tokio::spawn({
        let acme = acme.clone();
        async move {
            let started = Instant::now();
            let reply = acme
                .call("client_wiki", json!({"action": "lint", "scope": "full"}))
                .await;
            (reply, started.elapsed())
        }
    });
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    while !lint.is_finished() && answered < 400 {
        let started = Instant::now();
        assert!(!globex.list_names().await.is_empty());
        slowest = slowest.max(started.elapsed());
        answered += 1;
    }
    let (reply, lint_took) = lint.await.unwrap();
    assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    assert!(
        slowest < Duration::from_secs(2),
        "another tenant's tools/list took {slowest:?}"
    );
    println!(
        "T12b held: acme's lint of {} pages took {:.0} ms; meanwhile {answered} globex tools/list answers, the slowest {:.0} ms",
        structured(&reply)["pages_checked"],
        lint_took.as_secs_f64() * 1000.0,
        slowest.as_secs_f64() * 1000.0
    );
}

/// T13b. Source labels cannot break the wiki's index: links and headings in a label land as
/// text.
#[tokio::test]
async fn t13b_labels_cannot_inject_links_into_the_index() {
    let fleet = Fleet::start(0, "").await;
    invoke_wiki(
        &fleet.wiki.addr,
        "acme",
        json!({"action": "ingest", "source": {"type": "text", "text": "Acme Corp hired a new CFO.",
            "source_label": "Evil]] [[entities/x|click me]]\n# Owned | table"}}),
    )
    .await
    .unwrap();
    let index =
        std::fs::read_to_string(fleet.wiki.tenant_dir("acme").join("wiki/index.md")).unwrap();
    assert!(!index.contains("[[entities/x|click me]]"), "{index}");
    assert!(!index.lines().any(|l| l.starts_with("# Owned")), "{index}");
    println!("T13b held: a label with a link, a heading and a pipe stays inside its index entry");
}
