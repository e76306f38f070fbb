//! Approvals mid-call (ADR 0013): a call an approval rule of the tenant covers is forwarded only
//! after the caller's client says yes to a question the edge puts to it — an elicitation on the
//! call's stream (2025-06-18, 2025-11-25), or an input-required result whose sealed
//! `requestState` records that the question was asked and then that it was approved
//! (2026-07-28: no state on any edge, so the retry may land on another one). A decline, a
//! timeout, or a client that cannot be asked is a tool error naming the rule; nothing is
//! forwarded.

use super::outcome::Outcome;
use super::validate::declared_capabilities;
use super::*;
use crate::transport::request_state::{self, ApprovalSeal};
use tp_proto::clock::now_ms;

/// The key of the approval question among a call's input requests.
pub(super) const APPROVAL_KEY: &str = "toolplane_approval";

/// Longest shown value of one argument, in characters.
const SHOWN_VALUE_CHARS: usize = 200;

/// A call cleared to go: the executor's state from the retry, the seal later rounds carry, and
/// what the audit records.
pub(super) struct Approved {
    pub state: Vec<u8>,
    pub seal: ApprovalSeal,
    pub record: pb::ApprovalRecord,
}

/// A call that is not forwarded (yet): what the client gets, and what the audit records.
pub(super) struct Held {
    pub outcome: Outcome,
    pub record: pb::ApprovalRecord,
}

/// One call an approval rule covers, and what the question shows of it.
pub(super) struct Pending<'a> {
    pub rule: &'a pb::ApprovalRule,
    pub tool: &'a str,
    pub action: &'a str,
    pub arguments: &'a Value,
    pub identity: &'a Identity,
    pub binding: &'a [u8],
}

impl<'a> Pending<'a> {
    /// The call of `tool`'s `action` by `identity`, when a rule of `registry` covers it.
    pub(super) fn of(
        registry: &'a Registry,
        identity: &'a Identity,
        tool: &'a str,
        action: &'a str,
        arguments: &'a Value,
        binding: &'a [u8],
    ) -> Option<Pending<'a>> {
        registry
            .approval(tool, action, arguments)
            .map(|rule| Pending {
                rule,
                tool,
                action,
                arguments,
                identity,
                binding,
            })
    }

    /// The tool (and action) as the question and errors name it.
    fn called(&self) -> String {
        if self.action.is_empty() {
            self.tool.to_owned()
        } else {
            format!("{} (action {})", self.tool, self.action)
        }
    }

    /// The question: the call, the rule's reason, the values of the arguments the rule shows
    /// (clipped) and the names of the others.
    pub(super) fn question(&self) -> String {
        let mut shown = Vec::new();
        let mut named = Vec::new();
        if let Value::Object(arguments) = self.arguments {
            for (name, value) in arguments {
                if self.rule.show.iter().any(|s| s == name) {
                    let text = value
                        .as_str()
                        .map_or_else(|| value.to_string(), str::to_owned);
                    let mut clipped: String = text.chars().take(SHOWN_VALUE_CHARS).collect();
                    if clipped.len() < text.len() {
                        clipped.push('…');
                    }
                    shown.push(format!("{name}: {clipped}"));
                } else if name != "action" || self.action.is_empty() {
                    named.push(name.as_str());
                }
            }
        }
        let mut question = format!(
            "Approve this call of {}? Approval is required: {}.",
            self.called(),
            self.rule.reason.trim_end_matches('.')
        );
        if !shown.is_empty() {
            question.push('\n');
            question.push_str(&shown.join("\n"));
        }
        if !named.is_empty() {
            question.push_str(&format!("\nAlso given (not shown): {}.", named.join(", ")));
        }
        question
    }

    /// The elicitation the client is asked, as an input request.
    fn elicitation(&self, question: &str) -> Value {
        json!({
            "method": "elicitation/create",
            "params": {
                "message": question,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "approve": {
                            "type": "boolean",
                            "title": "Approve",
                            "description": format!("Run {} now", self.called()),
                        }
                    },
                    "required": ["approve"]
                }
            }
        })
    }

    fn record(&self, state: pb::ApprovalState, shown: &str, at_ms: u64) -> pb::ApprovalRecord {
        pb::ApprovalRecord {
            state: state as i32,
            reason: self.rule.reason.clone(),
            shown: shown.to_owned(),
            answered_by: if at_ms == 0 {
                String::new()
            } else {
                self.identity.key_id.clone()
            },
            answered_at_ms: at_ms,
        }
    }

    /// A refusal: a tool error naming the rule, with the audit code and record.
    fn refused(&self, state: pb::ApprovalState, why: &str, code: &str, at_ms: u64) -> Box<Held> {
        let message = format!(
            "{} was not run: it needs approval ({}) and {why}. Nothing was forwarded.",
            self.called(),
            self.rule.reason.trim_end_matches('.')
        );
        Box::new(Held {
            outcome: Outcome::error(message, pb::CallOutcome::Rejected, code),
            record: self.record(state, &self.question(), at_ms),
        })
    }

    fn timeout_ms(&self) -> u64 {
        u64::from(self.rule.timeout_secs.max(1)) * 1000
    }
}

