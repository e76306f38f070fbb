//! `client_wiki` end to end: edge → registry → the wiki service, with role rules enforced by
//! the edge (role-projected schema) and again by the wiki, and tenants kept apart.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_test_support::python;

use crate::clients::run_client;
use crate::fleet::{Fleet, LEGACY, STATELESS};

const MEMO: &str = "The board of Acme Corp met in Berlin on 3 October. Jane Smith presented the Q3 results. \
Revenue reached $4.2M in the third quarter, ahead of plan. The board approved a new office in Berlin. \
Acme Corp was founded in 1999 by Jane Smith.";

/// Serves one HTML page on loopback for URL ingestion; returns its URL.
async fn serve_page(html: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = socket.read(&mut buffer).await;
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
                html.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    format!("http://{addr}/pricing.html")
}

fn structured(reply: &tp_test_support::HttpReply) -> &Value {
    &reply.result()["structuredContent"]
}

#[tokio::test]
async fn ingest_query_lint_through_the_edge_with_roles_and_tenants_apart() {
    let fleet = Fleet::start(1, "").await;
    let collector = fleet.client(0, "acme", "collector", LEGACY);
    let executor = fleet.client(0, "acme", "executor", STATELESS);

    // A collector ingests pasted text and a web page.
    let ingest = collector
        .call("client_wiki", json!({"action": "ingest", "source": {"type": "text", "text": MEMO, "source_label": "Q3 board memo"}}))
        .await;
    assert_eq!(ingest.result()["isError"], false, "{}", ingest.body);
    assert_eq!(
        structured(&ingest)["source"],
        "wiki/sources/q3-board-memo.md"
    );
    let url = serve_page("<html><head><title>Pricing update</title></head><body><p>Acme Corp raised the Pro plan price to $49 per seat.</p><p>The change starts in January for all Berlin customers.</p></body></html>").await;
    let web = collector
        .call(
            "client_wiki",
            json!({"action": "ingest", "source": {"type": "url", "url": url}}),
        )
        .await;
    assert_eq!(web.result()["isError"], false, "{}", web.body);
    assert_eq!(structured(&web)["source"], "wiki/sources/pricing-update.md");

    // The executor role queries; answers cite pages.
    let answer = executor
        .call(
            "client_wiki",
            json!({"action": "query", "question": "Where will the new office be?"}),
        )
        .await;
    assert_eq!(answer.result()["isError"], false, "{}", answer.body);
    assert_eq!(structured(&answer)["answered"], true, "{}", answer.body);
    assert!(
        structured(&answer)["answer"]
            .as_str()
            .unwrap()
            .contains("[[sources/q3-board-memo#^s")
    );
    let price = executor
        .call(
            "client_wiki",
            json!({"action": "query", "question": "What is the Pro plan price per seat?"}),
        )
        .await;
    assert!(
        structured(&price)["answer"]
            .as_str()
            .unwrap()
            .contains("$49"),
        "{}",
        price.body
    );

    // ...but cannot ingest or lint (the edge refuses: its schema has only `query`)...
    for action in [
        json!({"action": "ingest", "source": {"type": "text", "text": "x", "source_label": "y"}}),
        json!({"action": "lint"}),
    ] {
        let refused = executor.call("client_wiki", action).await;
        assert_eq!(refused.error()["code"], -32602, "{}", refused.body);
    }
    // ...nor persist an answer: `persist_output` is not in its schema (the edge refuses), and
    // the wiki would refuse it too (defense in depth).
    let persist = executor
        .call("client_wiki", json!({"action": "query", "question": "Where will the new office be?", "persist_output": true}))
        .await;
    assert_eq!(persist.error()["code"], -32602, "{}", persist.body);
    assert!(!persist.body.contains("persist_output"), "{}", persist.body);

    // Object keys stay inside the tenant's raw folder.
    for key in [
        "../globex/raw/x.txt",
        "wiki/globex/raw/x.txt",
        "wiki/acme/raw/%2e%2e/x",
        "/etc/passwd",
    ] {
        let escape = collector
            .call(
                "client_wiki",
                json!({"action": "ingest", "source": {"type": "r2", "r2_key": key}}),
            )
            .await;
        assert_eq!(escape.result()["isError"], true, "{key}: {}", escape.body);
        assert!(
            escape
                .body
                .contains("is not an object under wiki/acme/raw/"),
            "{key}: {}",
            escape.body
        );
    }
    // The SSRF guard holds for addresses other than the loopback the tests allow.
    let metadata = collector
        .call("client_wiki", json!({"action": "ingest", "source": {"type": "url", "url": "http://169.254.169.254/latest/meta-data"}}))
        .await;
    assert_eq!(metadata.result()["isError"], true, "{}", metadata.body);

    // Another tenant sees nothing of acme's wiki.
    let globex = fleet.client(0, "globex", "collector", LEGACY);
    let nothing = globex
        .call(
            "client_wiki",
            json!({"action": "query", "question": "Where will the new office be?"}),
        )
        .await;
    assert_eq!(structured(&nothing)["answered"], false, "{}", nothing.body);

    // Lint, with a report.
    let lint = collector
        .call("client_wiki", json!({"action": "lint", "scope": "full"}))
        .await;
    assert_eq!(lint.result()["isError"], false, "{}", lint.body);
    assert_eq!(structured(&lint)["report"], "wiki/lint-report.md");
    assert!(
        fleet
            .wiki
            .dir
            .path()
            .join("data/wiki/acme/wiki/lint-report.md")
            .exists()
    );
    assert!(!fleet.wiki.dir.path().join("data/wiki/globex").exists());
}

