//! Prometheus on the control plane and the wiki service, as real processes: every gRPC call
//! counted and timed as a histogram (not a summary, so a fleet's figures add up), labelled by
//! server, method and status; the wiki's whole calls timed by action. Labels a caller chooses
//! (an action name) cannot grow the label set.

use serde_json::json;
use tp_proto::pb;
use tp_test_support::services::free_port;
use tp_test_support::{ControlPlaneProcess, WikiProcess};

use crate::trust_wiki::invoke_wiki;

/// `GET /metrics` on `addr`: the body of a 200 `text/plain` answer.
async fn scrape(addr: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    body.to_owned()
}

/// The value of the sample `name` whose labels include every one of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{'))
        })
        .find(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

#[tokio::test]
async fn the_control_plane_and_the_wiki_serve_prometheus_histograms() {
    // The control plane: a success, a NOT_FOUND and an UNAUTHENTICATED call.
    let dir = tempfile::tempdir().unwrap();
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let cp = ControlPlaneProcess::start_with_env(
        dir.path(),
        vec!["--demo".into()],
        vec![("TOOLPLANE_CP_METRICS_LISTEN", metrics_addr.clone())],
    )
    .await;
    let mut admin = cp.admin().await;
    for _ in 0..2 {
        admin
            .catalog
            .list_tools(pb::ListToolsRequest::default())
            .await
            .unwrap();
    }
    let missing = admin
        .catalog
        .get_tool(pb::GetToolRequest {
            name: "no_such_tool".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let mut stranger = tp_client::Admin::connect(&cp.url(), "not-the-admin-token-of-anyone")
        .await
        .unwrap();
    let refused = stranger
        .catalog
        .list_tools(pb::ListToolsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);

    let text = scrape(&metrics_addr).await;
    let list = [
        ("server", "control_plane"),
        ("method", "/toolplane.v1.Catalog/ListTools"),
    ];
    let ok = [list[0], list[1], ("code", "OK")];
    assert_eq!(
        sample(&text, "tp_grpc_server_requests_total", &ok),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "tp_grpc_server_requests_total",
            &[list[0], list[1], ("code", "UNAUTHENTICATED")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "tp_grpc_server_requests_total",
            &[
                ("server", "control_plane"),
                ("method", "/toolplane.v1.Catalog/GetTool"),
                ("code", "NOT_FOUND")
            ]
        ),
        Some(1.0),
        "{text}"
    );
    // A histogram: buckets up to +Inf holding every call, and no quantiles.
    assert_eq!(
        sample(
            &text,
            "tp_grpc_server_request_duration_seconds_bucket",
            &[ok[0], ok[1], ok[2], ("le", "+Inf")]
        ),
        Some(2.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            "tp_grpc_server_request_duration_seconds_bucket",
            &[ok[0], ok[1], ok[2], ("le", "0.00025")]
        )
        .is_some(),
        "the shared buckets: {text}"
    );
    assert!(!text.contains("quantile="), "{text}");

    // The wiki service: an ingest, a query and an action that does not exist.
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let wiki = WikiProcess::start_with_args(&["--metrics-listen", &metrics_addr]).await;
    let ingest = json!({"action": "ingest", "source": {"type": "text",
        "text": "Lisbon is the capital of Portugal.", "source_label": "atlas"}});
    invoke_wiki(&wiki.addr, "acme", ingest).await.unwrap();
    invoke_wiki(
        &wiki.addr,
        "acme",
        json!({"action": "query", "question": "What is the capital of Portugal?"}),
    )
    .await
    .unwrap();
    let bogus = invoke_wiki(&wiki.addr, "acme", json!({"action": "drop_everything_now"}))
        .await
        .unwrap_err();
    assert_eq!(bogus.code(), tonic::Code::InvalidArgument, "{bogus:?}");

    let text = scrape(&metrics_addr).await;
    for action in ["ingest", "query"] {
        assert_eq!(
            sample(
                &text,
                "tp_wiki_call_duration_seconds_count",
                &[("action", action), ("code", "OK")]
            ),
            Some(1.0),
            "{action}: {text}"
        );
    }
    assert_eq!(
        sample(
            &text,
            "tp_wiki_call_duration_seconds_count",
            &[("action", "other"), ("code", "INVALID_ARGUMENT")]
        ),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains("drop_everything_now"), "{text}");
    assert_eq!(
        sample(
            &text,
            "tp_grpc_server_requests_total",
            &[
                ("server", "wiki"),
                ("method", "/toolplane.v1.Executor/Invoke"),
                ("code", "OK")
            ]
        ),
        // A stream's status travels in its trailers: the head of the refused call said OK.
        Some(3.0),
        "{text}"
    );
}
