//! Approvals mid-call (ADR 0013), against real processes and the official SDKs:
//! - on 2026-07-28 the Python SDK's and the TypeScript SDK v2's elicitation handlers answer the
//!   edge's question; their requests go to two edges in turn, so the retry that carries the
//!   answer lands on the other edge from the one that asked;
//! - on 2025-11-25 the Python and TypeScript (v1) SDKs are asked on the call's stream;
//! - on 2025-06-18 a raw client is asked on its stream and approves through the other edge;
//! - declined, "accepted" without approving, or a client without elicitation: a tool error
//!   naming the rule, and the executor is never called (the edges' executor-call counters do
//!   not move);
//! - the rule is an operator's field, checked against the catalogue (the attacks on the
//!   approval itself are trust_edge::t31);
//! - the audit trail records each question, answer, who gave it and what was shown.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tonic::Code;
use tp_proto::pb;
use tp_test_support::{eventually, node, node_dir, python};

use crate::clients::run_client;
use crate::fleet::{Fleet, LEGACY, STATELESS};

const REASON: &str = "echo repeats what it is given to the tenant's channel";

pub(crate) fn rule() -> pb::ApprovalRule {
    pb::ApprovalRule {
        tool: "echo".into(),
        reason: REASON.into(),
        timeout_secs: 60,
        show: vec!["text".into()],
        ..Default::default()
    }
}

pub(crate) async fn set_approvals(admin: &mut tp_client::Admin, rules: Vec<pb::ApprovalRule>) {
    admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest {
            tenant: Some(pb::Tenant {
                id: "qa".into(),
                approvals: rules,
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["approvals".into()],
            }),
        })
        .await
        .unwrap();
}

/// Waits until every edge holds the rule (a plain JSON call without a session is asked on its
/// stream; a 2026-07-28 call that declares nothing is refused naming the rule).
pub(crate) async fn wait_for_rule(fleet: &Fleet) {
    for edge in 0..fleet.edges.len() {
        let client = fleet.client(edge, "qa", "collector", STATELESS);
        eventually(
            "the approval rule to reach the edge",
            Duration::from_secs(10),
            || {
                let client = client.clone();
                async move {
                    let reply = client.call("echo", json!({"text": "probe"})).await;
                    reply.body.contains("needs approval").then_some(())
                }
            },
        )
        .await;
    }
}