/// What the client answered: approved, or why not.
fn verdict(answer: &Value) -> Result<(), &'static str> {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => {
            let approve = answer.get("content").and_then(|c| c.get("approve"));
            if approve.and_then(Value::as_bool) == Some(true) {
                Ok(())
            } else {
                Err("the client answered without approving")
            }
        }
        Some("decline") => Err("the client declined it"),
        Some("cancel") => Err("the client cancelled the question"),
        _ => Err("the client's answer was not an elicitation result"),
    }
}

/// What a call carries on once cleared: the executor's state and, when a rule applied, the
/// approval's seal and record.
pub(super) type Cleared = (Vec<u8>, Option<(ApprovalSeal, pb::ApprovalRecord)>);

impl McpHandler {
    /// Clears a call: one no rule covers goes on with the state its retry carried; one a rule
    /// covers is asked about first (2026-07-28: from its retry; 2025-xx: on its stream).
    pub(super) async fn clear(
        &self,
        pending: Option<&Pending<'_>>,
        opened: (Vec<u8>, Option<ApprovalSeal>),
        responses: &mut Option<InputResponses>,
        ctx: &CallContext<'_>,
    ) -> Result<Cleared, Box<Held>> {
        let Some(call) = pending else {
            return Ok((opened.0, None));
        };
        let approved = if stateless(ctx) {
            self.approve_stateless(call, opened, responses, ctx)?
        } else {
            self.approve_on_stream(call, ctx).await?
        };
        Ok((approved.state, Some((approved.seal, approved.record))))
    }

    /// Clears a 2026-07-28 call an approval rule covers, from what its retry carries: an
    /// approval sealed by an edge (still valid), an answer to the question an edge sealed as
    /// asked, or nothing (the question is put now, as an input-required result).
    fn approve_stateless(
        &self,
        call: &Pending<'_>,
        opened: (Vec<u8>, Option<ApprovalSeal>),
        responses: &mut Option<InputResponses>,
        ctx: &CallContext<'_>,
    ) -> Result<Approved, Box<Held>> {
        let now = now_ms();
        let question = call.question();
        let answer = responses.as_mut().and_then(|r| r.remove(APPROVAL_KEY));
        match opened {
            (state, Some(seal)) if seal.granted => {
                if now > seal.until_ms {
                    return Err(call.refused(
                        pb::ApprovalState::TimedOut,
                        "its approval has expired; call it again to be asked again",
                        "approval_expired",
                        0,
                    ));
                }
                Ok(Approved {
                    state,
                    seal,
                    record: call.record(pb::ApprovalState::Approved, &question, seal.at_ms),
                })
            }
            (_, Some(seal)) if answer.is_some() => {
                if now > seal.until_ms {
                    return Err(call.refused(
                        pb::ApprovalState::TimedOut,
                        &format!(
                            "the answer came after the question closed ({} s)",
                            call.rule.timeout_secs
                        ),
                        "approval_timed_out",
                        now,
                    ));
                }
                let answer = answer.unwrap_or_default();
                if let Err(why) = verdict(&answer) {
                    return Err(call.refused(
                        pb::ApprovalState::Declined,
                        why,
                        "approval_declined",
                        now,
                    ));
                }
                let seal = ApprovalSeal {
                    granted: true,
                    until_ms: now + call.timeout_ms(),
                    at_ms: now,
                };
                Ok(Approved {
                    state: Vec::new(),
                    seal,
                    record: call.record(pb::ApprovalState::Approved, &question, now),
                })
            }
            // First call, a retry that does not answer, or a state from before the rule.
            _ => Err(self.ask_stateless(call, &question, ctx)),
        }
    }

