//! The optional LLM engine: an OpenAI-compatible chat-completions API that reads a source's
//! numbered sentences and answers, through structured output (a JSON schema), an abstractive
//! summary, the entities it names and its claims (entity, attribute, value, unit, qualifiers,
//! sentence). Used only when configured; the deterministic engine stays the default and is
//! what the evaluation judges. What the model says is checked against the text before it
//! enters the store (see `engine::ingest::merge_extraction`): an entity must be written in the
//! source, a claim's value in the sentence it cites. An API that ignores the schema and
//! answers prose gives a summary only.
//!
//! Cost control: before calling, the input and output tokens are estimated (4 characters per
//! token, plus the prompt, plus `max_output_tokens`) and priced; over the call's
//! `cost_cap_usd` the call is not made and ingest falls back to the deterministic summary,
//! saying why. After a call, the usage the API reports is priced and returned.

use std::time::Duration;

use serde_json::{Value, json};

/// LLM settings.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// Base URL, e.g. `https://api.openai.com/v1` (the client POSTs `{base}/chat/completions`).
    pub base_url: String,
    /// Default model (a call's `model` argument overrides it).
    pub model: String,
    /// Bearer token, if the API needs one.
    pub api_key: Option<String>,
    /// Price of 1,000 input tokens in USD.
    pub usd_per_1k_input: f64,
    /// Price of 1,000 output tokens in USD.
    pub usd_per_1k_output: f64,
    /// Most output tokens asked for.
    pub max_output_tokens: u32,
    /// Call time limit.
    pub timeout: Duration,
}

/// A claim as the model states it, before it is checked against the text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Extracted {
    /// Index of the sentence it comes from (as numbered in the prompt).
    pub sentence: usize,
    /// The entity, as written in the source.
    pub entity: String,
    /// The attribute, in the document's words.
    pub attribute: String,
    /// The value, as written in the sentence.
    pub value: String,
    /// The unit, when the value has one apart from its text ("" if none).
    #[serde(default)]
    pub unit: String,
    /// What narrows the fact (a channel, a period).
    #[serde(default)]
    pub qualifiers: Vec<String>,
}

/// What the LLM step did, for the ingest result.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmOutcome {
    /// Called: the summary, what was extracted, and the priced usage.
    Summary {
        /// The model's summary.
        text: String,
        /// Entities the model names (unchecked).
        entities: Vec<String>,
        /// Claims the model states (unchecked).
        claims: Vec<Extracted>,
        /// Model used.
        model: String,
        /// Tokens the model read (for the cost).
        prompt_tokens: u64,
        /// Tokens out.
        completion_tokens: u64,
        /// Actual cost.
        cost_usd: f64,
    },
    /// Not called or failed: why; the deterministic summary stands.
    Fallback(String),
}

const PROMPT: &str = "You read a source for a knowledge wiki. Its sentences are numbered [0], [1], …\n\
Answer with JSON only, as the schema says:\n\
- summary: at most five sentences; keep names, dates and figures exact; add no fact.\n\
- entities: the names of organisations, people, places, products and other things the source is about or names, exactly as written; not labels, headings, greetings, roles, months or units.\n\
- claims: every fact that gives an attribute of an entity a value: the sentence number, the entity as written, the attribute in the document's own words, the value exactly as written in that sentence, its unit if apart from the value (else \"\"), and qualifiers such as a channel or a period (else []).\n\n";

/// The structured output asked for (OpenAI `response_format: json_schema`, strict).
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "entities": {"type": "array", "items": {"type": "string"}},
            "claims": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "sentence": {"type": "integer"},
                    "entity": {"type": "string"},
                    "attribute": {"type": "string"},
                    "value": {"type": "string"},
                    "unit": {"type": "string"},
                    "qualifiers": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["sentence", "entity", "attribute", "value", "unit", "qualifiers"],
                "additionalProperties": false
            }}
        },
        "required": ["summary", "entities", "claims"],
        "additionalProperties": false
    })
}

