//! An optional second ranker for tool search (ADR 0014): an OpenAI-compatible embeddings
//! endpoint (`POST {url}` with `{"model", "input": [...]}`) that knows meanings where words
//! differ ("latitude and longitude of an address" for a tool that "geocodes").
//!
//! It is never required. Without `[search] embeddings_url`, or while the endpoint is down,
//! slow or not yet done with a registry's tools, a search is ranked by BM25F alone. With it,
//! the two rankings are fused by reciprocal rank ([`fuse`]): a tool's score is the sum of
//! `weight / (k + rank)` over the rankings it appears in.
//!
//! What is embedded is what the caller sees: the tools of one registry body after role
//! projection (hidden tools are never sent, so they cannot be found), and the query. Vectors
//! are kept per text (a content hash) in a bounded cache, so a catalogue change embeds only
//! the tools whose text changed, and the vectors of a body go with the body.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::tool::EdgeTool;

/// Longest text of one tool sent to the endpoint, in characters.
pub const MAX_DOCUMENT_CHARS: usize = 1_000;
/// After a failure, how long a registry's tools are not sent again.
const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Most vector dimensions accepted from an endpoint.
const MAX_DIMENSIONS: usize = 8_192;

/// `[search]`: the optional embeddings ranker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawSearch {
    /// An OpenAI-compatible embeddings endpoint (`https://…/v1/embeddings`); empty = BM25F only.
    pub embeddings_url: String,
    /// The model named in each request.
    pub embeddings_model: String,
    /// The edge's environment variable that holds the endpoint's API key (sent as a bearer
    /// token); empty = none.
    pub embeddings_api_key_env: String,
    /// How long a search waits for the endpoint (the query's vector, and a registry's tools on
    /// its first search) before it answers with BM25F alone.
    pub embeddings_timeout_ms: u64,
    /// Texts per request when a registry's tools are embedded.
    pub embeddings_batch: usize,
    /// Vectors kept in memory (one per distinct tool text or query).
    pub embeddings_cache: usize,
    /// The semantic ranking's weight in the fusion (BM25F's is 1).
    pub embeddings_weight: f32,
}

impl Default for RawSearch {
    fn default() -> Self {
        RawSearch {
            embeddings_url: String::new(),
            embeddings_model: String::new(),
            embeddings_api_key_env: String::new(),
            embeddings_timeout_ms: 1_500,
            embeddings_batch: 64,
            embeddings_cache: 50_000,
            embeddings_weight: 1.0,
        }
    }
}

/// `[search]`, validated: the embeddings endpoint, if configured.
#[derive(Clone)]
pub struct EmbeddingSettings {
    /// The endpoint.
    pub url: String,
    /// The model named in each request.
    pub model: String,
    /// The API key (read from the environment when the configuration was validated).
    pub api_key: Option<String>,
    /// How long a search waits for the endpoint.
    pub timeout: Duration,
    /// Texts per request.
    pub batch: usize,
    /// Vectors kept.
    pub cache: usize,
    /// The semantic ranking's weight in the fusion.
    pub weight: f32,
}

impl std::fmt::Debug for EmbeddingSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingSettings")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RawSearch {
    /// Validates `[search]`; `None` when no endpoint is configured.
    pub fn settings(&self) -> anyhow::Result<Option<EmbeddingSettings>> {
        if self.embeddings_url.is_empty() {
            return Ok(None);
        }
        tp_registry::ident::check_http_url(&self.embeddings_url)
            .map_err(|e| anyhow::anyhow!("search.embeddings_url: {e}"))?;
        if self.embeddings_model.is_empty() {
            anyhow::bail!("search.embeddings_model: required with search.embeddings_url");
        }
        if !(50..=60_000).contains(&self.embeddings_timeout_ms) {
            anyhow::bail!("search.embeddings_timeout_ms: must be between 50 and 60000");
        }
        if !(1..=2_048).contains(&self.embeddings_batch) {
            anyhow::bail!("search.embeddings_batch: must be between 1 and 2048");
        }
        if self.embeddings_cache == 0 {
            anyhow::bail!("search.embeddings_cache: must be at least 1");
        }
        if !(self.embeddings_weight > 0.0 && self.embeddings_weight <= 10.0) {
            anyhow::bail!("search.embeddings_weight: must be above 0 and at most 10");
        }
        let api_key = if self.embeddings_api_key_env.is_empty() {
            None
        } else {
            let key = std::env::var(&self.embeddings_api_key_env).map_err(|_| {
                anyhow::anyhow!(
                    "search.embeddings_api_key_env: the variable {} is not set",
                    self.embeddings_api_key_env
                )
            })?;
            Some(key)
        };
        Ok(Some(EmbeddingSettings {
            url: self.embeddings_url.clone(),
            model: self.embeddings_model.clone(),
            api_key,
            timeout: Duration::from_millis(self.embeddings_timeout_ms),
            batch: self.embeddings_batch,
            cache: self.embeddings_cache,
            weight: self.embeddings_weight,
        }))
    }
}