    /// The question as an input-required result, its state sealed as asked.
    fn ask_stateless(
        &self,
        call: &Pending<'_>,
        question: &str,
        ctx: &CallContext<'_>,
    ) -> Box<Held> {
        let declared = declared_capabilities(ctx).unwrap_or_default();
        let requests = json!({ APPROVAL_KEY: call.elicitation(question) });
        let requests = match request_state::input_requests(&requests, Some(&declared)) {
            Ok(requests) => requests,
            Err(_) => {
                return call.refused(
                    pb::ApprovalState::Unsupported,
                    "this client declared no elicitation capability, so it cannot be asked",
                    "approval_unsupported",
                    0,
                );
            }
        };
        let seal = ApprovalSeal {
            granted: false,
            until_ms: now_ms() + call.timeout_ms(),
            at_ms: 0,
        };
        let request_state = self.state.seal.seal_with(call.binding, &[], Some(seal));
        let result = InputRequiredResult::new(Some(requests), Some(request_state));
        Box::new(Held {
            outcome: Outcome {
                result: CallToolResponse::InputRequired(result),
                audit: pb::CallOutcome::InputRequired,
                code: String::new(),
            },
            record: call.record(pb::ApprovalState::Asked, question, 0),
        })
    }

    /// Clears a 2025-xx call an approval rule covers by asking the client on the call's stream
    /// and waiting for its answer (the rule's timeout, within the request's).
    async fn approve_on_stream(
        &self,
        call: &Pending<'_>,
        ctx: &CallContext<'_>,
    ) -> Result<Approved, Box<Held>> {
        let question = call.question();
        // What the client declared at `initialize` (kept in its session id); a request without
        // a session is asked all the same, and a client that cannot answer refuses the question.
        let declared = declared_capabilities(ctx);
        if declared
            .as_deref()
            .is_some_and(|d| !d.contains(&"elicitation"))
        {
            return Err(call.refused(
                pb::ApprovalState::Unsupported,
                "this client declared no elicitation capability, so it cannot be asked",
                "approval_unsupported",
                0,
            ));
        }
        let requests = json!({ APPROVAL_KEY: call.elicitation(&question) });
        let request = request_state::input_requests(&requests, declared.as_deref())
            .ok()
            .and_then(|mut r| r.remove(APPROVAL_KEY));
        let Some(rmcp::model::InputRequest::Elicitation(request)) = request else {
            return Err(call.refused(
                pb::ApprovalState::Unsupported,
                "the edge could not build its question",
                "approval_unsupported",
                0,
            ));
        };
        let timeout = std::time::Duration::from_millis(call.timeout_ms())
            .min(self.state.config.request_timeout());
        let deadline = Instant::now() + timeout;
        let identity = call.identity;
        let mut question_slot = self
            .state
            .questions
            .ask(&identity.tenant, &identity.role, timeout)
            .await;
        if let Err(e) = ctx.ask(question_slot.id.clone(), request.into()).await {
            return Err(call.refused(
                pb::ApprovalState::Unsupported,
                &format!("the question could not be sent ({e})"),
                "approval_unsupported",
                0,
            ));
        }
        let answer = tokio::time::timeout_at(deadline.into(), &mut question_slot.answer).await;
        let now = now_ms();
        let message = match answer {
            Ok(Ok(message)) => message,
            Ok(Err(_)) | Err(_) => {
                return Err(call.refused(
                    pb::ApprovalState::TimedOut,
                    &format!("nobody answered within {} s", timeout.as_secs()),
                    "approval_timed_out",
                    0,
                ));
            }
        };
        let verdict = match message.get("result") {
            Some(result) => verdict(result),
            None => Err("the client refused the question"),
        };
        if let Err(why) = verdict {
            return Err(call.refused(pb::ApprovalState::Declined, why, "approval_declined", now));
        }
        Ok(Approved {
            state: Vec::new(),
            seal: ApprovalSeal {
                granted: true,
                until_ms: now + call.timeout_ms(),
                at_ms: now,
            },
            record: call.record(pb::ApprovalState::Approved, &question, now),
        })
    }
}
