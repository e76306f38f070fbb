//! The audit trail end to end: real MCP calls through a real edge become records in the
//! control plane's store — who (key id), what (tool, action), how it ended (outcome, error
//! code), how long — and `toolplanectl audit` reads them back with filters, as a table or as
//! JSON lines. Argument values are never kept; a caller's made-up names cannot poison a batch;
//! records an edge had to shed are counted and reported, not lost silently.

use std::time::Duration;

use serde_json::{Value, json};
use tp_proto::pb;
use tp_test_support::{EdgeProcess, McpHttp, binary, eventually};

use crate::control_plane::run;
use crate::fleet::{Fleet, LEGACY};

/// A value no record, log line or table may ever show.
const SECRET: &str = "argument-value-that-must-never-be-audited-4417";

/// `toolplanectl audit --json ARGS` against `fleet`: exit code, the records, stderr.
async fn audit(fleet: &Fleet, args: &[&str]) -> (i32, Vec<Value>, String) {
    let token_file = fleet.cp.data_dir.join("admin-token");
    let mut all = vec![
        "--addr",
        &fleet.cp.addr,
        "--token-file",
        token_file.to_str().unwrap(),
        "--json",
        "audit",
    ];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = run(&binary("toolplanectl"), &all).await;
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    let records = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    (code, records, stderr)
}