/// The text of a tool that is embedded: its name in words, title, description and the
/// actions the role may use.
pub fn document(tool: &EdgeTool) -> String {
    let r = &tool.resolved;
    let mut text = r.name.replace(['_', '-', '.'], " ");
    if !r.title.is_empty() {
        text.push_str(". ");
        text.push_str(&r.title);
    }
    if !r.description.is_empty() {
        text.push_str(". ");
        text.push_str(&r.description);
    }
    if let Some(set) = &r.actions {
        text.push_str(". Actions: ");
        text.push_str(&set.allowed.join(", "));
    }
    match text.char_indices().nth(MAX_DOCUMENT_CHARS) {
        Some((end, _)) => text[..end].to_owned(),
        None => text,
    }
}

/// The vectors of one registry body's tools, in tool order, each of unit length.
#[derive(Debug)]
pub struct ToolVectors {
    dimensions: usize,
    data: Vec<f32>,
}

impl ToolVectors {
    /// The tools by cosine similarity to `query` (best first), at most `limit`, only those for
    /// which `keep` holds.
    pub fn rank(
        &self,
        query: &[f32],
        limit: usize,
        keep: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        if query.len() != self.dimensions || self.dimensions == 0 {
            return Vec::new();
        }
        let mut scored: Vec<(usize, f32)> = self
            .data
            .chunks_exact(self.dimensions)
            .enumerate()
            .filter(|(i, _)| keep(*i))
            .map(|(i, v)| (i, v.iter().zip(query).map(|(a, b)| a * b).sum()))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored
    }

    /// Tools held.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.dimensions).unwrap_or(0)
    }

    /// Whether no tool is held.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Reciprocal-rank fusion of the lexical ranking and the semantic one (both best first, tool