#[tokio::test]
async fn the_python_sdk_runs_ingest_query_lint() {
    let fleet = Fleet::start(1, "").await;
    let script = std::fs::canonicalize("clients/python_client.py").unwrap();
    let calls = json!([
        ["client_wiki", {"action": "ingest", "source": {"type": "text", "text": MEMO, "source_label": "Q3 board memo"}}],
        ["client_wiki", {"action": "query", "question": "When was Acme Corp founded?", "output_format": "summary_with_sources"}],
        ["client_wiki", {"action": "lint", "scope": "full", "publish_report": true}],
    ]);
    let out = run_client(
        &python(),
        &[
            script.display().to_string(),
            format!("http://{}/mcp", fleet.edges[0].addr),
            fleet.key("acme", "collector").to_owned(),
            "auto".to_owned(),
            calls.to_string(),
        ],
        std::path::Path::new("."),
    )
    .await;
    let results = out["calls"].as_array().unwrap();
    for result in results {
        assert_eq!(result["is_error"], false, "{result}");
    }
    assert_eq!(
        results[0]["structured"]["source"],
        "wiki/sources/q3-board-memo.md"
    );
    let answer = results[1]["structured"]["answer"].as_str().unwrap();
    assert!(
        answer.contains("1999") && answer.contains("Sources:\n[1] [[sources/q3-board-memo#^s"),
        "{answer}"
    );
    assert_eq!(
        results[1]["structured"]["persisted"],
        "wiki/outputs/when-was-acme-corp-founded.md"
    );
    assert!(
        results[2]["text"].as_str().unwrap().contains("finding(s)"),
        "{}",
        results[2]
    );
}

/// Receives HTTP POSTs on loopback; every body arrives on the channel.
async fn receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (sender, bodies) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buffer = [0u8; 8192];
                loop {
                    let Ok(n) = socket.read(&mut buffer).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    data.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&data).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            let _ = sender
                                .send(serde_json::from_str(&body[..length]).unwrap_or(Value::Null));
                            let _ = socket
                                .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                                .await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (format!("http://{addr}/hooks/wiki"), bodies)
}

