//! The optional LLM engine: an OpenAI-compatible chat-completions API that writes an
//! abstractive summary of a source next to the deterministic one. Used only when configured;
//! the deterministic engine stays the default and is what the tests judge.
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

/// What the LLM step did, for the ingest result.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmOutcome {
    /// Called: the summary and the priced usage.
    Summary {
        /// The model's summary.
        text: String,
        /// Model used.
        model: String,
        /// Tokens in.
        prompt_tokens: u64,
        /// Tokens out.
        completion_tokens: u64,
        /// Actual cost.
        cost_usd: f64,
    },
    /// Not called or failed: why; the deterministic summary stands.
    Fallback(String),
}

const PROMPT: &str = "Summarise the following source for a knowledge wiki in at most five sentences. \
Keep names, dates and figures exact. Do not add facts.\n\n";

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

    /// Estimated cost of summarising `text` (USD).
    pub fn estimate(&self, text: &str) -> f64 {
        let input = (PROMPT.len() + text.len()).div_ceil(4) as f64;
        let output = f64::from(self.config.max_output_tokens);
        input / 1000.0 * self.config.usd_per_1k_input
            + output / 1000.0 * self.config.usd_per_1k_output
    }

    /// Summarises `text` unless the estimate is over `cost_cap_usd`.
    pub async fn summarise(
        &self,
        text: &str,
        model: Option<&str>,
        cost_cap_usd: f64,
    ) -> LlmOutcome {
        let estimate = self.estimate(text);
        if estimate > cost_cap_usd {
            return LlmOutcome::Fallback(format!(
                "estimated ${estimate:.4} is over the cost cap ${cost_cap_usd:.4}; used the deterministic summary"
            ));
        }
        let model = model
            .filter(|m| !m.is_empty())
            .unwrap_or(&self.config.model)
            .to_owned();
        let body = json!({
            "model": model,
            "max_tokens": self.config.max_output_tokens,
            "temperature": 0,
            "messages": [{"role": "user", "content": format!("{PROMPT}{text}")}],
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
                return LlmOutcome::Fallback(format!(
                    "the model API failed ({error}); used the deterministic summary"
                ));
            }
        };
        let status = response.status();
        let value: Value = match response
            .bytes()
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
        {
            Some(value) if status.is_success() => value,
            _ => {
                return LlmOutcome::Fallback(format!(
                    "the model API answered HTTP {status}; used the deterministic summary"
                ));
            }
        };
        let Some(text) = value["choices"][0]["message"]["content"].as_str() else {
            return LlmOutcome::Fallback(
                "the model API answered without a message; used the deterministic summary".into(),
            );
        };
        let prompt_tokens = value["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        let completion_tokens = value["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        let cost_usd = prompt_tokens as f64 / 1000.0 * self.config.usd_per_1k_input
            + completion_tokens as f64 / 1000.0 * self.config.usd_per_1k_output;
        LlmOutcome::Summary {
            text: text.trim().to_owned(),
            model: value["model"].as_str().unwrap_or(&model).to_owned(),
            prompt_tokens,
            completion_tokens,
            cost_usd,
        }
    }
}
