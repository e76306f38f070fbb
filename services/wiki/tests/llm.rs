//! The optional LLM engine against a local fake of an OpenAI-compatible API.
#![allow(clippy::unwrap_used, reason = "test code")]
#![allow(clippy::too_many_lines, reason = "test code")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tp_wiki::{Llm, LlmConfig, Source, Storage, Wiki};

/// A fake `/v1/chat/completions`: answers `status` with a fixed completion; counts calls and
/// keeps the last request (headers and body).
async fn fake_api(status: u16) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<String>>) {
    let reply = json!({
        "model": "fake-model-1",
        "choices": [{"message": {"role": "assistant", "content": "Acme Corp's board approved a Berlin office; the company dates from 1999."}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30}
    })
    .to_string();
    replaying(status, reply).await
}

/// A fake API answering every request with `status` and the body `reply`.
async fn replaying(
    status: u16,
    reply: String,
) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<String>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(std::sync::Mutex::new(String::new()));
    let (counter, keep) = (Arc::clone(&calls), Arc::clone(&last));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (counter, keep) = (Arc::clone(&counter), Arc::clone(&keep));
            let reply = reply.clone();
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

const DEAL: &str = "Acme Corp signed with Initech in March 2026. Under the deal, Initech pays Acme Corp a monthly retainer of $12,000. The account is run out of the Porto studio.";

fn deal() -> Source {
    Source {
        text: DEAL.into(),
        label: "Initech deal note".into(),
        doc_type: "auto".into(),
        cost_cap_usd: 1.0,
        as_of: Some(20260320),
        ..Default::default()
    }
}

/// The structured-output answer replayed by the fake API.
fn recorded() -> String {
    let stored: Value =
        serde_json::from_str(include_str!("fixtures/llm_structured_reply.json")).unwrap();
    stored["response"].to_string()
}

#[tokio::test]
async fn structured_output_adds_claims_and_entities_the_text_supports_and_refuses_the_rest() {
    // The deterministic engine alone: no retainer claim in this prose.
    let plain = Wiki::new(Storage::memory()).with_today(today);
    plain.ingest("acme", deal()).await.unwrap();
    let unaided = plain
        .query(
            "acme",
            "What is the monthly retainer of Acme Corp?",
            5,
            "markdown",
            false,
        )
        .await
        .unwrap();
    assert!(unaided["fact"].is_null(), "{unaided}");

    let (url, calls, last) = replaying(200, recorded()).await;
    let wiki = Wiki::new(Storage::memory())
        .with_today(today)
        .with_llm(llm(url));
    let result = wiki.ingest("acme", deal()).await.unwrap();
    assert_eq!(result["engine"], "llm", "{result}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The request asks for the schema, strictly, over numbered sentences.
    let request = last.lock().unwrap().clone();
    let body: Value = serde_json::from_str(request.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["response_format"]["type"], "json_schema", "{body}");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["required"],
        json!(["summary", "entities", "claims"])
    );
    let prompt = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt
            .contains("[1] Under the deal, Initech pays Acme Corp a monthly retainer of $12,000."),
        "{prompt}"
    );

    // What the text supports entered the store; every planted mistake was refused.
    let extracted = &result["llm"]["extracted"];
    assert_eq!(extracted["claims_added"], 2, "{result}");
    assert_eq!(
        extracted["entities_added"],
        json!(["Porto studio"]),
        "{result}"
    );
    let refused: Vec<&str> = extracted["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    for expected in [
        "entity \"March\"",
        "entity \"Globex\"",
        "entity \"the client\"",
        "\"$15,000\": sentence 1 does not write it",
        "claim of sentence 9: no such sentence",
        "claim about \"Umbrella Corp\": not an entity of the source",
        "claim \"the 2026\": not an attribute",
    ] {
        assert!(
            refused.iter().any(|r| r.contains(expected)),
            "{expected} not in {refused:?}"
        );
    }
    assert_eq!(refused.len(), 7, "{refused:?}");

    // The added claim answers, with its qualifier, citing its sentence.
    let answer = wiki
        .query(
            "acme",
            "What is the monthly retainer of Acme Corp from Initech?",
            5,
            "markdown",
            false,
        )
        .await
        .unwrap();
    assert_eq!(answer["fact"]["value"], "$12,000", "{answer}");
    assert_eq!(
        answer["fact"]["cite"], "[[sources/initech-deal-note#^s1]]",
        "{answer}"
    );
    let page = wiki
        .storage()
        .get("wiki/acme/wiki/sources/initech-deal-note.md")
        .await
        .unwrap()
        .unwrap();
    assert!(page.contains("monthly retainer"), "{page}");
    assert!(!page.contains("15,000"), "{page}");
    assert!(
        wiki.storage()
            .get("wiki/acme/wiki/entities/porto-studio.md")
            .await
            .unwrap()
            .is_some()
    );
    // A prose answer (an API that ignores the schema) is a summary and nothing more: the
    // first test's fake answers prose; here, the claim count of a replay is unchanged.
    let again = wiki.ingest("acme", deal()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(again["claims"], result["claims"], "{again}");
}
