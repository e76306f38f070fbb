//! The deterministic wiki engine: ingest, query, lint. Cost 0; the same inputs give the same
//! pages and answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::page::{KINDS, Page};
use crate::storage::{Storage, StorageError};
use crate::text;

/// Most characters of a text source.
pub const MAX_TEXT: usize = 500_000;
/// Most characters of a question.
pub const MAX_QUESTION: usize = 2_000;
/// Sentences in a source summary.
const SUMMARY_SENTENCES: usize = 3;
/// Concept pages made per source.
const CONCEPTS_PER_SOURCE: usize = 5;
/// Sentences in an answer.
const ANSWER_SENTENCES: usize = 5;

/// Engine errors.
#[derive(Debug, thiserror::Error)]
pub enum WikiError {
    /// Bad input (INVALID_ARGUMENT).
    #[error("{0}")]
    Invalid(String),
    /// The role may not do this (PERMISSION_DENIED).
    #[error("{0}")]
    Forbidden(String),
    /// Fetching a URL failed (FAILED_PRECONDITION).
    #[error("{0}")]
    Fetch(String),
    /// Storage failed (UNAVAILABLE).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Result alias.
pub type WikiResult<T> = Result<T, WikiError>;

/// A page written by an operation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Receipt {
    /// Path under the tenant's folder (e.g. `wiki/entities/acme-corp.md`).
    pub path: String,
    /// `created`, `updated` or `unchanged`.
    pub change: &'static str,
}

/// What to ingest.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The text.
    pub text: String,
    /// Human label (title of the source page).
    pub label: String,
    /// Where it came from (URL or object key), if not pasted text.
    pub origin: Option<String>,
    /// `auto` or a fixed type.
    pub doc_type: String,
    /// Most this ingest may spend on a model (only with the LLM engine configured).
    pub cost_cap_usd: f64,
    /// Model to use instead of the configured one.
    pub model: Option<String>,
}

/// The wiki of every tenant over one storage.
#[derive(Debug, Clone)]
pub struct Wiki {
    storage: Storage,
    today: fn() -> String,
    llm: Option<crate::llm::Llm>,
}

fn system_today() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

fn root(tenant: &str) -> String {
    format!("wiki/{tenant}")
}

