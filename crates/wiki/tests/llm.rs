//! The optional LLM engine against a local fake of an OpenAI-compatible API.
#![allow(clippy::unwrap_used, reason = "test code")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_wiki::{Llm, LlmConfig, Source, Storage, Wiki};

/// A fake `/v1/chat/completions`: answers `status` with a fixed completion; counts calls and
/// keeps the last request (headers and body).
async fn fake_api(status: u16) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(std::sync::Mutex::new(String::new()));
    let (counter, keep) = (Arc::clone(&calls), Arc::clone(&last));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (counter, keep) = (Arc::clone(&counter), Arc::clone(&keep));
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buffer = [0u8; 65536];
                loop {
                    let n = socket.read(&mut buffer).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    data.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&data).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() < length {
                        continue;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    *keep.lock().unwrap() = text.clone();
                    let reply = json!({
                        "model": "fake-model-1",
                        "choices": [{"message": {"role": "assistant", "content": "Acme Corp's board approved a Berlin office; the company dates from 1999."}}],
                        "usage": {"prompt_tokens": 120, "completion_tokens": 30}
                    })
                    .to_string();
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                        reply.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                    return;
                }
            });
        }
    });
    (format!("http://{addr}/v1"), calls, last)
}

fn llm(base_url: String) -> Llm {
    Llm::new(LlmConfig {
        base_url,
        model: "configured-model".into(),
        api_key: Some("sk-test".into()),
        usd_per_1k_input: 0.5,
        usd_per_1k_output: 1.5,
        max_output_tokens: 200,
        timeout: Duration::from_secs(5),
    })
    .unwrap()
}

fn today() -> String {
    "2026-11-23".to_owned()
}

fn memo(cap: f64) -> Source {
    Source {
        text: "The board of Acme Corp met in Berlin. The board approved a new office in Berlin. Acme Corp was founded in 1999.".into(),
        label: "Q3 board memo".into(),
        doc_type: "auto".into(),
        cost_cap_usd: cap,
        ..Default::default()
    }
}

#[tokio::test]
async fn within_the_cap_the_model_summarises_and_usage_is_priced() {
    let (url, calls, last) = fake_api(200).await;
    let wiki = Wiki::new(Storage::memory())
        .with_today(today)
        .with_llm(llm(url));
    let result = wiki.ingest("acme", memo(1.0)).await.unwrap();
    assert_eq!(result["engine"], "llm", "{result}");
    assert_eq!(result["llm"]["model"], "fake-model-1");
    assert_eq!(result["llm"]["prompt_tokens"], 120);
    let expected = 120.0 / 1000.0 * 0.5 + 30.0 / 1000.0 * 1.5;
    assert!(
        (result["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{result}"
    );
    let request = last.lock().unwrap().clone();
    assert!(
        request
            .to_lowercase()
            .contains("authorization: bearer sk-test"),
        "{request}"
    );
    let body: Value = serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["model"], "configured-model");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("founded in 1999")
    );
    let page = wiki
        .storage()
        .get("wiki/acme/wiki/sources/q3-board-memo.md")
        .await
        .unwrap()
        .unwrap();
    assert!(
        page.contains("## Summary by fake-model-1\nAcme Corp's board approved"),
        "{page}"
    );
    // A replay calls nothing.
    let again = wiki.ingest("acme", memo(1.0)).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(again["cost_usd"], 0.0);
}

#[tokio::test]
async fn over_the_cap_nothing_is_called_and_the_deterministic_summary_stands() {
    let (url, calls, _) = fake_api(200).await;
    let wiki = Wiki::new(Storage::memory())
        .with_today(today)
        .with_llm(llm(url));
    // The estimate is at least 200 output tokens × $1.5/1k = $0.30.
    let result = wiki.ingest("acme", memo(0.05)).await.unwrap();
    assert_eq!(result["engine"], "deterministic");
    assert!(
        result["llm"]["fallback"]
            .as_str()
            .unwrap()
            .contains("over the cost cap"),
        "{result}"
    );
    assert_eq!(result["cost_usd"], 0.0);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(!result["summary"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn a_failing_api_falls_back() {
    let (url, calls, _) = fake_api(500).await;
    let wiki = Wiki::new(Storage::memory())
        .with_today(today)
        .with_llm(llm(url));
    let result = wiki.ingest("acme", memo(1.0)).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(result["engine"], "deterministic");
    assert!(
        result["llm"]["fallback"]
            .as_str()
            .unwrap()
            .contains("HTTP 500"),
        "{result}"
    );
    let page = wiki
        .storage()
        .get("wiki/acme/wiki/sources/q3-board-memo.md")
        .await
        .unwrap()
        .unwrap();
    assert!(!page.contains("Summary by"));
}
