//! A minimal MCP-over-HTTP client for tests: raw JSON-RPC POSTs with full control over
//! headers, decoding JSON and SSE responses.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// A response: status, headers, JSON-RPC messages (one for JSON, several for SSE).
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// HTTP status.
    pub status: u16,
    /// The answer's headers.
    pub headers: http::HeaderMap,
    /// The raw body.
    pub body: String,
    /// JSON-RPC messages in the body.
    pub messages: Vec<Value>,
}

impl HttpReply {
    /// The `Content-Type` header as sent (empty when there is none).
    pub fn content_type(&self) -> String {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    }

    /// The message answering `id` (the last message with an `id`).
    pub fn response(&self) -> &Value {
        self.messages
            .iter()
            .rev()
            .find(|m| m.get("id").is_some())
            .unwrap_or(&Value::Null)
    }

    /// `result` of the response.
    pub fn result(&self) -> &Value {
        &self.response()["result"]
    }

    /// `error` of the response.
    pub fn error(&self) -> &Value {
        &self.response()["error"]
    }

    /// Notifications that came before the response.
    pub fn notifications(&self) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|m| m.get("id").is_none())
            .collect()
    }
}

/// A client bound to one MCP endpoint, key and protocol version.
#[derive(Debug, Clone)]
pub struct McpHttp {
    client: Client<HttpConnector, Full<Bytes>>,
    /// `http://addr/mcp`.
    pub url: String,
    /// Bearer key (None = no Authorization header).
    pub key: Option<String>,
    /// Protocol version to speak: `2025-11-25` style versions send `MCP-Protocol-Version`;
    /// `2026-07-28` also sends `Mcp-Method`/`Mcp-Name` and the `_meta` keys.
    pub version: String,
}

fn parse_messages(content_type: &str, body: &str) -> Vec<Value> {
    if content_type.starts_with("text/event-stream") {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(body)
            .map(|v| vec![v])
            .unwrap_or_default()
    }
}

// === impl McpHttp ===

impl McpHttp {
    /// A client for `addr` (`127.0.0.1:port`).
    pub fn new(addr: &str, key: Option<&str>, version: &str) -> McpHttp {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(5))
            .build(connector);
        McpHttp {
            client,
            url: format!("http://{addr}/mcp"),
            key: key.map(str::to_owned),
            version: version.to_owned(),
        }
    }

    /// The same client with another key.
    pub fn with_key(&self, key: Option<&str>) -> McpHttp {
        McpHttp {
            key: key.map(str::to_owned),
            ..self.clone()
        }
    }

    /// Whether this client speaks the session-less 2026-07-28 protocol.
    pub fn stateless(&self) -> bool {
        self.version.as_str() >= "2026-07-28"
    }

    /// Sends a raw body with extra headers.
    pub async fn raw(&self, body: impl Into<Bytes>, headers: &[(&str, &str)]) -> HttpReply {
        let mut builder = http::Request::post(&self.url);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder.body(Full::new(body.into())).expect("request");
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.request(request))
            .await
            .expect("response within 30 s")
            .expect("http response");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let messages = parse_messages(&content_type, &body);
        HttpReply {
            status,
            headers,
            body,
            messages,
        }
    }

    /// The headers and body of one JSON-RPC request in this client's protocol version.
    fn prepare(&self, id: u64, method: &str, params: Value) -> (Vec<(String, String)>, Vec<u8>) {
        let mut params = params;
        let mut headers: Vec<(String, String)> = vec![
            ("content-type".into(), "application/json".into()),
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
            ("mcp-protocol-version".into(), self.version.clone()),
        ];
        if let Some(key) = &self.key {
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        if self.stateless() {
            headers.push(("mcp-method".into(), method.into()));
            // SEP-2243: the name a request targets travels in `Mcp-Name` as well.
            let name = match method {
                "tools/call" | "prompts/get" => params.get("name"),
                "resources/read" => params.get("uri"),
                _ => None,
            };
            if let Some(name) = name.and_then(Value::as_str) {
                headers.push(("mcp-name".into(), name.into()));
            }
            let object = params.as_object_mut().expect("params object");
            let meta = object.entry("_meta").or_insert_with(|| json!({}));
            meta["io.modelcontextprotocol/protocolVersion"] = json!(self.version);
            meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "tp-test", "version": "1"});
            if meta
                .get("io.modelcontextprotocol/clientCapabilities")
                .is_none()
            {
                meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
            }
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (headers, serde_json::to_vec(&body).expect("json"))
    }

    /// Sends one JSON-RPC request with the headers of this client's protocol version.
    pub async fn request(&self, id: u64, method: &str, params: Value) -> HttpReply {
        let (headers, body) = self.prepare(id, method, params);
        let borrowed: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.raw(body, &borrowed).await
    }

    /// Sends a request whose response is a long-lived SSE stream (e.g. `subscriptions/listen`)
    /// and returns the HTTP status and the JSON-RPC messages as they arrive. The stream closes
    /// when the receiver is dropped.
    pub async fn stream(
        &self,
        id: u64,
        method: &str,
        params: Value,
    ) -> (u16, tokio::sync::mpsc::UnboundedReceiver<Value>) {
        self.stream_with(id, method, params, &[]).await
    }

    /// [`Self::stream`] with headers replaced (or added) by `overrides`.
    pub async fn stream_with(
        &self,
        id: u64,
        method: &str,
        params: Value,
        overrides: &[(&str, &str)],
    ) -> (u16, tokio::sync::mpsc::UnboundedReceiver<Value>) {
        let (mut headers, body) = self.prepare(id, method, params);
        headers.retain(|(name, _)| !overrides.iter().any(|(o, _)| o.eq_ignore_ascii_case(name)));
        headers.extend(
            overrides
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let mut builder = http::Request::post(&self.url);
        for (name, value) in &headers {
            builder = builder.header(name, value);
        }
        let request = builder.body(Full::new(Bytes::from(body))).expect("request");
        let response = tokio::time::timeout(Duration::from_secs(30), self.client.request(request))
            .await
            .expect("response headers within 30 s")
            .expect("http response");
        let status = response.status().as_u16();
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let mut body = response.into_body();
        tokio::spawn(async move {
            let mut buffer = String::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                buffer.push_str(&String::from_utf8_lossy(&data));
                while let Some(end) = buffer.find('\n') {
                    let line: String = buffer.drain(..=end).collect();
                    let parsed = line
                        .strip_prefix("data:")
                        .and_then(|data| serde_json::from_str::<Value>(data.trim()).ok());
                    if let Some(message) = parsed
                        && sender.send(message).is_err()
                    {
                        return;
                    }
                }
            }
        });
        (status, receiver)
    }

    /// `tools/list`, all pages; the tool names in order.
    pub async fn list_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        for id in 1..1000 {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let reply = self.request(id, "tools/list", params).await;
            assert_eq!(reply.status, 200, "tools/list: {}", reply.body);
            let result = reply.result();
            assert!(result.is_object(), "tools/list failed: {}", reply.body);
            for tool in result["tools"].as_array().expect("tools") {
                names.push(tool["name"].as_str().expect("name").to_owned());
            }
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(next) => cursor = Some(next.to_owned()),
                None => return names,
            }
        }
        panic!("tools/list did not end");
    }

    /// `tools/call`.
    pub async fn call(&self, name: &str, arguments: Value) -> HttpReply {
        self.request(
            7,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }
}
