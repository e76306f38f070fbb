//! The conformance suite's input-required tools (MCP SEP-2322): each asks the client for
//! elicitation, sampling or roots through `InputRequired`, keeps its progress in the state the
//! edge seals into `requestState`, and finishes once answered.

use super::*;

fn ask(requests: Value, state: &str) -> pb::InvokeEvent {
    pb::InvokeEvent {
        event: Some(pb::invoke_event::Event::InputRequired(pb::InputRequired {
            requests: tp_proto::json::to_struct(&requests),
            state: state.as_bytes().to_vec(),
        })),
    }
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}}})
}

fn sample_request(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}})
}

/// The text of a client's answer: an accepted elicitation's field, a sampled message's text,
/// or the roots' URIs.
fn answer_text(answer: &Value, field: &str) -> String {
    if let Some(value) = answer.get("content").and_then(|c| c.get(field)) {
        return value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
    }
    if let Some(text) = answer.pointer("/content/text").and_then(Value::as_str) {
        return text.to_owned();
    }
    if let Some(roots) = answer.get("roots").and_then(Value::as_array) {
        return roots
            .iter()
            .filter_map(|r| r.get("uri").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(", ");
    }
    answer
        .get("action")
        .map_or_else(String::new, Value::to_string)
}

/// The suite's input-required tools. `responses` are the client's answers (keys it was not
/// asked are ignored); `state` is what this executor put in the previous `InputRequired`,
/// verified by the edge. A tool asks again for whatever is still missing.
/// What an input-required tool reads of a call: its arguments, the client's answers, the
/// state it put in its previous `InputRequired`, and the capabilities the client declared.
struct Call<'a> {
    request: &'a pb::InvokeRequest,
    arguments: Value,
    responses: Value,
    state: String,
}

impl Call<'_> {
    /// The client's answer to `key`, if it gave one.
    fn answered(&self, key: &str) -> Option<&Value> {
        self.responses.get(key).filter(|v| v.is_object())
    }

    /// Whether the client declared `capability` (or declared nothing either way).
    fn declared(&self, capability: &str) -> bool {
        !self.request.client_capabilities_known
            || self
                .request
                .client_capabilities
                .iter()
                .any(|c| c == capability)
    }
}

fn name_request() -> Value {
    elicit("What is your name?", "name", "string")
}

/// The suite's input-required tools. `responses` are the client's answers (keys it was not
/// asked are ignored); `state` is what this executor put in the previous `InputRequired`,
/// verified by the edge. A tool asks again for whatever is still missing.
pub(crate) fn input_required_tool(request: &pb::InvokeRequest) -> Option<pb::InvokeEvent> {
    let call = Call {
        request,
        arguments: request
            .arguments
            .as_ref()
            .map(tp_proto::json::from_struct)
            .unwrap_or(json!({})),
        responses: request
            .input_responses
            .as_ref()
            .map(tp_proto::json::from_struct)
            .unwrap_or(json!({})),
        state: String::from_utf8_lossy(&request.state).into_owned(),
    };
    let answered = |key: &str| call.answered(key);
    let state = &call.state;
    Some(match request.tool.as_str() {
        "test_input_required_result_elicitation" => match answered("user_name") {
            Some(answer) => done(
                vec![text(format!("Hello, {}!", answer_text(answer, "name")))],
                None,
                false,
            ),
            None => ask(json!({"user_name": name_request()}), ""),
        },
        "test_input_required_result_sampling" => match answered("capital_question") {
            Some(answer) => done(
                vec![text(format!(
                    "The model answered: {}",
                    answer_text(answer, "")
                ))],
                None,
                false,
            ),
            None => ask(
                json!({"capital_question": sample_request("What is the capital of France?", 100)}),
                "",
            ),
        },
        "test_input_required_result_list_roots" => match answered("client_roots") {
            Some(answer) => done(
                vec![text(format!("Client roots: {}", answer_text(answer, "")))],
                None,
                false,
            ),
            None => ask(
                json!({"client_roots": {"method": "roots/list", "params": {}}}),
                "",
            ),
        },
        "test_input_required_result_request_state" => match (answered("confirm"), state.as_str()) {
            (Some(answer), "awaiting-confirm") => done(
                vec![text(format!(
                    "state-ok: confirmed {}",
                    answer_text(answer, "ok")
                ))],
                None,
                false,
            ),
            _ => ask(
                json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                "awaiting-confirm",
            ),
        },
        "test_input_required_result_tampered_state" => {
            match (answered("confirm"), state.as_str()) {
                (Some(_), "awaiting-confirm") => done(vec![text("state-ok")], None, false),
                _ => ask(
                    json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                    "awaiting-confirm",
                ),
            }
        }
        "test_input_required_result_multiple_inputs" => multiple_inputs(&call)?,
        "test_input_required_result_multi_round" => multi_round(&call),
        "test_input_required_result_capabilities" => capabilities(&call),
        tool => on_stream(tool, &call)?,
    })
}