/// The id of the key `fleet` issued to (tenant, role).
async fn key_id(fleet: &Fleet, tenant: &str, role: &str) -> String {
    let mut admin = fleet.cp.admin().await;
    let keys = admin
        .tenants
        .list_api_keys(pb::ListApiKeysRequest {
            tenant: tenant.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .keys;
    keys.into_iter()
        .find(|k| k.role == role)
        .map(|k| k.id)
        .unwrap()
}

/// A `tools/call` with the caller's own request id.
async fn call_with_id(client: &McpHttp, key: &str, request_id: &str, name: &str, args: Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": args}});
    let reply = client
        .raw(
            serde_json::to_vec(&body).unwrap(),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", LEGACY),
                ("authorization", &format!("Bearer {key}")),
                ("x-request-id", request_id),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

fn field<'a>(record: &'a Value, name: &str) -> &'a str {
    record[name].as_str().unwrap_or_default()
}

#[tokio::test]
async fn every_call_is_audited_without_its_arguments_and_the_cli_filters_the_trail() {
    let fleet = Fleet::start(1, "").await;
    let collector = fleet.client(0, "qa", "collector", LEGACY);
    let executor = fleet.client(0, "qa", "executor", LEGACY);
    // One call of every kind: ok, an executor failure, a tool unknown to the caller, arguments
    // the schema refuses, and a made-up name far longer than any field the trail keeps.
    call_with_id(
        &collector,
        fleet.key("qa", "collector"),
        "audit-req-1",
        "echo",
        json!({"text": SECRET}),
    )
    .await;
    let failed = collector.call("fail", json!({})).await;
    assert_eq!(failed.result()["isError"], true, "{}", failed.body);
    let unknown = collector.call("no_such_tool", json!({"x": SECRET})).await;
    assert!(unknown.error().is_object(), "{}", unknown.body);
    let invalid = executor.call("echo", json!({"text": 5, "s": SECRET})).await;
    assert!(invalid.error().is_object(), "{}", invalid.body);
    let long_name = "x".repeat(5000);
    let long = executor.call(&long_name, json!({})).await;
    assert!(long.error().is_object(), "{}", long.body);
    // Delivered in the edge's next flush (200 ms in tests).
    let records = eventually("five audit records", Duration::from_secs(10), || async {
        let (code, records, _) = audit(&fleet, &["--tenant", "qa", "--oldest-first"]).await;
        (code == 0 && records.len() >= 5).then_some(records)
    })
    .await;
    assert_eq!(records.len(), 5, "{records:#?}");
    let collector_id = key_id(&fleet, "qa", "collector").await;
    let executor_id = key_id(&fleet, "qa", "executor").await;
    let by = |request_id: &str| {
        records
            .iter()
            .find(|r| field(r, "request_id") == request_id)
            .unwrap_or_else(|| panic!("no record of {request_id}: {records:#?}"))
    };
    // Oldest first as asked (newest first by default); every record names the edge, the
    // tenant, the key and the role.
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let (_, newest, _) = audit(&fleet, &["--tenant", "qa"]).await;
    let newest: Vec<u64> = newest.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(newest, seqs.iter().rev().copied().collect::<Vec<_>>());
    for record in &records {
        assert_eq!(field(record, "tenant"), "qa");
        assert!(!field(record, "edge").is_empty(), "{record}");
        assert!(!field(record, "request_id").is_empty(), "{record}");
        assert!(field(record, "at").ends_with('Z'), "{record}");
    }
    let ok = by("audit-req-1");
    assert_eq!(
        (
            field(ok, "tool"),
            field(ok, "outcome"),
            field(ok, "error_code"),
            field(ok, "principal"),
            field(ok, "role"),
        ),
        ("echo", "ok", "", collector_id.as_str(), "collector")
    );
    let outcomes: Vec<(&str, &str, &str, &str)> = records
        .iter()
        .map(|r| {
            (
                field(r, "principal"),
                &field(r, "tool")[..field(r, "tool").len().min(12)],
                field(r, "outcome"),
                field(r, "error_code"),
            )
        })
        .collect();
    let expected = [
        (collector_id.as_str(), "echo", "ok", ""),
        (
            collector_id.as_str(),
            "fail",
            "executor_error",
            "executor_internal",
        ),
        (
            collector_id.as_str(),
            "no_such_tool",
            "rejected",
            "unknown_tool",
        ),
        (
            executor_id.as_str(),
            "echo",
            "rejected",
            "invalid_arguments",
        ),
        (
            executor_id.as_str(),
            "xxxxxxxxxxxx",
            "rejected",
            "unknown_tool",
        ),
    ];
    assert_eq!(outcomes, expected);
    // The made-up name is kept short.
    assert_eq!(field(&records[4], "tool").len(), 256);

    // Filters: each one narrows, together they intersect.
    let count = |args: &'static [&'static str]| {
        let fleet = &fleet;
        async move {
            let (code, records, stderr) = audit(fleet, args).await;
            assert_eq!(code, 0, "{stderr}");
            records.len()
        }
    };
    assert_eq!(count(&["--outcome", "rejected"]).await, 3);
    assert_eq!(count(&["--tool", "echo"]).await, 2);
    assert_eq!(count(&["--tool", "echo", "--outcome", "ok"]).await, 1);
    assert_eq!(count(&["--tenant", "acme"]).await, 0);
    assert_eq!(count(&["--since", "1h"]).await, 5);
    assert_eq!(count(&["--until", "2000-01-01T00:00:00Z"]).await, 0);
    assert_eq!(count(&["--limit", "2"]).await, 2);
    let (_, mine, _) = audit(&fleet, &["--principal", &executor_id]).await;
    assert_eq!(mine.len(), 2);

    // The table view says the same.
    let token_file = fleet.cp.data_dir.join("admin-token");
    let (code, table, stderr) = run(
        &binary("toolplanectl"),
        &[
            "--addr",
            &fleet.cp.addr,
            "--token-file",
            token_file.to_str().unwrap(),
            "audit",
            "--outcome",
            "executor_error",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        table.contains("OUTCOME") && table.contains("executor_internal"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 2, "{table}");

    // Bad filters: a usage error naming the flag, nothing printed.
    for bad in [
        &["--since", "yesterday"][..],
        &["--until", "5w"],
        &["--outcome", "maybe"],
        &["--limit", "0"],
    ] {
        let (code, records, stderr) = audit(&fleet, bad).await;
        assert_eq!(code, 2, "{bad:?}: {stderr}");
        assert!(records.is_empty());
        assert!(stderr.contains(bad[0]), "{bad:?}: {stderr}");
    }
    // Over gRPC, a bad page token and a bad page size are INVALID_ARGUMENT.
    let mut admin = fleet.cp.admin().await;
    for request in [
        pb::ListAuditRecordsRequest {
            page_token: "garbage".into(),
            ..Default::default()
        },
        pb::ListAuditRecordsRequest {
            page_size: 5000,
            ..Default::default()
        },
    ] {
        let status = admin.audit.list_audit_records(request).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    }
    // The trail is the admin's: the edge token cannot read it.
    let mut edge = tp_client::Admin::connect(&fleet.cp.url(), &fleet.cp.edge_token())
        .await
        .unwrap();
    let status = edge
        .audit
        .list_audit_records(pb::ListAuditRecordsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");

    // Not in the store either: the argument value is nowhere in the database's files.
    for entry in std::fs::read_dir(&fleet.cp.data_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{} holds an argument value",
                path.display()
            );
        }
    }
}

#[tokio::test]
async fn records_an_edge_sheds_are_counted_and_reported_with_the_trail() {
    let fleet = Fleet::start(0, "").await;
    // An edge with room for two records between flushes.
    let edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[fleet.cp.url()],
        Some(&fleet.redis.url()),
        "",
        &[
            ("TOOLPLANE_EDGE_NAME", "shedding-edge".to_owned()),
            ("TOOLPLANE_EDGE_AUDIT__BUFFER", "2".to_owned()),
            ("TOOLPLANE_EDGE_AUDIT__FLUSH_MS", "3000".to_owned()),
        ],
    )
    .await;
    let client = McpHttp::new(&edge.addr, Some(fleet.key("qa", "collector")), LEGACY);
    const CALLS: usize = 12;
    for i in 0..CALLS {
        let reply = client
            .call("echo", json!({"text": format!("call {i}")}))
            .await;
        assert_eq!(reply.result()["isError"], false, "{}", reply.body);
    }
    // Every call is either in the trail or counted as shed; none vanish.
    let (records, stderr) = eventually(
        "the calls accounted for",
        Duration::from_secs(15),
        || async {
            let (code, records, stderr) = audit(&fleet, &["--tenant", "qa"]).await;
            let shed = shed_count(&stderr);
            (code == 0 && records.len() + shed == CALLS).then_some((records, stderr))
        },
    )
    .await;
    let shed = shed_count(&stderr);
    assert!(
        shed >= 1,
        "twelve calls into a buffer of two shed some: {stderr}"
    );
    assert!(stderr.contains("shedding-edge"), "{stderr}");
    assert!(records.iter().all(|r| field(r, "edge") == "shedding-edge"));
}

/// The total in `toolplanectl audit`'s note on shed records (0 without a note).
fn shed_count(stderr: &str) -> usize {
    stderr
        .split("edges shed ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A lost acknowledgement: the control plane stores a batch, its answer never reaches the edge
/// (a proxy between them forwards requests but holds the replies), the edge resends the same
/// batch under the same id, and the control plane does not store it again. Every call is in
/// the trail exactly once, and the edge moves on to new batches once an answer gets through.
#[tokio::test]
async fn a_batch_whose_acknowledgement_is_lost_is_stored_once() {
    let fleet = Fleet::start(0, "").await;
    let proxy = tp_test_support::StallProxy::start(&fleet.cp.addr).await;
    let edge = EdgeProcess::start_with_env(
        &fleet.cp,
        &[format!("http://{}", proxy.addr)],
        Some(&fleet.redis.url()),
        "",
        &[
            ("TOOLPLANE_EDGE_NAME", "lossy-edge".to_owned()),
            ("TOOLPLANE_EDGE_AUDIT__FLUSH_MS", "500".to_owned()),
        ],
    )
    .await;
    let key = fleet.key("qa", "collector");
    let client = McpHttp::new(&edge.addr, Some(key), LEGACY);
    let trail = || async {
        let (code, records, stderr) = audit(&fleet, &["--tenant", "qa"]).await;
        assert_eq!(code, 0, "{stderr}");
        records
    };
    // The first call warms the edge's caches (the key, the registry) and is delivered.
    call_with_id(&client, key, "lost-ack-0", "echo", json!({"text": "warm"})).await;
    eventually("the first record", Duration::from_secs(15), || async {
        (trail().await.len() == 1).then_some(())
    })
    .await;

    // Replies held: the next batch is stored, but the edge never hears so.
    proxy.stall_replies();
    for i in 1..=5 {
        call_with_id(
            &client,
            key,
            &format!("lost-ack-{i}"),
            "echo",
            json!({"text": "x"}),
        )
        .await;
    }
    // 30 s: under the container tests' load the batch once took longer than 15 s to show.
    eventually("the batch stored", Duration::from_secs(30), || async {
        (trail().await.len() == 6).then_some(())
    })
    .await;
    // The edge's report times out (3 s) and it resends the same batch, which is refused as a
    // duplicate (its answer held too, or, after the replies flow again, delivered).
    let log = fleet
        .cp
        .data_dir
        .join(format!("control-plane-{}.log", std::process::id()));
    eventually(
        "the control plane to see the resent batch",
        Duration::from_secs(20),
        || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .ok()
                    .filter(|text| text.contains("resent an audit batch already stored"))
                    .map(|_| ())
            }
        },
    )
    .await;
    proxy.resume();
    // Once an answer gets through, the edge moves on: a new call makes a new batch.
    call_with_id(&client, key, "lost-ack-6", "echo", json!({"text": "after"})).await;
    let records = eventually(
        "the call after the outage",
        Duration::from_secs(20),
        || async {
            let records = trail().await;
            records
                .iter()
                .any(|r| field(r, "request_id") == "lost-ack-6")
                .then_some(records)
        },
    )
    .await;
    let mut ids: Vec<&str> = records.iter().map(|r| field(r, "request_id")).collect();
    ids.sort_unstable();
    let expected: Vec<String> = (0..=6).map(|i| format!("lost-ack-{i}")).collect();
    assert_eq!(ids, expected, "each call exactly once");
}