fn hash(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

/// Pages of a tenant by path (relative to `wiki/{tenant}/wiki/`).
type Pages = BTreeMap<String, Page>;

impl Wiki {
    /// A wiki over `storage`.
    pub fn new(storage: Storage) -> Wiki {
        Wiki {
            storage,
            today: system_today,
            llm: None,
        }
    }

    /// With the optional LLM engine (abstractive summaries within each call's cost cap).
    pub fn with_llm(mut self, llm: crate::llm::Llm) -> Wiki {
        self.llm = Some(llm);
        self
    }

    /// With a fixed clock (tests, golden files).
    pub fn with_today(mut self, today: fn() -> String) -> Wiki {
        self.today = today;
        self
    }

    /// The storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Every page of a tenant.
    pub async fn pages(&self, tenant: &str) -> WikiResult<Pages> {
        let prefix = format!("{}/wiki", root(tenant));
        let mut pages = BTreeMap::new();
        for key in self.storage.list(&prefix).await? {
            let relative = key.trim_start_matches(&format!("{prefix}/")).to_owned();
            if !KINDS.iter().any(|k| relative.starts_with(&format!("{k}/"))) {
                continue;
            }
            if let Some(text) = self.storage.get(&key).await?
                && let Some(page) = Page::parse(&relative, &text)
            {
                pages.insert(relative, page);
            }
        }
        Ok(pages)
    }

    async fn write_page(
        &self,
        tenant: &str,
        page: &Page,
        receipts: &mut Vec<Receipt>,
    ) -> WikiResult<()> {
        let key = format!("{}/wiki/{}", root(tenant), page.path);
        let rendered = page.render();
        let existing = self.storage.get(&key).await?;
        let change = match &existing {
            None => "created",
            Some(old) if *old == rendered => "unchanged",
            Some(_) => "updated",
        };
        if change != "unchanged" {
            self.storage.put(&key, &rendered).await?;
        }
        receipts.push(Receipt {
            path: format!("wiki/{}", page.path),
            change,
        });
        Ok(())
    }

    async fn append_log(&self, tenant: &str, op: &str, title: &str) -> WikiResult<()> {
        let key = format!("{}/wiki/log.md", root(tenant));
        let mut log = self
            .storage
            .get(&key)
            .await?
            .unwrap_or_else(|| "# Wiki log\n".to_owned());
        let title = title.replace('\n', " ");
        log.push_str(&format!("\n## [{}] {op} | {title}\n", (self.today)()));
        self.storage.put(&key, &log).await?;
        Ok(())
    }

    async fn write_index(&self, tenant: &str, pages: &Pages) -> WikiResult<()> {
        let mut out = String::from("# Wiki index\n");
        for kind in KINDS {
            let members: Vec<&Page> = pages
                .values()
                .filter(|p| p.path.starts_with(&format!("{kind}/")))
                .collect();
            if members.is_empty() {
                continue;
            }
            out.push_str(&format!("\n## {} ({})\n", capitalise(kind), members.len()));
            for page in members {
                let summary = page.get("summary");
                if summary.is_empty() {
                    out.push_str(&format!("- [[{}|{}]]\n", page.link(), page.title()));
                } else {
                    out.push_str(&format!(
                        "- [[{}|{}]] — {}\n",
                        page.link(),
                        page.title(),
                        summary
                    ));
                }
            }
        }
        self.storage
            .put(&format!("{}/wiki/index.md", root(tenant)), &out)
            .await?;
        Ok(())
    }

    /// Ingests a source: stores the raw text (content-hash id), writes the source page,
    /// creates or updates entity and concept pages, regenerates the index, appends to the log.
    /// The same source twice changes nothing.
    pub async fn ingest(&self, tenant: &str, source: Source) -> WikiResult<Value> {
        if source.text.trim().is_empty() {
            return Err(WikiError::Invalid("the source has no text".into()));
        }
        if source.text.chars().count() > MAX_TEXT {
            return Err(WikiError::Invalid(format!(
                "the source is over {MAX_TEXT} characters"
            )));
        }
        let id = hash(&source.text);
        // The model call (if any) happens before taking the tenant's lock, and only for a
        // source not stored yet: replays cost nothing.
        let raw_exists = self
            .storage
            .get(&format!("{}/raw/{id}.txt", root(tenant)))
            .await?
            .is_some();
        let llm = match &self.llm {
            Some(llm) if !raw_exists => Some(
                llm.summarise(&source.text, source.model.as_deref(), source.cost_cap_usd)
                    .await,
            ),
            _ => None,
        };
        let lease = self.storage.lock(tenant).await?;
        let today = (self.today)();
        let raw_key = format!("{}/raw/{id}.txt", root(tenant));
        if self.storage.get(&raw_key).await?.is_none() {
            self.storage.put(&raw_key, &source.text).await?;
        }
        let mut pages = self.pages(tenant).await?;
        let doc_type = if source.doc_type.is_empty() || source.doc_type == "auto" {
            text::classify(&source.text).to_owned()
        } else {
            source.doc_type.clone()
        };
        let sentences = text::sentences(&source.text);
        let summary = text::summary(&sentences, SUMMARY_SENTENCES);
        let entities = text::entities(&sentences);
        // Concepts are topics, not the names already kept as entities.
        let entity_words: BTreeSet<String> = entities.iter().flat_map(|e| text::words(e)).collect();
        let concepts: Vec<String> = text::key_phrases(&source.text, CONCEPTS_PER_SOURCE * 3)
            .into_iter()
            .filter(|phrase| !phrase.split(' ').any(|w| entity_words.contains(w)))
            .take(CONCEPTS_PER_SOURCE)
            .collect();

        // The source page: reuse the one with this id, else a free slug.
        let existing = pages
            .values()
            .find(|p| p.path.starts_with("sources/") && p.get("id") == id)
            .map(|p| p.path.clone());
        let path = existing.unwrap_or_else(|| {
            let base = text::slug(&source.label);
            let mut path = format!("sources/{base}.md");
            if pages.contains_key(&path) {
                path = format!("sources/{base}-{}.md", &id[..6]);
            }
            path
        });
        let link = path.trim_end_matches(".md").to_owned();
        let mut page = pages
            .get(&path)
            .cloned()
            .unwrap_or_else(|| Page::new(path.clone(), &source.label, "source", &today));
        let first_ingest = page.get("id").is_empty();
        if first_ingest {
            page.meta.insert("id".into(), json!(id));
            page.meta.insert("doc_type".into(), json!(doc_type));
            page.meta
                .insert("raw".into(), json!(format!("raw/{id}.txt")));
            page.meta.insert(
                "summary".into(),
                json!(summary.first().map(|(_, s)| s.clone()).unwrap_or_default()),
            );
            page.meta.insert("entities".into(), json!(entities));
            page.meta.insert("concepts".into(), json!(concepts));
            page.meta.insert("aliases".into(), json!([]));
            if let Some(origin) = &source.origin {
                page.meta.insert("origin".into(), json!(origin));
            }
            page.body = source_body(
                &source.label,
                &link,
                &summary,
                &entities,
                &concepts,
                &sentences,
            );
            if let Some(crate::llm::LlmOutcome::Summary { text, model, .. }) = &llm {
                page.meta.insert("llm_summary".into(), json!(text));
                page.body = page.body.replacen(
                    "\n## Text\n",
                    &format!("\n## Summary by {model}\n{text}\n\n## Text\n"),
                    1,
                );
            }
        }
        let mut receipts = Vec::new();
        self.write_page(tenant, &page, &mut receipts).await?;
        pages.insert(path.clone(), page);

        // Entity and concept pages: one dated mention per (page, sentence).
        for (kind, names) in [("entities", &entities), ("concepts", &concepts)] {
            for name in names {
                let slug = text::slug(name);
                let target = format!("{kind}/{slug}.md");
                let mut entry = pages.get(&target).cloned().unwrap_or_else(|| {
                    let mut p = Page::new(
                        target.clone(),
                        name,
                        if kind == "entities" {
                            "entity"
                        } else {
                            "concept"
                        },
                        &today,
                    );
                    p.meta.insert("aliases".into(), json!([]));
                    p.meta.insert("sources".into(), json!([]));
                    p.body = format!("# {name}\n\n## Mentions\n");
                    p
                });
                let mut sources = entry.list("sources");
                let mut changed = false;
                if !sources.contains(&link) {
                    sources.push(link.clone());
                    sources.sort();
                    entry.meta.insert("sources".into(), json!(sources));
                    changed = true;
                }
                for (i, sentence) in sentences
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| mentions(s, name))
                    .take(3)
                {
                    let line = format!("- [{today}] [[{link}#^s{i}]]: {sentence}\n");
                    let marker = format!("[[{link}#^s{i}]]");
                    if !entry.body.contains(&marker) {
                        entry.body.push_str(&line);
                        changed = true;
                    }
                }
                if changed {
                    entry.meta.insert("updated".into(), json!(today));
                    entry.meta.insert(
                        "summary".into(),
                        json!(format!(
                            "Mentioned in {} source(s).",
                            entry.list("sources").len()
                        )),
                    );
                }
                self.write_page(tenant, &entry, &mut receipts).await?;
                pages.insert(target, entry);
            }
        }
        self.write_index(tenant, &pages).await?;
        let all_unchanged = receipts.iter().all(|r| r.change == "unchanged");
        if !all_unchanged {
            self.append_log(tenant, "ingest", &source.label).await?;
        }
        let receipts: Vec<Receipt> = receipts.into_iter().collect();
        lease.release().await;
        Ok(json!({
            "source": format!("wiki/{path}"),
            "raw": format!("raw/{id}.txt"),
            "doc_type": doc_type,
            "summary": summary.iter().map(|(i, s)| json!({"sentence": s, "cite": format!("[[{link}#^s{i}]]")})).collect::<Vec<_>>(),
            "entities": entities,
            "concepts": concepts,
            "pages": receipts,
            "idempotent_replay": all_unchanged,
            "engine": if matches!(llm, Some(crate::llm::LlmOutcome::Summary { .. })) { "llm" } else { "deterministic" },
            "llm": match &llm {
                Some(crate::llm::LlmOutcome::Summary { text, model, prompt_tokens, completion_tokens, cost_usd }) => json!({
                    "summary": text, "model": model, "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens, "cost_usd": cost_usd,
                }),
                Some(crate::llm::LlmOutcome::Fallback(reason)) => json!({"fallback": reason}),
                None => Value::Null,
            },
            "cost_usd": match &llm {
                Some(crate::llm::LlmOutcome::Summary { cost_usd, .. }) => *cost_usd,
                _ => 0.0,
            },
        }))
    }

    /// Answers a question from the wiki with a citation on every sentence.
    pub async fn query(
        &self,
        tenant: &str,
        question: &str,
        max_pages: usize,
        format: &str,
        persist: bool,
    ) -> WikiResult<Value> {
        if question.trim().is_empty() || question.chars().count() > MAX_QUESTION {
            return Err(WikiError::Invalid(format!(
                "question must be 1 to {MAX_QUESTION} characters"
            )));
        }
        if !(1..=20).contains(&max_pages) {
            return Err(WikiError::Invalid(
                "max_pages must be between 1 and 20".into(),
            ));
        }
        if !["markdown", "comparison_table", "summary_with_sources"].contains(&format) {
            return Err(WikiError::Invalid(format!(
                "unknown output_format {format:?}"
            )));
        }
        let pages = self.pages(tenant).await?;
        let ranked = crate::search::rank(&pages, question, max_pages);
        let question_terms = text::term_set(question);
        // A sentence must share a third of the question's content terms (at least one).
        let needed = question_terms.len().div_ceil(3).max(1);
        // Candidate sentences: `^sN`-anchored lines of sources, mention lines elsewhere.
        let mut candidates: Vec<(f64, String, String, String)> = Vec::new();
        let mut covered: BTreeSet<String> = BTreeSet::new();
        for (path, page_score) in &ranked {
            let Some(page) = pages.get(path) else {
                continue;
            };
            for (sentence, cite) in cited_sentences(page) {
                let shared: Vec<String> = question_terms
                    .intersection(&text::term_set(&sentence))
                    .cloned()
                    .collect();
                let overlap = shared.len();
                covered.extend(shared);
                if overlap >= needed {
                    let length = text::terms(&sentence).len().max(1) as f64;
                    let score = overlap as f64 / length.sqrt() + page_score * 0.01;
                    candidates.push((score, sentence, cite, page.title().to_owned()));
                }
            }
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)));
        let mut seen = BTreeSet::new();
        let chosen: Vec<(String, String, String)> = candidates
            .into_iter()
            .filter(|(_, sentence, _, _)| seen.insert(sentence.clone()))
            .take(ANSWER_SENTENCES)
            .map(|(_, s, c, t)| (s, c, t))
            .collect();
        // The best pages must cover half of the question's terms between them, or what
        // matched is noise that happens to share a word.
        let chosen = if covered.len() >= question_terms.len().div_ceil(2) {
            chosen
        } else {
            Vec::new()
        };
        let answered = !chosen.is_empty();
        let answer = if answered {
            render_answer(format, &chosen)
        } else {
            "The wiki has nothing that answers this question yet. Ingest a source that covers it, then ask again.".to_owned()
        };
        let citations: Vec<&String> = chosen.iter().map(|(_, c, _)| c).collect();
        let mut persisted = Value::Null;
        if persist && answered {
            let lease = self.storage.lock(tenant).await?;
            let today = (self.today)();
            let path = format!("outputs/{}.md", text::slug(question));
            let mut page = Page::new(path.clone(), question, "output", &today);
            page.meta.insert("question".into(), json!(question));
            page.meta.insert("summary".into(), json!(chosen[0].0));
            page.meta.insert(
                "sources".into(),
                json!(
                    citations
                        .iter()
                        .map(|c| c
                            .trim_start_matches("[[")
                            .split('#')
                            .next()
                            .unwrap_or_default())
                        .collect::<BTreeSet<_>>()
                ),
            );
            page.meta.insert("aliases".into(), json!([]));
            page.body = format!("# {question}\n\n{answer}\n");
            let mut receipts = Vec::new();
            self.write_page(tenant, &page, &mut receipts).await?;
            let mut pages = self.pages(tenant).await?;
            pages.insert(path.clone(), page);
            self.write_index(tenant, &pages).await?;
            self.append_log(tenant, "query", question).await?;
            persisted = json!(format!("wiki/{path}"));
            lease.release().await;
        }
        Ok(json!({
            "answered": answered,
            "answer": answer,
            "format": format,
            "citations": citations,
            "pages": ranked.iter().map(|(p, s)| json!({"path": format!("wiki/{p}"), "score": (s * 1000.0).round() / 1000.0})).collect::<Vec<_>>(),
            "persisted": persisted,
            "cost_usd": 0.0,
        }))
    }

    /// Checks the wiki for defects; writes `lint-report.md` when `publish`.
    pub async fn lint(
        &self,
        tenant: &str,
        scope: &str,
        publish: bool,
        staleness_days: u32,
    ) -> WikiResult<Value> {
        let folder = match scope {
            "full" => None,
            "concepts" | "entities" | "sources" | "syntheses" => Some(scope),
            other => return Err(WikiError::Invalid(format!("unknown scope {other:?}"))),
        };
        if !(1..=365).contains(&staleness_days) {
            return Err(WikiError::Invalid(
                "staleness_days must be between 1 and 365".into(),
            ));
        }
        let pages = self.pages(tenant).await?;
        let index = self
            .storage
            .get(&format!("{}/wiki/index.md", root(tenant)))
            .await?
            .unwrap_or_default();
        let findings = crate::lint::run(&pages, &index, staleness_days);
        let findings: Vec<Value> = findings
            .into_iter()
            .filter(|f| {
                folder.is_none_or(|folder| {
                    f["page"].as_str().is_some_and(|p| {
                        p.starts_with(&format!("wiki/{folder}/")) || p == "wiki/index.md"
                    })
                })
            })
            .collect();
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for finding in &findings {
            *counts
                .entry(finding["rule"].as_str().unwrap_or_default().to_owned())
                .or_insert(0) += 1;
        }
        if publish {
            let lease = self.storage.lock(tenant).await?;
            let mut report = format!(
                "# Lint report ({})\n\nScope: {scope}. Findings: {}.\n\n",
                (self.today)(),
                findings.len()
            );
            report.push_str(
                "| Rule | Severity | Page | Evidence | Suggestion |\n|---|---|---|---|---|\n",
            );
            for f in &findings {
                report.push_str(&format!(
                    "| {} | {} | {} | {} | {} |\n",
                    f["rule"].as_str().unwrap_or_default(),
                    f["severity"].as_str().unwrap_or_default(),
                    f["page"].as_str().unwrap_or_default(),
                    f["evidence"]
                        .as_str()
                        .unwrap_or_default()
                        .replace('|', "\\|"),
                    f["suggestion"]
                        .as_str()
                        .unwrap_or_default()
                        .replace('|', "\\|"),
                ));
            }
            self.storage
                .put(&format!("{}/wiki/lint-report.md", root(tenant)), &report)
                .await?;
            self.append_log(tenant, "lint", scope).await?;
            lease.release().await;
        }
        Ok(json!({
            "scope": scope,
            "pages_checked": pages.len(),
            "findings": findings,
            "counts": counts,
            "report": if publish { json!("wiki/lint-report.md") } else { Value::Null },
            "cost_usd": 0.0,
        }))
    }
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// Whether a sentence mentions a name (whole words, case-insensitive for concepts).
pub fn mentions(sentence: &str, name: &str) -> bool {
    let lower = sentence.to_lowercase();
    let name = name.to_lowercase();
    lower.match_indices(&name).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + name.len()..].chars().next();
        before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

