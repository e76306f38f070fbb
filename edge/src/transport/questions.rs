//! Asking a 2025-xx client something in the middle of a tool call — elicitation, sampling,
//! roots — on a stateless edge.
//!
//! Before 2026-07-28 a server asks by sending a JSON-RPC request on the call's SSE stream; the
//! client answers with a separate POST that carries only the request's id (the edge issues no
//! session id), and that POST may reach any replica. So the edge gives every question a random
//! id of its own (`tp-` and 128 bits), rewritten into the outgoing request on the stream
//! ([`StreamIds`], [`rewrite_ids`]); the replica that receives the answer delivers it to the
//! waiting call in process, or through Redis (a `q:<id>` key says which caller may answer;
//! `answers` is the channel every edge listens on).
//!
//! Only the caller the question was put to (the same tenant and role) may answer it.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::shared::Shared;

/// Prefix of every question id the edge issues.
pub const ID_PREFIX: &str = "tp-";

/// The ids to give, in order, to the questions a request's SSE stream carries (the MCP
/// transport numbers them per request; the edge replaces those numbers).
#[derive(Debug, Clone, Default)]
pub struct StreamIds(Arc<Mutex<VecDeque<String>>>);

impl StreamIds {
    /// The next question on this stream gets `id`.
    pub fn push(&self, id: String) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(id);
    }

    fn pop(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }
}

struct Waiting {
    tenant: String,
    role: String,
    answer: oneshot::Sender<Value>,
}

/// Questions waiting for an answer on this edge.
pub struct Questions {
    waiting: Mutex<HashMap<String, Waiting>>,
    shared: Option<Arc<Shared>>,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions").finish_non_exhaustive()
    }
}

/// What travels on the Redis channel.
#[derive(Debug, Serialize, Deserialize)]
struct Relayed {
    id: String,
    tenant: String,
    role: String,
    message: Value,
}

/// Why an answer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No question with this id is waiting (answered, timed out, or never asked).
    Unknown,
    /// Another tenant or role asked it.
    NotYours,
}

/// A question being waited for; forgets it when dropped.
pub struct Asked {
    /// The question's id.
    pub id: String,
    /// Resolves to the client's JSON-RPC response (result or error).
    pub answer: oneshot::Receiver<Value>,
    questions: Arc<Questions>,
}

impl std::fmt::Debug for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asked")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Asked {
    fn drop(&mut self) {
        self.questions
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        if let Some(shared) = self.questions.shared.clone() {
            let key = shared.key(&["q", &self.id]);
            tokio::spawn(async move { shared.del(&key).await });
        }
    }
}

impl Questions {
    /// Questions of one edge; with Redis, answers that land on other replicas reach it.
    pub fn new(shared: Option<Arc<Shared>>) -> Arc<Questions> {
        let questions = Arc::new(Questions {
            waiting: Mutex::new(HashMap::new()),
            shared: shared.clone(),
        });
        if let Some(shared) = shared {
            let weak = Arc::downgrade(&questions);
            let channel = shared.key(&["answers"]);
            shared.listen(channel, move |payload| {
                let Some(questions) = weak.upgrade() else {
                    return false;
                };
                if let Ok(relayed) = serde_json::from_slice::<Relayed>(payload) {
                    let _ = questions.deliver(
                        &relayed.id,
                        &relayed.tenant,
                        &relayed.role,
                        relayed.message,
                    );
                }
                true
            });
        }
        questions
    }

    /// Registers a question for (tenant, role), valid for `ttl`.
    pub async fn ask(self: &Arc<Self>, tenant: &str, role: &str, ttl: Duration) -> Asked {
        let id = format!("{ID_PREFIX}{}", hex::encode(rand::random::<[u8; 16]>()));
        let (sender, receiver) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.clone(),
                Waiting {
                    tenant: tenant.to_owned(),
                    role: role.to_owned(),
                    answer: sender,
                },
            );
        if let Some(shared) = &self.shared {
            shared
                .set(
                    &shared.key(&["q", &id]),
                    format!("{tenant}\0{role}").as_bytes(),
                    ttl,
                )
                .await;
        }
        Asked {
            id,
            answer: receiver,
            questions: Arc::clone(self),
        }
    }

    fn deliver(&self, id: &str, tenant: &str, role: &str, message: Value) -> Result<(), Refused> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        match waiting.get(id) {
            None => return Err(Refused::Unknown),
            Some(w) if w.tenant != tenant || w.role != role => return Err(Refused::NotYours),
            Some(_) => {}
        }
        if let Some(w) = waiting.remove(id) {
            let _ = w.answer.send(message);
        }
        Ok(())
    }

    /// Delivers a client's answer (a JSON-RPC response) from (tenant, role) to the call waiting
    /// for it, on this edge or, through Redis, on another.
    pub async fn answer(
        &self,
        id: &str,
        tenant: &str,
        role: &str,
        message: Value,
    ) -> Result<(), Refused> {
        match self.deliver(id, tenant, role, message.clone()) {
            Err(Refused::Unknown) => {}
            other => return other,
        }
        let Some(shared) = &self.shared else {
            return Err(Refused::Unknown);
        };
        let owner = shared
            .get(&shared.key(&["q", id]))
            .await
            .ok_or(Refused::Unknown)?;
        if owner != format!("{tenant}\0{role}").as_bytes() {
            return Err(Refused::NotYours);
        }
        let relayed = Relayed {
            id: id.to_owned(),
            tenant: tenant.to_owned(),
            role: role.to_owned(),
            message,
        };
        let payload = serde_json::to_vec(&relayed).map_err(|_| Refused::Unknown)?;
        match shared.publish(&shared.key(&["answers"]), &payload).await {
            Some(receivers) if receivers > 0 => Ok(()),
            _ => Err(Refused::Unknown),
        }
    }
}