/// The sentences as the prompt numbers them.
fn numbered(sentences: &[String]) -> String {
    sentences
        .iter()
        .enumerate()
        .map(|(i, s)| format!("[{i}] {}\n", s.replace('\n', " ")))
        .collect()
}

/// An OpenAI-compatible client.
#[derive(Debug, Clone)]
pub struct Llm {
    config: LlmConfig,
    client: reqwest::Client,
}

impl Llm {
    /// A client with `config`.
    pub fn new(config: LlmConfig) -> Result<Llm, String> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Llm { config, client })
    }

    /// Estimated cost of reading `sentences` (USD).
    pub fn estimate(&self, sentences: &[String]) -> f64 {
        let input = (PROMPT.len() + numbered(sentences).len()).div_ceil(4) as f64;
        let output = f64::from(self.config.max_output_tokens);
        input / 1000.0 * self.config.usd_per_1k_input
            + output / 1000.0 * self.config.usd_per_1k_output
    }

    /// Reads `sentences` (a summary, entities, claims) unless the estimate is over
    /// `cost_cap_usd`.
    pub async fn read(
        &self,
        sentences: &[String],
        model: Option<&str>,
        cost_cap_usd: f64,
    ) -> LlmOutcome {
        let estimate = self.estimate(sentences);
        if estimate > cost_cap_usd {
            return LlmOutcome::Fallback(format!(
                "estimated ${estimate:.4} is over the cost cap ${cost_cap_usd:.4}; used the deterministic summary"
            ));
        }
        let model = model
            .filter(|m| !m.is_empty())
            .unwrap_or(&self.config.model)
            .to_owned();
        let value = match self.complete(&model, sentences).await {
            Ok(value) => value,
            Err(why) => return LlmOutcome::Fallback(why),
        };
        let Some(text) = value["choices"][0]["message"]["content"].as_str() else {
            return LlmOutcome::Fallback(
                "the model API answered without a message; used the deterministic summary".into(),
            );
        };
        // Structured output; an API that ignored the schema answered prose: a summary only.
        let (text, entities, claims) = match serde_json::from_str::<Value>(text.trim()) {
            Ok(read) if read["summary"].is_string() => (
                read["summary"].as_str().unwrap_or_default().to_owned(),
                serde_json::from_value(read["entities"].clone()).unwrap_or_default(),
                // Claims one by one: a malformed one is dropped, not the whole answer.
                read["claims"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| serde_json::from_value::<Extracted>(c.clone()).ok())
                    .collect(),
            ),
            _ => (text.to_owned(), Vec::new(), Vec::new()),
        };
        let prompt_tokens = value["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        let completion_tokens = value["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        let cost_usd = prompt_tokens as f64 / 1000.0 * self.config.usd_per_1k_input
            + completion_tokens as f64 / 1000.0 * self.config.usd_per_1k_output;
        LlmOutcome::Summary {
            text: text.trim().to_owned(),
            entities,
            claims,
            model: value["model"].as_str().unwrap_or(&model).to_owned(),
            prompt_tokens,
            completion_tokens,
            cost_usd,
        }
    }

    /// One chat completion of `sentences` with structured output; why not, as the sentence
    /// the fallback carries.
    async fn complete(&self, model: &str, sentences: &[String]) -> Result<Value, String> {
        let body = json!({
            "model": model,
            "max_tokens": self.config.max_output_tokens,
            "temperature": 0,
            "messages": [{"role": "user", "content": format!("{PROMPT}{}", numbered(sentences))}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "wiki_source", "strict": true, "schema": schema()},
            },
        });
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).unwrap_or_default());
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                return Err(format!(
                    "the model API failed ({error}); used the deterministic summary"
                ));
            }
        };
        let status = response.status();
        match response
            .bytes()
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
        {
            Some(value) if status.is_success() => Ok(value),
            _ => Err(format!(
                "the model API answered HTTP {status}; used the deterministic summary"
            )),
        }
    }
}