/// Three questions at once; asked again for what is still missing.
fn multiple_inputs(call: &Call<'_>) -> Option<pb::InvokeEvent> {
    let answered = |key: &str| call.answered(key);
    let state = &call.state;
    Some({
        let wanted = [
            ("user_name", name_request()),
            ("greeting", sample_request("Generate a greeting", 50)),
            (
                "client_roots",
                json!({"method": "roots/list", "params": {}}),
            ),
        ];
        let missing: serde_json::Map<String, Value> = wanted
            .iter()
            .filter(|(key, _)| answered(key).is_none())
            .map(|(key, request)| ((*key).to_owned(), request.clone()))
            .collect();
        if missing.is_empty() && state == "multiple" {
            done(
                vec![text(format!(
                    "{} — name {}, roots {}",
                    answer_text(answered("greeting")?, ""),
                    answer_text(answered("user_name")?, "name"),
                    answer_text(answered("client_roots")?, "")
                ))],
                None,
                false,
            )
        } else {
            let all: serde_json::Map<String, Value> = wanted
                .into_iter()
                .map(|(key, request)| (key.to_owned(), request))
                .collect();
            ask(
                Value::Object(if state == "multiple" { missing } else { all }),
                "multiple",
            )
        }
    })
}

/// Two rounds, the second asked once the first is answered.
fn multi_round(call: &Call<'_>) -> pb::InvokeEvent {
    let answered = |key: &str| call.answered(key);
    match (call.state.as_str(), answered("step1"), answered("step2")) {
        ("round-2", _, Some(color)) => done(
            vec![text(format!(
                "Favourite color: {}",
                answer_text(color, "color")
            ))],
            None,
            false,
        ),
        ("round-1", Some(_), _) => ask(
            json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
            "round-2",
        ),
        _ => ask(
            json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
            "round-1",
        ),
    }
}

/// Asks only for what the client declared it can answer.
fn capabilities(call: &Call<'_>) -> pb::InvokeEvent {
    let answered = |key: &str| call.answered(key);
    let declared = |capability: &str| call.declared(capability);
    if answered("capital_question").is_some() || answered("user_name").is_some() {
        done(vec![text("answered")], None, false)
    } else {
        let mut requests = serde_json::Map::new();
        if declared("sampling") {
            requests.insert(
                "capital_question".into(),
                sample_request("What is the capital of France?", 100),
            );
        }
        if declared("elicitation") {
            requests.insert("user_name".into(), name_request());
        }
        if requests.is_empty() {
            done(
                vec![text(
                    "the client can answer nothing; finished without input",
                )],
                None,
                false,
            )
        } else {
            ask(Value::Object(requests), "")
        }
    }
}

/// The 2025-11-25 suite's tools that ask the client mid-call (the edge puts the questions on
/// the call's stream and calls again with the answers).
fn on_stream(tool: &str, call: &Call<'_>) -> Option<pb::InvokeEvent> {
    let answered = |key: &str| call.answered(key);
    let arguments = &call.arguments;
    Some(match tool {
        "test_sampling" => match answered("sampling") {
            Some(answer) => done(
                vec![text(format!("LLM response: {}", answer_text(answer, "")))],
                None,
                false,
            ),
            None => {
                let prompt = arguments
                    .get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or("Say hello");
                ask(json!({"sampling": sample_request(prompt, 100)}), "")
            }
        },
        "test_elicitation" => match answered("elicitation") {
            Some(answer) => done(
                vec![text(format!(
                    "User response: action={}, content={}",
                    answer.get("action").and_then(Value::as_str).unwrap_or(""),
                    answer.get("content").cloned().unwrap_or(Value::Null)
                ))],
                None,
                false,
            ),
            None => {
                let message = arguments
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("Please provide your information");
                ask(
                    json!({"elicitation": {"method": "elicitation/create", "params": {
                        "message": message,
                        "requestedSchema": {"type": "object", "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"}},
                            "required": ["username", "email"]}}}}),
                    "",
                )
            }
        },
        "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
            elicitation_form(tool, call)
        }
        _ => return None,
    })
}

/// The suite's elicitation forms: defaults of every type (SEP-1034), or every enum shape
/// (SEP-1330).
fn elicitation_form(tool: &str, call: &Call<'_>) -> pb::InvokeEvent {
    match call.answered("elicitation") {
        Some(answer) => done(
            vec![text(format!(
                "Elicitation completed: action={}, content={}",
                answer.get("action").and_then(Value::as_str).unwrap_or(""),
                answer.get("content").cloned().unwrap_or(Value::Null)
            ))],
            None,
            false,
        ),
        None => {
            let schema = if tool == "test_elicitation_sep1034_defaults" {
                json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status",
                               "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}},
                    "required": []})
            } else {
                json!({"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}}},
                    "required": []})
            };
            ask(
                json!({"elicitation": {"method": "elicitation/create", "params": {
                    "message": "Please review and update the form fields with defaults",
                    "requestedSchema": schema}}}),
                "",
            )
        }
    }
}
