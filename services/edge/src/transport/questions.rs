//! Asking a 2025-xx client something in the middle of a tool call — elicitation, sampling,
//! roots — on a stateless edge.
//!
//! Before 2026-07-28 a server asks by sending a JSON-RPC request on the call's SSE stream; the
//! client answers with a separate POST that carries only the request's id (the edge issues no
//! session id), and that POST may reach any replica. So the edge gives every question a random
//! id of its own (`tp-` and 128 bits), the id of the request on the stream; the replica that receives the answer delivers it to the
//! waiting call in process, or through Redis (a `q:<id>` key says which caller may answer;
//! `answers` is the channel every edge listens on).
//!
//! Only the caller the question was put to (the same tenant and role) may answer it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::shared::Shared;

/// Prefix of every question id the edge issues.
pub const ID_PREFIX: &str = "tp-";

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
            // In a cluster the count is the subscribers of the node that took the message;
            // the question's owner was checked above.
            Some(receivers) if receivers > 0 || shared.is_cluster() => Ok(()),
            _ => Err(Refused::Unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

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