/// Calls the demo executor took, over every edge of the fleet.
pub(crate) async fn executor_calls(fleet: &Fleet) -> f64 {
    let mut total = 0.0;
    for edge in &fleet.edges {
        let (_, metrics) = edge.admin_get("/metrics").await;
        total += metrics
            .lines()
            .filter(|l| {
                l.starts_with("tp_edge_executor_calls_total") && l.contains("executor=\"demo\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    total
}

async fn python_approval(fleet: &Fleet, mode: &str, answer: &str, calls: Value) -> Value {
    let script = std::fs::canonicalize("clients/python_approval.py").expect("python_approval.py");
    let mut args = vec![
        script.display().to_string(),
        fleet.key("qa", "collector").to_owned(),
        mode.to_owned(),
        answer.to_owned(),
        calls.to_string(),
    ];
    args.extend(fleet.edges.iter().map(|e| format!("http://{}/mcp", e.addr)));
    run_client(&python(), &args, Path::new(".")).await
}

async fn ts_approval(fleet: &Fleet, answer: &str, calls: Value) -> Value {
    run_client(
        &node(),
        &[
            "ts_approval.mjs".to_owned(),
            format!("http://{}/mcp", fleet.edges[0].addr),
            fleet.key("qa", "collector").to_owned(),
            answer.to_owned(),
            calls.to_string(),
        ],
        &node_dir(),
    )
    .await
}

async fn ts2_approval(fleet: &Fleet, answer: &str, calls: Value) -> Value {
    let mut args = vec![
        "ts2_approval.mjs".to_owned(),
        fleet.key("qa", "collector").to_owned(),
        answer.to_owned(),
        calls.to_string(),
    ];
    args.extend(fleet.edges.iter().map(|e| format!("http://{}/mcp", e.addr)));
    run_client(&node(), &args, &node_dir()).await
}

/// Calls `echo` with `text` on a stream (request `id`) and waits for the edge's question on it.
async fn asked_on_stream(
    client: &tp_test_support::McpHttp,
    id: u64,
    text: &str,
) -> (tokio::sync::mpsc::UnboundedReceiver<Value>, Value) {
    let (status, mut stream) = client
        .stream(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": text}}),
        )
        .await;
    assert_eq!(status, 200);
    let question = tokio::time::timeout(Duration::from_secs(10), stream.recv())
        .await
        .expect("the question in time")
        .expect("the stream");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    (stream, question)
}

fn refused(out: &Value, why: &str) {
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], true, "{out}");
    let text = call["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&format!("needs approval ({REASON})"))
            && text.contains(why)
            && text.contains("Nothing was forwarded"),
        "{out}"
    );
}

/// The records of qa's `echo` calls with an approval, oldest first, once `count` have arrived.
async fn approval_records(fleet: &Fleet, count: usize) -> Vec<pb::AuditRecord> {
    let admin = fleet.cp.admin().await;
    eventually(
        &format!("{count} audit records with an approval"),
        Duration::from_secs(15),
        || {
            let mut admin = admin.clone();
            async move {
                let records: Vec<pb::AuditRecord> = admin
                    .audit
                    .list_audit_records(pb::ListAuditRecordsRequest {
                        tenant: "qa".into(),
                        tool: "echo".into(),
                        page_size: 1000,
                        ..Default::default()
                    })
                    .await
                    .ok()?
                    .into_inner()
                    .records
                    .into_iter()
                    .filter(|r| r.approval.is_some())
                    .collect();
                (records.len() >= count).then_some(records)
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_approves_on_2026_07_28_and_the_retry_lands_on_the_other_edge() {
    let fleet = Fleet::start(2, "").await;
    let mut admin = fleet.cp.admin().await;
    set_approvals(&mut admin, vec![rule()]).await;
    wait_for_rule(&fleet).await;
    let before = executor_calls(&fleet).await;

    let calls = json!([["echo", {"text": "hello approver", "note": "kept out of the question"}]]);
    let out = python_approval(&fleet, "auto", "approve", calls.clone()).await;
    assert_eq!(out["protocol_version"], "2026-07-28", "{out}");
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");
    assert_eq!(out["calls"][0]["text"], "[qa/collector] hello approver");
    let question = out["questions"][0].as_str().expect("asked");
    assert!(
        question.contains("echo")
            && question.contains(REASON)
            && question.contains("text: hello approver")
            && question.contains("Also given (not shown): note")
            && !question.contains("kept out"),
        "{question}"
    );
    // The call and its retry went to different edges.
    let sent: Vec<&str> = out["sent"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let ports: std::collections::BTreeSet<&str> =
        sent.iter().filter_map(|s| s.split(' ').nth(1)).collect();
    assert_eq!(ports.len(), 2, "both edges served the client: {sent:?}");
    assert_eq!(executor_calls(&fleet).await - before, 1.0);

    // Through `dispatch` (how an agent in progressive mode calls): the same question, and the
    // retry (another `dispatch` carrying the answer and the sealed state) runs the tool once.
    let out = python_approval(
        &fleet,
        "auto",
        "approve",
        json!([["dispatch", {"tool": "echo", "arguments": {"text": "via dispatch"}}]]),
    )
    .await;
    assert_eq!(
        out["calls"][0]["text"], "[qa/collector] via dispatch",
        "{out}"
    );
    assert!(
        out["questions"][0]
            .as_str()
            .is_some_and(|q| q.contains("text: via dispatch")),
        "{out}"
    );
    assert_eq!(executor_calls(&fleet).await - before, 2.0);
    refused(
        &python_approval(
            &fleet,
            "auto",
            "decline",
            json!([["dispatch", {"tool": "echo", "arguments": {"text": "via dispatch"}}]]),
        )
        .await,
        "the client declined it",
    );
    assert_eq!(executor_calls(&fleet).await - before, 2.0);

    // The TypeScript SDK v2 (2026-07-28): its input-required driver asks the handler and
    // retries; a round-robin fetch sends the retry to the other edge.
    let out = ts2_approval(&fleet, "approve", calls.clone()).await;
    assert_eq!(out["protocol_version"], "2026-07-28", "{out}");
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");
    assert_eq!(out["calls"][0]["text"], "[qa/collector] hello approver");
    let ts_question = out["questions"][0].as_str().expect("asked");
    assert!(
        ts_question.contains(REASON) && ts_question.contains("text: hello approver"),
        "{out}"
    );
    let call_edges: Vec<&Value> = out["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["method"] == "tools/call")
        .map(|r| &r["edge"])
        .collect();
    assert_eq!(call_edges.len(), 2, "a call and its retry: {out}");
    assert_ne!(
        call_edges[0], call_edges[1],
        "the retry went to the other edge: {out}"
    );
    assert_eq!(executor_calls(&fleet).await - before, 3.0);
    refused(
        &ts2_approval(&fleet, "decline", calls.clone()).await,
        "the client declined it",
    );
    refused(
        &ts2_approval(&fleet, "none", calls.clone()).await,
        "declared no elicitation capability",
    );
    assert_eq!(executor_calls(&fleet).await - before, 3.0);

    // No, an "accept" that does not approve, no elicitation: nothing reaches the executor.
    for (answer, why) in [
        ("decline", "the client declined it"),
        ("accept-without-approving", "answered without approving"),
        ("cancel", "cancelled the question"),
        ("none", "declared no elicitation capability"),
    ] {
        let out = python_approval(&fleet, "auto", answer, calls.clone()).await;
        refused(&out, why);
    }
    assert_eq!(
        executor_calls(&fleet).await - before,
        3.0,
        "a refused call reached the executor"
    );

    // The trail: asked, approved (by this key, what was shown), declined, ..., unsupported.
    let records = approval_records(&fleet, 10).await;
    let states: Vec<(i32, &str)> = records
        .iter()
        .map(|r| (r.approval.as_ref().unwrap().state, r.error_code.as_str()))
        .collect();
    let approved = records
        .iter()
        .find(|r| r.approval.as_ref().unwrap().state == pb::ApprovalState::Approved as i32)
        .expect("an approved record");
    let approval = approved.approval.as_ref().unwrap();
    assert_eq!(approved.outcome, pb::CallOutcome::Ok as i32);
    assert_eq!(approval.reason, REASON);
    assert!(approval.shown.contains("hello approver"), "{approval:?}");
    assert_eq!(approval.answered_by, approved.principal);
    assert!(approval.answered_at_ms > 0);
    for code in ["approval_declined", "approval_unsupported"] {
        assert!(
            states.iter().any(|(_, c)| *c == code),
            "{code} missing: {states:?}"
        );
    }
    println!(
        "approvals on 2026-07-28 across two edges: asked {question:?}; requests {sent:?}; audit (state, code): {states:?}"
    );
    assert!(
        states
            .iter()
            .filter(|(s, _)| *s == pb::ApprovalState::Asked as i32)
            .count()
            >= 4,
        "{states:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_and_typescript_sdks_are_asked_on_the_stream_on_2025_11_25() {
    let fleet = Fleet::start(2, "[mcp]\nrequest_timeout_ms = 3000\n").await;
    let mut admin = fleet.cp.admin().await;
    set_approvals(&mut admin, vec![rule()]).await;
    wait_for_rule(&fleet).await;
    let before = executor_calls(&fleet).await;
    let calls = json!([["echo", {"text": "on the stream"}]]);

    let out = python_approval(&fleet, "legacy", "approve", calls.clone()).await;
    assert_eq!(out["protocol_version"], LEGACY, "{out}");
    assert_eq!(
        out["calls"][0]["text"], "[qa/collector] on the stream",
        "{out}"
    );
    assert!(
        out["questions"][0]
            .as_str()
            .unwrap()
            .contains("text: on the stream")
    );
    let out = ts_approval(&fleet, "approve", calls.clone()).await;
    assert_eq!(out["protocol_version"], LEGACY, "{out}");
    assert_eq!(
        out["calls"][0]["text"], "[qa/collector] on the stream",
        "{out}"
    );
    assert!(
        out["questions"][0].as_str().unwrap().contains(REASON),
        "{out}"
    );
    assert_eq!(executor_calls(&fleet).await - before, 2.0);

    refused(
        &python_approval(&fleet, "legacy", "decline", calls.clone()).await,
        "the client declined it",
    );
    refused(
        &ts_approval(&fleet, "cancel", calls.clone()).await,
        "cancelled the question",
    );
    refused(
        &ts_approval(&fleet, "none", calls.clone()).await,
        "declared no elicitation capability",
    );
    assert_eq!(executor_calls(&fleet).await - before, 2.0);

    // Nobody answers: the question closes with the request (mcp.request_timeout_ms, 3 s here,
    // shorter than the rule's 60 s), and nothing is forwarded.
    let legacy = fleet.client(1, "qa", "collector", LEGACY);
    let (mut stream, _) = asked_on_stream(&legacy, 7, "unanswered").await;
    let unanswered = tokio::time::timeout(Duration::from_secs(10), stream.recv())
        .await
        .expect("the result in time")
        .expect("the stream");
    let text = unanswered["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("nobody answered within 3 s") && text.contains("Nothing was forwarded"),
        "{unanswered}"
    );
    assert_eq!(executor_calls(&fleet).await - before, 2.0);

    // 2025-06-18, raw: the question comes on the call's stream of edge 0, the approval is
    // POSTed to edge 1, and the call finishes on edge 0 with the executor's answer (once).
    const JUNE: &str = "2025-06-18";
    let asking = fleet.client(0, "qa", "collector", JUNE);
    let (mut stream, question) = asked_on_stream(&asking, 8, "june").await;
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(REASON) && message.contains("text: june"),
        "{question}"
    );
    let bearer = format!("Bearer {}", fleet.key("qa", "collector"));
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", JUNE),
        ("authorization", bearer.as_str()),
    ];
    let approval = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": question["id"],
        "result": {"action": "accept", "content": {"approve": true}},
    }))
    .unwrap();
    let other_edge = fleet.client(1, "qa", "collector", JUNE);
    let accepted = other_edge.raw(approval.clone(), &headers).await;
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let result = tokio::time::timeout(Duration::from_secs(10), stream.recv())
        .await
        .expect("the result in time")
        .expect("the stream");
    assert_eq!(result["id"], 8, "{result}");
    assert_eq!(
        result["result"]["content"][0]["text"], "[qa/collector] june",
        "{result}"
    );
    // The same answer again finds no question: it cannot approve a second call.
    let replayed = other_edge.raw(approval, &headers).await;
    assert_eq!(replayed.status, 400, "{}", replayed.body);
    assert_eq!(executor_calls(&fleet).await - before, 3.0);

    // A rule limited to one action and one argument value (client_wiki's lint when it would
    // publish its report; absent, publish_report is true by the schema's default).
    set_approvals(
        &mut admin,
        vec![pb::ApprovalRule {
            tool: "client_wiki".into(),
            action: "lint".into(),
            reason: "publishes a report to the client channel".into(),
            when_argument: "publish_report".into(),
            when_equals: "true".into(),
            ..rule()
        }],
    )
    .await;
    let probe = fleet.client(0, "qa", "collector", STATELESS);
    eventually(
        "the lint rule to reach the edge",
        Duration::from_secs(10),
        || {
            let probe = probe.clone();
            async move {
                let reply = probe.call("client_wiki", json!({"action": "lint"})).await;
                reply
                    .body
                    .contains("needs approval (publishes a report")
                    .then_some(())
            }
        },
    )
    .await;
    for arguments in [
        json!({"action": "lint", "publish_report": false}),
        json!({"action": "query", "question": "What is new?"}),
    ] {
        let reply = probe.call("client_wiki", arguments.clone()).await;
        assert!(
            !reply.body.contains("needs approval"),
            "{arguments}: {}",
            reply.body
        );
    }
    let reply = probe
        .call(
            "client_wiki",
            json!({"action": "lint", "publish_report": true}),
        )
        .await;
    assert!(reply.body.contains("needs approval"), "{}", reply.body);

    // Only the action the rule names: a rule for one action of a polymorphic tool leaves the
    // tool's other calls alone, and rules for other roles do not apply.
    set_approvals(
        &mut admin,
        vec![pb::ApprovalRule {
            roles: vec!["executor".into()],
            ..rule()
        }],
    )
    .await;
    let client = fleet.client(0, "qa", "collector", STATELESS);
    eventually(
        "the rule to be lifted for collector",
        Duration::from_secs(10),
        || {
            let client = client.clone();
            async move {
                let reply = client.call("echo", json!({"text": "free"})).await;
                (reply.result()["isError"] == false).then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn approval_rules_are_an_operators_checked_against_the_catalogue() {
    let fleet = Fleet::start(1, "").await;
    let mut admin = fleet.cp.admin().await;
    let revision = |tenant: pb::Tenant| tenant.revision;
    let before = revision(
        admin
            .tenants
            .get_tenant(pb::GetTenantRequest { id: "qa".into() })
            .await
            .unwrap()
            .into_inner(),
    );
    for (what, bad, field) in [
        (
            "unknown tool",
            pb::ApprovalRule {
                tool: "nope".into(),
                ..rule()
            },
            "approvals[0].tool",
        ),
        (
            "action of a plain tool",
            pb::ApprovalRule {
                action: "send".into(),
                ..rule()
            },
            "approvals[0].action",
        ),
        (
            "unknown action",
            pb::ApprovalRule {
                tool: "client_wiki".into(),
                action: "nope".into(),
                ..rule()
            },
            "approvals[0].action",
        ),
        (
            "unknown role",
            pb::ApprovalRule {
                roles: vec!["nobody".into()],
                ..rule()
            },
            "approvals[0].roles",
        ),
        (
            "no reason",
            pb::ApprovalRule {
                reason: String::new(),
                ..rule()
            },
            "approvals[0].reason",
        ),
        (
            "timeout too long",
            pb::ApprovalRule {
                timeout_secs: 7200,
                ..rule()
            },
            "approvals[0].timeout_secs",
        ),
        (
            "condition on no argument",
            pb::ApprovalRule {
                when_argument: "nope".into(),
                when_equals: "true".into(),
                ..rule()
            },
            "approvals[0].when_argument",
        ),
        (
            "condition that is not JSON",
            pb::ApprovalRule {
                when_argument: "text".into(),
                when_equals: "yes".into(),
                ..rule()
            },
            "approvals[0].when_equals",
        ),
        (
            "half a condition",
            pb::ApprovalRule {
                when_argument: "text".into(),
                ..rule()
            },
            "approvals[0].when_argument",
        ),
    ] {
        let status = admin
            .tenants
            .update_tenant(pb::UpdateTenantRequest {
                tenant: Some(pb::Tenant {
                    id: "qa".into(),
                    approvals: vec![bad],
                    ..Default::default()
                }),
                update_mask: Some(prost_types::FieldMask {
                    paths: vec!["approvals".into()],
                }),
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        assert!(
            status.message().contains(field),
            "{what}: {}",
            status.message()
        );
    }

    // The CLI sets rules (its values replace the tenant's) and shows them.
    let ctl = tp_test_support::binary("toolplanectl");
    let token = fleet.cp.admin_token();
    let base = ["--addr", fleet.cp.addr.as_str(), "--token", token.as_str()];
    let (status, _, stderr) = crate::control_plane::run(
        &ctl,
        &[
            &base[..],
            &[
                "tenants",
                "update",
                "qa",
                "--approval",
                &format!("echo={REASON}"),
                "--approval",
                "client_wiki:lint[publish_report=true]=publishes a report",
                "--approval-show",
                "text",
                "--approval-timeout",
                "120",
            ],
        ]
        .concat(),
    )
    .await;
    assert_eq!(status, 0, "{stderr}");
    let (status, stdout, stderr) = crate::control_plane::run(
        &ctl,
        &[&base[..], &["--json", "tenants", "get", "qa"]].concat(),
    )
    .await;
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stdout.contains("\"action\": \"lint\"")
            && stdout.contains("\"timeout_secs\": 120")
            && stdout.contains("\"argument\": \"publish_report\""),
        "{stdout}"
    );
    let (status, _, stderr) = crate::control_plane::run(
        &ctl,
        &[
            &base[..],
            &["tenants", "update", "qa", "--approval", "echo"],
        ]
        .concat(),
    )
    .await;
    assert_ne!(status, 0);
    assert!(stderr.contains("TOOL=REASON"), "{stderr}");

    // A tenant admin may not lift (or set) the tenant's approvals.
    set_approvals(&mut admin, vec![rule()]).await;
    let issued = admin
        .admins
        .issue_admin_token(pb::IssueAdminTokenRequest {
            scope: pb::AdminScope::TenantAdmin as i32,
            tenants: vec!["qa".into()],
            label: "qa-admin".into(),
            expires_at: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut tenant_admin = tp_client::Admin::connect(&fleet.cp.url(), &issued.token)
        .await
        .unwrap();
    let status = tenant_admin
        .tenants
        .update_tenant(pb::UpdateTenantRequest {
            tenant: Some(pb::Tenant {
                id: "qa".into(),
                ..Default::default()
            }),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["approvals".into()],
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("approvals"),
        "{}",
        status.message()
    );
    let after = admin
        .tenants
        .get_tenant(pb::GetTenantRequest { id: "qa".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.approvals.len(), 1, "the rule stands");
    assert!(after.revision > before);
}