#[tokio::test]
async fn material_lint_findings_reach_the_tenants_webhook() {
    let fleet = Fleet::start(1, "").await;
    let (url, mut bodies) = receiver().await;
    let mut admin = fleet.cp.admin().await;
    let mut tenant = admin
        .tenants
        .get_tenant(tp_proto::pb::GetTenantRequest { id: "acme".into() })
        .await
        .unwrap()
        .into_inner();
    tenant.lint_webhook = url.clone();
    admin
        .tenants
        .update_tenant(tp_proto::pb::UpdateTenantRequest::replacing(tenant))
        .await
        .unwrap();
    let collector = fleet.client(0, "acme", "collector", LEGACY);
    for (label, text) in [
        ("Q3 board memo", MEMO),
        (
            "Company profile",
            "Acme Corp is a data company. Acme Corp was founded in 2001 in Ohio.",
        ),
    ] {
        let reply = collector
            .call("client_wiki", json!({"action": "ingest", "source": {"type": "text", "text": text, "source_label": label}}))
            .await;
        assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    }
    // The tenant change reaches the edge by push; lint until the webhook is used.
    let lint = tp_test_support::eventually(
        "the webhook to be configured",
        std::time::Duration::from_secs(5),
        || async {
            let reply = collector
                .call("client_wiki", json!({"action": "lint", "scope": "full"}))
                .await;
            let webhook = structured(&reply)["webhook"].clone();
            webhook.is_object().then_some(reply)
        },
    )
    .await;
    let webhook = &structured(&lint)["webhook"];
    assert_eq!(webhook["delivered"], true, "{webhook}");
    assert_eq!(webhook["url"], url.as_str());
    let body = tokio::time::timeout(std::time::Duration::from_secs(5), bodies.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(body["event"], "wiki.lint");
    assert_eq!(body["tenant"], "acme");
    let findings = body["findings"].as_array().unwrap();
    assert!(
        findings.iter().any(|f| f["rule"] == "contradiction"),
        "{body}"
    );
    assert!(
        findings.iter().all(|f| f["severity"] != "info"),
        "only material findings: {body}"
    );
    // Other tenants' lints do not call acme's webhook.
    let globex = fleet.client(0, "globex", "collector", LEGACY);
    let other = globex
        .call("client_wiki", json!({"action": "lint", "scope": "full"}))
        .await;
    assert!(structured(&other)["webhook"].is_null(), "{}", other.body);
}

/// A large ingest and a lint send progress to a client that asked for it (`progressToken`),
/// through the edge, on every protocol version; a client that did not ask gets none.
#[tokio::test]
async fn ingest_and_lint_report_progress_on_every_protocol_version() {
    let fleet = Fleet::start(1, "").await;
    let big: String = (0..400)
        .map(|i| {
            format!(
                "Acme Corp opened office {i} in Berlin with {} staff. ",
                10 + i
            )
        })
        .collect();
    for (n, version) in ["2024-11-05", "2025-03-26", "2025-06-18", LEGACY, STATELESS]
        .into_iter()
        .enumerate()
    {
        let client = fleet.client(0, "acme", "collector", version);
        for (action, arguments) in [
            (
                "ingest",
                json!({"action": "ingest", "source": {"type": "text", "text": format!("{big} Version {n}."), "source_label": format!("Office list {n}")}}),
            ),
            ("lint", json!({"action": "lint", "publish_report": false})),
        ] {
            let token = format!("{action}-{n}");
            let reply = client
                .request(
                    10 + n as u64,
                    "tools/call",
                    json!({"name": "client_wiki", "arguments": arguments, "_meta": {"progressToken": token}}),
                )
                .await;
            assert_eq!(
                reply.result()["isError"],
                false,
                "{version} {action}: {}",
                reply.body
            );
            let progress: Vec<(f64, f64)> = reply
                .notifications()
                .iter()
                .filter(|n| {
                    n["method"] == "notifications/progress" && n["params"]["progressToken"] == token
                })
                .map(|n| {
                    (
                        n["params"]["progress"].as_f64().unwrap(),
                        n["params"]["total"].as_f64().unwrap_or(0.0),
                    )
                })
                .collect();
            assert!(
                progress.len() >= 2,
                "{version} {action}: progress expected: {}",
                reply.body
            );
            assert!(
                progress.windows(2).all(|w| w[0].0 < w[1].0),
                "{version} {action}: progress must increase: {progress:?}"
            );
            assert!(
                progress
                    .iter()
                    .all(|(done, total)| *total == 0.0 || done <= total)
            );
        }
        // Without a token: the same call, no progress.
        let quiet = client
            .call(
                "client_wiki",
                json!({"action": "lint", "publish_report": false}),
            )
            .await;
        assert!(
            quiet
                .notifications()
                .iter()
                .all(|n| n["method"] != "notifications/progress"),
            "{version}: {}",
            quiet.body
        );
    }
}

#[tokio::test]
async fn as_of_and_subjects_are_used_and_bad_values_are_refused_writing_nothing() {
    let fleet = Fleet::start(1, "").await;
    let collector = fleet.client(0, "acme", "collector", LEGACY);
    let note = "Unemployment stood at 6.4% in 2024. The capital is Lisbon.";
    let ingest = collector
        .call(
            "client_wiki",
            json!({"action": "ingest", "as_of": "2025-07-01", "subjects": ["Portugal"],
                   "source": {"type": "text", "text": note, "source_label": "Correspondent note"}}),
        )
        .await;
    assert_eq!(ingest.result()["isError"], false, "{}", ingest.body);
    assert_eq!(
        structured(&ingest)["as_of"],
        "2025-07-01",
        "{}",
        ingest.body
    );
    assert!(
        structured(&ingest)["entities"]
            .as_array()
            .unwrap()
            .contains(&json!("Portugal")),
        "{}",
        ingest.body
    );
    // The note names no country; the subject given makes its sentences about Portugal.
    let answer = collector
        .call(
            "client_wiki",
            json!({"action": "query", "question": "What is the unemployment rate of Portugal?", "persist_output": false}),
        )
        .await;
    assert_eq!(
        structured(&answer)["fact"]["value"],
        "6.4%",
        "{}",
        answer.body
    );
    // Bad dates and subject lists are refused, and nothing is written: too many subjects by
    // the edge's schema (-32602); a date that is not a calendar date and an empty name by the
    // wiki, as a tool error that names the argument.
    let too_many = collector
        .call(
            "client_wiki",
            json!({"action": "ingest", "subjects": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"],
                   "source": {"type": "text", "text": "x y z", "source_label": "Too many"}}),
        )
        .await;
    assert_eq!(too_many.error()["code"], -32602, "{}", too_many.body);
    for (arguments, names) in [
        (
            json!({"action": "ingest", "as_of": "2025-02-30", "source": {"type": "text", "text": "x y z", "source_label": "Bad date"}}),
            "as_of must be a calendar date",
        ),
        (
            json!({"action": "ingest", "as_of": "yesterday", "source": {"type": "text", "text": "x y z", "source_label": "Bad date"}}),
            "as_of must be a calendar date",
        ),
        (
            json!({"action": "ingest", "subjects": [""], "source": {"type": "text", "text": "x y z", "source_label": "Empty"}}),
            "every subject must be a name",
        ),
    ] {
        let refused = collector.call("client_wiki", arguments.clone()).await;
        assert_eq!(
            refused.result()["isError"],
            true,
            "{arguments}: {}",
            refused.body
        );
        assert!(
            refused.body.contains(names),
            "{arguments}: {}",
            refused.body
        );
    }
    let sources: Vec<_> =
        std::fs::read_dir(fleet.wiki.dir.path().join("data/wiki/acme/wiki/sources"))
            .unwrap()
            .collect();
    assert_eq!(sources.len(), 1, "{sources:?}");
}

/// The findings of a lint (without publishing) of `client`'s tenant, as "rule: evidence".
async fn lint_findings(client: &tp_test_support::McpHttp) -> Vec<String> {
    let lint = client
        .call(
            "client_wiki",
            json!({"action": "lint", "publish_report": false}),
        )
        .await;
    assert_eq!(lint.result()["isError"], false, "{}", lint.body);
    structured(&lint)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info")
        .map(|f| format!("{}: {}", f["rule"], f["evidence"]))
        .collect()
}

#[tokio::test]
async fn a_tenants_synonym_table_is_data_it_edits_and_every_query_and_lint_reads_it() {
    let fleet = Fleet::start(1, "").await;
    let collector = fleet.client(0, "acme", "collector", LEGACY);
    let executor = fleet.client(0, "acme", "executor", STATELESS);
    let other = fleet.client(0, "globex", "collector", STATELESS);
    // Two documents of one day give Acme's size under two labels; the default vocabulary does
    // not know "head count".
    for (text, label) in [
        (
            "Client: Acme Corp\nHead count: 120\nBudget: 80k",
            "Acme Corp brief",
        ),
        (
            "Client: Acme Corp\nStaff: 135\nOwner: Tom",
            "Acme Corp account sheet",
        ),
    ] {
        for client in [&collector, &other] {
            let ingest = client
                .call(
                    "client_wiki",
                    json!({"action": "ingest", "as_of": "2026-01-10",
                           "source": {"type": "text", "text": text, "source_label": label}}),
                )
                .await;
            assert_eq!(ingest.result()["isError"], false, "{}", ingest.body);
        }
    }
    let no_contradiction = lint_findings(&collector).await;
    assert!(
        !no_contradiction.iter().any(|f| f.contains("contradiction")),
        "{no_contradiction:?}"
    );
    let table = |reply: &tp_test_support::HttpReply| structured(reply)["synonyms"].clone();

    // An executor may read the table but not change it: `set` is not in its schema.
    let listed = executor
        .call("client_wiki", json!({"action": "synonyms"}))
        .await;
    assert_eq!(table(&listed), json!({}), "{}", listed.body);
    let denied = executor
        .call(
            "client_wiki",
            json!({"action": "synonyms", "set": {"head count": "staff"}}),
        )
        .await;
    assert_eq!(denied.error()["code"], -32602, "{}", denied.body);
    // Bad tables are refused whole, naming what is wrong: by the edge's schema (too many
    // changes, a meaning too long) or by the wiki (a chain, a phrase meaning itself).
    let many: serde_json::Map<String, Value> = (0..51)
        .map(|i| (format!("phrase {i}"), json!("staff")))
        .collect();
    for (set, code) in [
        (Value::Object(many), -32602),
        (json!({"head count": "x".repeat(61)}), -32602),
    ] {
        let refused = collector
            .call("client_wiki", json!({"action": "synonyms", "set": set}))
            .await;
        assert_eq!(refused.error()["code"], code, "{}", refused.body);
    }
    for (set, names) in [
        (
            json!({"head count": "people", "people": "staff"}),
            "itself a phrase of the table",
        ),
        (json!({"staff": "Staff"}), "cannot mean itself"),
        (json!({"!!": "staff"}), "must be 1 to 6 words"),
    ] {
        let refused = collector
            .call("client_wiki", json!({"action": "synonyms", "set": set}))
            .await;
        assert_eq!(refused.result()["isError"], true, "{set}: {}", refused.body);
        assert!(refused.body.contains(names), "{set}: {}", refused.body);
    }
    let unchanged = collector
        .call("client_wiki", json!({"action": "synonyms"}))
        .await;
    assert_eq!(table(&unchanged), json!({}), "{}", unchanged.body);

    // The collector says "head count" means staff: the next query groups both values, the
    // next lint finds them contradicting — with no re-ingest.
    let set = collector
        .call(
            "client_wiki",
            json!({"action": "synonyms", "set": {"Head count": "staff"}}),
        )
        .await;
    assert_eq!(set.result()["isError"], false, "{}", set.body);
    assert_eq!(table(&set), json!({"head count": "staff"}), "{}", set.body);
    assert_eq!(structured(&set)["changed"], 1, "{}", set.body);
    let answer = executor
        .call(
            "client_wiki",
            json!({"action": "query", "question": "What is the head count of Acme Corp?"}),
        )
        .await;
    let fact = &structured(&answer)["fact"];
    assert_eq!(fact["other_values"], 1, "{}", answer.body);
    let text = structured(&answer)["answer"].as_str().unwrap_or_default();
    assert!(
        text.contains("135") && text.contains("120"),
        "{}",
        answer.body
    );
    let findings = lint_findings(&collector).await;
    assert!(
        findings
            .iter()
            .any(|f| f.contains("contradiction") && f.contains("135") && f.contains("120")),
        "{findings:?}"
    );
    let log =
        std::fs::read_to_string(fleet.wiki.dir.path().join("data/wiki/acme/wiki/log.md")).unwrap();
    assert!(log.contains("] synonyms | 1 of 1 entries changed"), "{log}");

    // Tenants apart: globex has the same pages and no table.
    let theirs = other
        .call("client_wiki", json!({"action": "synonyms"}))
        .await;
    assert_eq!(table(&theirs), json!({}), "{}", theirs.body);
    let their_findings = lint_findings(&other).await;
    assert!(
        !their_findings.iter().any(|f| f.contains("contradiction")),
        "{their_findings:?}"
    );

    // Removed, and the contradiction goes with it.
    let removed = collector
        .call(
            "client_wiki",
            json!({"action": "synonyms", "set": {"head count": ""}}),
        )
        .await;
    assert_eq!(table(&removed), json!({}), "{}", removed.body);
    let after = lint_findings(&collector).await;
    assert!(
        !after.iter().any(|f| f.contains("contradiction")),
        "{after:?}"
    );
}