/// Rewrites the ids of server requests on an SSE body with the ids in `ids`, in order; every
/// other byte passes through unchanged.
pub fn rewrite_ids(body: axum::body::Body, ids: StreamIds) -> axum::body::Body {
    axum::body::Body::new(Rewriter {
        inner: body,
        ids,
        pending: Vec::new(),
    })
}

struct Rewriter {
    inner: axum::body::Body,
    ids: StreamIds,
    pending: Vec<u8>,
}

impl Rewriter {
    /// Complete events (up to the last blank line) of what has arrived, rewritten.
    fn take_events(&mut self, end: bool) -> Option<Bytes> {
        let cut = if end {
            self.pending.len()
        } else {
            self.pending
                .windows(2)
                .rposition(|w| w == b"\n\n")
                .map(|i| i + 2)?
        };
        if cut == 0 {
            return None;
        }
        let events: Vec<u8> = self.pending.drain(..cut).collect();
        let mut out = Vec::with_capacity(events.len() + 64);
        for line in events.split_inclusive(|b| *b == b'\n') {
            match line.strip_prefix(b"data:") {
                Some(data) => match self.rewrite(data) {
                    Some(rewritten) => {
                        out.extend_from_slice(b"data: ");
                        out.extend_from_slice(&rewritten);
                        out.push(b'\n');
                    }
                    None => out.extend_from_slice(line),
                },
                None => out.extend_from_slice(line),
            }
        }
        Some(Bytes::from(out))
    }

    fn rewrite(&self, data: &[u8]) -> Option<Vec<u8>> {
        let text = std::str::from_utf8(data).ok()?.trim();
        if !text.contains("\"method\"") {
            return None;
        }
        let mut message: serde_json::Map<String, Value> = serde_json::from_str(text).ok()?;
        if !message.contains_key("method") || !message.contains_key("id") {
            return None;
        }
        let id = self.ids.pop()?;
        message.insert("id".into(), Value::String(id));
        serde_json::to_vec(&message).ok()
    }
}

impl http_body::Body for Rewriter {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        loop {
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        self.pending.extend_from_slice(&data);
                        if let Some(events) = self.take_events(false) {
                            return Poll::Ready(Some(Ok(http_body::Frame::data(events))));
                        }
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => {
                    return Poll::Ready(
                        self.take_events(true)
                            .map(|rest| Ok(http_body::Frame::data(rest))),
                    );
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use serde_json::json;

    #[tokio::test]
    async fn server_requests_get_the_edges_ids_and_nothing_else_changes() {
        let ids = StreamIds::default();
        ids.push("tp-a".into());
        ids.push("tp-b".into());
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")),
            Ok(Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"sampling/create")),
            Ok(Bytes::from_static(b"Message\",\"params\":{}}\n\n: keep-alive\n\n")),
            Ok(Bytes::from_static(b"id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n\n")),
            Ok(Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n")),
        ];
        let body = axum::body::Body::from_stream(futures::stream::iter(chunks));
        let out = rewrite_ids(body, ids).collect().await.unwrap().to_bytes();
        let text = String::from_utf8(out.to_vec()).unwrap();
        let events: Vec<&str> = text.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.len(), 5, "{text}");
        assert!(events[0].contains("notifications/progress"));
        let data = |event: &str| -> Value {
            let line = event.lines().find(|l| l.starts_with("data:")).unwrap();
            serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap()
        };
        assert_eq!(data(events[1])["id"], "tp-a");
        assert_eq!(events[2], ": keep-alive");
        assert!(events[3].starts_with("id: 7\n"));
        assert_eq!(data(events[3])["id"], "tp-b");
        assert_eq!(
            data(events[4]),
            json!({"jsonrpc": "2.0", "id": 5, "result": {}})
        );
    }

    #[tokio::test]
    async fn answers_reach_only_the_question_of_the_same_caller() {
        let questions = Questions::new(None);
        let asked = questions
            .ask("acme", "collector", Duration::from_secs(5))
            .await;
        assert!(asked.id.starts_with(ID_PREFIX) && asked.id.len() == 35);
        assert_eq!(
            questions
                .answer(&asked.id, "globex", "collector", json!({}))
                .await,
            Err(Refused::NotYours)
        );
        assert_eq!(
            questions
                .answer("tp-nope", "acme", "collector", json!({}))
                .await,
            Err(Refused::Unknown)
        );
        questions
            .answer(&asked.id, "acme", "collector", json!({"result": 1}))
            .await
            .unwrap();
        let mut asked = asked;
        let id = asked.id.clone();
        assert_eq!((&mut asked.answer).await.unwrap(), json!({"result": 1}));
        // Answered once: a second answer finds nothing.
        assert_eq!(
            questions.answer(&id, "acme", "collector", json!({})).await,
            Err(Refused::Unknown)
        );
    }
}