fn source_body(
    label: &str,
    link: &str,
    summary: &[(usize, String)],
    entities: &[String],
    concepts: &[String],
    sentences: &[String],
) -> String {
    let mut body = format!("# {label}\n\n## Summary\n");
    for (i, sentence) in summary {
        body.push_str(&format!("- {sentence} ([[{link}#^s{i}]])\n"));
    }
    if !entities.is_empty() {
        body.push_str("\n## Entities\n");
        let list: Vec<String> = entities
            .iter()
            .map(|e| format!("[[entities/{}|{e}]]", text::slug(e)))
            .collect();
        body.push_str(&list.join(", "));
        body.push('\n');
    }
    if !concepts.is_empty() {
        body.push_str("\n## Concepts\n");
        let list: Vec<String> = concepts
            .iter()
            .map(|c| format!("[[concepts/{}|{c}]]", text::slug(c)))
            .collect();
        body.push_str(&list.join(", "));
        body.push('\n');
    }
    body.push_str("\n## Text\n");
    for (i, sentence) in sentences.iter().enumerate() {
        body.push_str(&format!("{sentence} ^s{i}\n"));
    }
    body
}

/// The citable sentences of a page with their citation.
pub fn cited_sentences(page: &Page) -> Vec<(String, String)> {
    let link = page.link();
    let mut out = Vec::new();
    for line in page.body.lines() {
        if let Some((sentence, anchor)) = line.rsplit_once(" ^s")
            && anchor.chars().all(|c| c.is_ascii_digit())
            && !anchor.is_empty()
        {
            out.push((sentence.to_owned(), format!("[[{link}#^s{anchor}]]")));
        } else if let Some(rest) = line.strip_prefix("- [")
            && let Some((_, rest)) = rest.split_once("] [[")
            && let Some((target, sentence)) = rest.split_once("]]: ")
        {
            out.push((sentence.to_owned(), format!("[[{target}]]")));
        }
    }
    out
}

fn render_answer(format: &str, chosen: &[(String, String, String)]) -> String {
    match format {
        "comparison_table" => {
            let mut out = String::from("| Page | Finding | Source |\n|---|---|---|\n");
            for (sentence, cite, title) in chosen {
                out.push_str(&format!(
                    "| {} | {} | {cite} |\n",
                    title.replace('|', "\\|"),
                    sentence.replace('|', "\\|")
                ));
            }
            out
        }
        "summary_with_sources" => {
            let mut numbers: HashMap<&String, usize> = HashMap::new();
            let mut sources: Vec<&String> = Vec::new();
            let mut paragraph = Vec::new();
            for (sentence, cite, _) in chosen {
                let n = *numbers.entry(cite).or_insert_with(|| {
                    sources.push(cite);
                    sources.len()
                });
                paragraph.push(format!("{sentence} [{n}]"));
            }
            let mut out = paragraph.join(" ");
            out.push_str("\n\nSources:\n");
            for (i, cite) in sources.iter().enumerate() {
                out.push_str(&format!("[{}] {cite}\n", i + 1));
            }
            out
        }
        _ => chosen
            .iter()
            .map(|(sentence, cite, _)| format!("- {sentence} {cite}\n"))
            .collect(),
    }
}