/// indices): each tool scores `1 / (k + rank)` from the first and `weight / (k + rank)` from
/// the second (ranks from 1). Best first, at most `limit`; ties go to the lexical order, then
/// the tool order.
pub fn fuse(
    lexical: &[usize],
    semantic: &[usize],
    k: f32,
    weight: f32,
    limit: usize,
) -> Vec<usize> {
    let mut scores: Vec<(usize, f32, usize)> = Vec::new();
    let mut add = |tool: usize, score: f32, order: usize| {
        if let Some(entry) = scores.iter_mut().find(|(t, _, _)| *t == tool) {
            entry.1 += score;
            entry.2 = entry.2.min(order);
        } else {
            scores.push((tool, score, order));
        }
    };
    for (rank, &tool) in lexical.iter().enumerate() {
        add(tool, 1.0 / (k + rank as f32 + 1.0), rank);
    }
    for (rank, &tool) in semantic.iter().enumerate() {
        add(tool, weight / (k + rank as f32 + 1.0), lexical.len() + rank);
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    scores.into_iter().take(limit).map(|(t, _, _)| t).collect()
}

/// Why the endpoint gave no vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedError(pub String);

impl std::fmt::Display for EmbedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The client of the embeddings endpoint, with the vectors it was given.
pub struct Embedder {
    settings: EmbeddingSettings,
    client: reqwest::Client,
    cache: quick_cache::sync::Cache<[u8; 32], Arc<[f32]>>,
    /// When the endpoint last failed (a registry's tools are not sent again for a while).
    failed: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn digest(model: &str, text: &str) -> [u8; 32] {
    use sha2::Digest as _;
    let mut hash = sha2::Sha256::new();
    hash.update((model.len() as u64).to_le_bytes());
    hash.update(model.as_bytes());
    hash.update(text.as_bytes());
    hash.finalize().into()
}

impl Embedder {
    /// A client of the endpoint in `settings`.
    pub fn new(settings: EmbeddingSettings) -> anyhow::Result<Embedder> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(60))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let cache = quick_cache::sync::Cache::new(settings.cache);
        Ok(Embedder {
            settings,
            client,
            cache,
            failed: Mutex::new(None),
        })
    }

    /// The edge's embedder when `[search]` names an endpoint; `None` (BM25F only) otherwise, or
    /// when no HTTP client can be built (logged).
    pub fn start(settings: Option<EmbeddingSettings>) -> Option<Arc<Embedder>> {
        match Embedder::new(settings?) {
            Ok(embedder) => Some(Arc::new(embedder)),
            Err(e) => {
                tracing::error!(error = %e, "tool search: no embeddings client; searches use BM25F alone");
                None
            }
        }
    }

    /// The validated `[search]` settings it runs with.
    pub fn settings(&self) -> &EmbeddingSettings {
        &self.settings
    }

    /// Whether the endpoint failed less than a while ago.
    fn resting(&self) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|at| at.elapsed() < RETRY_AFTER)
    }

    fn failure(&self, error: &EmbedError) {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        // One warning per resting period, not one per search.
        if failed.is_none_or(|at| at.elapsed() >= RETRY_AFTER) {
            tracing::warn!(
                url = %self.settings.url,
                error = %error,
                "tool search: the embeddings endpoint failed; searches use BM25F alone (retried in 30 s)"
            );
        }
        *failed = Some(Instant::now());
        metrics::counter!("tp_edge_search_embedding_failures_total").increment(1);
    }

    /// The vector of each text (unit length), from the cache or the endpoint, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Arc<[f32]>>, EmbedError> {
        let keys: Vec<[u8; 32]> = texts
            .iter()
            .map(|t| digest(&self.settings.model, t))
            .collect();
        let mut out: Vec<Option<Arc<[f32]>>> = keys.iter().map(|k| self.cache.get(k)).collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        for chunk in missing.chunks(self.settings.batch) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self
                .request(&batch)
                .await
                .inspect_err(|e| self.failure(e))?;
            for (&i, vector) in chunk.iter().zip(vectors) {
                self.cache.insert(keys[i], Arc::clone(&vector));
                out[i] = Some(vector);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The vectors of `tools` (one registry body's), or why not.
    pub async fn tool_vectors(&self, tools: &[EdgeTool]) -> Result<ToolVectors, EmbedError> {
        if self.resting() {
            return Err(EmbedError("the endpoint failed less than 30 s ago".into()));
        }
        let texts: Vec<String> = tools.iter().map(document).collect();
        let vectors = self.embed(&texts).await?;
        let dimensions = vectors.first().map_or(0, |v| v.len());
        if vectors.iter().any(|v| v.len() != dimensions) {
            let error = EmbedError("the endpoint answered vectors of different sizes".into());
            self.failure(&error);
            return Err(error);
        }
        Ok(ToolVectors {
            dimensions,
            data: vectors.iter().flat_map(|v| v.iter().copied()).collect(),
        })
    }

    /// The query's vector within the timeout, or why not.
    pub async fn query(&self, query: &str) -> Result<Arc<[f32]>, EmbedError> {
        if self.resting() {
            return Err(EmbedError("the endpoint failed less than 30 s ago".into()));
        }
        let texts = [query.to_owned()];
        match tokio::time::timeout(self.settings.timeout, self.embed(&texts)).await {
            Ok(Ok(mut vectors)) => vectors
                .pop()
                .ok_or_else(|| EmbedError("no vector for the query".into())),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(EmbedError(format!(
                "no answer within {} ms (search.embeddings_timeout_ms)",
                self.settings.timeout.as_millis()
            ))),
        }
    }

    /// One request: a vector per text, in order, normalised to unit length.
    async fn request(&self, texts: &[&str]) -> Result<Vec<Arc<[f32]>>, EmbedError> {
        let body = json!({ "model": self.settings.model, "input": texts }).to_string();
        let mut request = self
            .client
            .post(&self.settings.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| EmbedError(format!("request failed: {}", chain(&e))))?;
        let status = response.status();
        if !status.is_success() {
            return Err(EmbedError(format!("the endpoint answered {status}")));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| EmbedError(format!("reading the answer: {}", chain(&e))))?;
        let body: Value = serde_json::from_slice(&bytes)
            .map_err(|e| EmbedError(format!("the answer is not JSON: {e}")))?;
        vectors_of(&body, texts.len())
    }
}

/// An error with its causes, for the log (reqwest hides the useful part in its sources).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The vectors of an embeddings answer (`data[].embedding`, placed by `data[].index`).
fn vectors_of(body: &Value, expected: usize) -> Result<Vec<Arc<[f32]>>, EmbedError> {
    let bad = |why: &str| EmbedError(format!("the answer is not an embeddings list: {why}"));
    let data = body["data"].as_array().ok_or_else(|| bad("no `data`"))?;
    if data.len() != expected {
        return Err(bad(&format!("{} vectors for {expected} texts", data.len())));
    }
    let mut out: Vec<Option<Arc<[f32]>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = item["index"]
            .as_u64()
            .map_or(position, |i| usize::try_from(i).unwrap_or(usize::MAX));
        let values = item["embedding"]
            .as_array()
            .ok_or_else(|| bad("an item has no `embedding` array (ask for float vectors)"))?;
        if values.is_empty() || values.len() > MAX_DIMENSIONS {
            return Err(bad("a vector is empty or too long"));
        }
        #[allow(
            clippy::cast_possible_truncation,
            reason = "vectors are compared in f32"
        )]
        let mut vector: Vec<f32> = values
            .iter()
            .map(|v| v.as_f64().map(|f| f as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("a vector holds a value that is not a number"))?;
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !norm.is_finite() || norm == 0.0 {
            return Err(bad("a vector has no length"));
        }
        vector.iter_mut().for_each(|x| *x /= norm);
        let slot = out
            .get_mut(index)
            .ok_or_else(|| bad("an index is out of range"))?;
        if slot.replace(vector.into()).is_some() {
            return Err(bad("an index appears twice"));
        }
    }
    Ok(out.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_rewards_tools_both_rankings_agree_on() {
        // 7 is second lexically and first semantically: it wins over 3, first lexically only.
        assert_eq!(fuse(&[3, 7, 1], &[7, 9], 60.0, 1.0, 3), vec![7, 3, 9]);
        // A tool only the semantic ranking found still appears.
        assert!(fuse(&[], &[4], 60.0, 1.0, 5).contains(&4));
        // Ties keep the lexical order.
        assert_eq!(fuse(&[2, 5], &[5, 2], 60.0, 1.0, 2), vec![2, 5]);
    }

    #[test]
    fn answers_are_checked_and_normalised() {
        let body = json!({"data": [
            {"index": 1, "embedding": [0.0, 2.0]},
            {"index": 0, "embedding": [3.0, 4.0]},
        ]});
        let v = vectors_of(&body, 2).unwrap();
        assert_eq!(&*v[0], &[0.6, 0.8]);
        assert_eq!(&*v[1], &[0.0, 1.0]);
        for bad in [
            json!({"data": [{"index": 0, "embedding": [1.0]}]}),
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
            json!({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0]}]}),
            json!({"data": [{"index": 0, "embedding": [0.0]}, {"index": 1, "embedding": [1.0]}]}),
            json!({"data": [{"index": 5, "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]}),
            json!({"error": {"message": "no"}}),
        ] {
            assert!(vectors_of(&bad, 2).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_refuse_what_cannot_work() {
        let mut raw = RawSearch::default();
        assert!(raw.settings().unwrap().is_none(), "off by default");
        raw.embeddings_url = "ftp://x".into();
        assert!(raw.settings().is_err());
        raw.embeddings_url = "http://127.0.0.1:9/v1/embeddings".into();
        let err = raw.settings().unwrap_err().to_string();
        assert!(err.contains("embeddings_model"), "{err}");
        raw.embeddings_model = "m".into();
        raw.embeddings_api_key_env = "TP_TEST_SURELY_UNSET_EMBEDDINGS_KEY".into();
        let err = raw.settings().unwrap_err().to_string();
        assert!(err.contains("is not set"), "{err}");
        raw.embeddings_api_key_env.clear();
        raw.embeddings_weight = 0.0;
        assert!(raw.settings().is_err());
        raw.embeddings_weight = 1.0;
        let settings = raw.settings().unwrap().unwrap();
        assert_eq!(settings.timeout, Duration::from_millis(1_500));
    }

    #[test]
    fn ranking_by_cosine_keeps_only_what_is_asked() {
        let vectors = ToolVectors {
            dimensions: 2,
            data: vec![1.0, 0.0, 0.0, 1.0, 0.6, 0.8],
        };
        let ranked = vectors.rank(&[0.0, 1.0], 5, |_| true);
        assert_eq!(
            ranked.iter().map(|r| r.0).collect::<Vec<_>>(),
            vec![1, 2, 0]
        );
        let ranked = vectors.rank(&[0.0, 1.0], 5, |i| i != 1);
        assert_eq!(ranked[0].0, 2);
        assert!(vectors.rank(&[1.0], 5, |_| true).is_empty(), "wrong size");
        assert_eq!(vectors.len(), 3);
    }
}
