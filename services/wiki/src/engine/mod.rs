//! The deterministic wiki engine: ingest, query, lint. Cost 0; the same inputs give the same
//! pages and answers.
//!
//! Pages in the object store are the source of truth; every write of a tenant also bumps its
//! revision (`wiki/{tenant}/.rev`) and updates its search index ([`crate::index`]) to that
//! revision. Reads ask the index, never every page; an index found behind the pages (another
//! replica wrote, or the index was lost) is rebuilt from them first.

mod ingest;
mod pages;
mod query;
mod question;
mod synonyms;

use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::index::{Indexes, TenantIndex};
use crate::page::Page;
use crate::storage::{Batch, Storage, StorageError, TenantLease};

pub use pages::{cited_sentences, mentions, show_date};

/// Most characters of a text source.
pub const MAX_TEXT: usize = 500_000;
/// Most characters of a question.
pub const MAX_QUESTION: usize = 2_000;

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
    /// A per-tenant quota would be passed (RESOURCE_EXHAUSTED).
    #[error("{0}")]
    Quota(String),
    /// The work could not run (INTERNAL).
    #[error("{0}")]
    Internal(String),
}

impl From<crate::work::WorkError> for WikiError {
    fn from(error: crate::work::WorkError) -> WikiError {
        WikiError::Internal(error.to_string())
    }
}

impl From<crate::index::IndexError> for WikiError {
    fn from(error: crate::index::IndexError) -> WikiError {
        WikiError::Internal(error.to_string())
    }
}

/// Result alias.
pub type WikiResult<T> = Result<T, WikiError>;

/// Progress of a long operation: (done, total, message).
pub type Progress<'a> = &'a (dyn Fn(f64, f64, &str) + Send + Sync);

/// No progress wanted.
pub fn no_progress(_: f64, _: f64, _: &str) {}

/// Per-tenant quotas.
#[derive(Debug, Clone, Copy)]
pub struct Quotas {
    /// Most pages in one tenant's wiki.
    pub max_pages: usize,
    /// Most bytes of source text in one tenant's wiki.
    pub max_bytes: usize,
    /// Most entity pages one ingest may create or touch.
    pub max_entities_per_ingest: usize,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_pages: 50_000,
            max_bytes: 512 * 1024 * 1024,
            max_entities_per_ingest: 40,
        }
    }
}

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
    /// The source's text, as pasted or as read from its origin.
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
    /// The date the source speaks as of (`YYYYMMDD`), when the caller says it.
    pub as_of: Option<u32>,
    /// What the source is about, when the caller says it.
    pub subjects: Vec<String>,
}

/// The wiki of every tenant over one storage.
#[derive(Debug, Clone)]
pub struct Wiki {
    storage: Storage,
    indexes: Indexes,
    today: fn() -> String,
    llm: Option<crate::llm::Llm>,
    quotas: Quotas,
    /// Serialises index rebuilds per tenant in this process.
    rebuilding:
        Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
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

pub(crate) fn root(tenant: &str) -> String {
    format!("wiki/{tenant}")
}

pub(crate) fn hash(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

pub use crate::page::Pages;

impl Wiki {
    /// A wiki over `storage`, its search indexes in memory (tests, benchmarks; see
    /// [`Wiki::with_index_dir`]).
    pub fn new(storage: Storage) -> Wiki {
        Wiki {
            storage,
            indexes: Indexes::in_memory(),
            today: system_today,
            llm: None,
            quotas: Quotas::default(),
            rebuilding: Arc::default(),
        }
    }

    /// With the search indexes under `dir` (one folder per tenant).
    pub fn with_index_dir(mut self, dir: std::path::PathBuf) -> Wiki {
        self.indexes = Indexes::on_disk(dir);
        self
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

    /// With other per-tenant quotas.
    pub fn with_quotas(mut self, quotas: Quotas) -> Wiki {
        self.quotas = quotas;
        self
    }

    /// The tenant's files (pages, sources, the log).
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The search indexes.
    pub fn indexes(&self) -> &Indexes {
        &self.indexes
    }

    /// Every page of a tenant (lint and index rebuilds read them all; queries never do).
    pub async fn pages(&self, tenant: &str) -> WikiResult<Pages> {
        let prefix = format!("{}/wiki", root(tenant));
        let mut pages = std::collections::BTreeMap::new();
        for key in self.storage.list(&prefix).await? {
            let relative = key.trim_start_matches(&format!("{prefix}/")).to_owned();
            if !crate::page::KINDS
                .iter()
                .any(|k| relative.starts_with(&format!("{k}/")))
            {
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

    /// The revision of a tenant's pages (0 for none).
    pub(crate) async fn stored_rev(&self, tenant: &str) -> WikiResult<u64> {
        Ok(self
            .storage
            .get(&format!("{}/.rev", root(tenant)))
            .await?
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0))
    }

    /// The tenant's search index, at the revision of its pages: rebuilt from the pages first
    /// when it is behind (or was lost).
    pub(crate) async fn fresh_index(&self, tenant: &str) -> WikiResult<Arc<TenantIndex>> {
        let index = self.indexes.tenant(tenant)?;
        let rev = self.stored_rev(tenant).await?;
        if index.rev() == rev {
            return Ok(index);
        }
        let gate = {
            let mut gates = self.rebuilding.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(gates.entry(tenant.to_owned()).or_default())
        };
        let _rebuilding = gate.lock().await;
        let rev = self.stored_rev(tenant).await?;
        if index.rev() == rev {
            return Ok(index);
        }
        let pages = self.pages(tenant).await?;
        let count = pages.len();
        let builder = Arc::clone(&index);
        crate::work::cpu(move || {
            let docs = pages.values().flat_map(pages::index_docs).collect();
            builder.rebuild(docs, rev)
        })
        .await??;
        tracing::info!(
            tenant,
            pages = count,
            rev,
            "search index rebuilt from the pages"
        );
        Ok(index)
    }

    /// The text at `key` as `batch` leaves it (its pending write, else the stored one).
    pub(crate) async fn read_through(
        &self,
        batch: &Batch,
        key: &str,
    ) -> WikiResult<Option<String>> {
        match batch.get(key) {
            Some(write) => Ok(write.map(str::to_owned)),
            None => Ok(self.storage.get(key).await?),
        }
    }

    /// A page as `batch` leaves it.
    pub(crate) async fn read_page(
        &self,
        tenant: &str,
        batch: &Batch,
        path: &str,
    ) -> WikiResult<Option<Page>> {
        let key = format!("{}/wiki/{path}", root(tenant));
        Ok(self
            .read_through(batch, &key)
            .await?
            .and_then(|text| Page::parse(path, &text)))
    }

    pub(crate) async fn write_page(
        &self,
        tenant: &str,
        page: &Page,
        receipts: &mut Vec<Receipt>,
        batch: &mut Batch,
    ) -> WikiResult<bool> {
        let key = format!("{}/wiki/{}", root(tenant), page.path);
        let rendered = page.render();
        let existing = self.read_through(batch, &key).await?;
        let change = match &existing {
            None => "created",
            Some(old) if *old == rendered => "unchanged",
            Some(_) => "updated",
        };
        if change != "unchanged" {
            batch.put(key, rendered);
        }
        receipts.retain(|r| r.path != format!("wiki/{}", page.path));
        receipts.push(Receipt {
            path: format!("wiki/{}", page.path),
            change,
        });
        Ok(change != "unchanged")
    }

    pub(crate) async fn append_log(
        &self,
        tenant: &str,
        op: &str,
        title: &str,
        batch: &mut Batch,
    ) -> WikiResult<()> {
        let key = format!("{}/wiki/log.md", root(tenant));
        let mut log = self
            .read_through(batch, &key)
            .await?
            .unwrap_or_else(|| "# Wiki log\n".to_owned());
        log.push_str(&format!(
            "\n## [{}] {op} | {}\n",
            (self.today)(),
            crate::page::label(title)
        ));
        batch.put(key, log);
        Ok(())
    }

    /// Commits `batch` with the tenant's next revision and brings the index to it: documents
    /// of `changed` pages (paths under `wiki/`) replaced by those of their new versions.
    pub(crate) async fn commit(
        &self,
        tenant: &str,
        lease: &TenantLease,
        index: &Arc<TenantIndex>,
        mut batch: Batch,
        changed: Vec<Page>,
        removed: Vec<String>,
    ) -> WikiResult<()> {
        let rev = self.stored_rev(tenant).await? + 1;
        batch.put(format!("{}/.rev", root(tenant)), rev.to_string());
        self.storage.commit(lease, batch).await?;
        let mut paths: Vec<String> = changed.iter().map(|p| p.path.clone()).collect();
        paths.extend(removed);
        // The index commit (and the segment merges it waits for) is CPU and disk work of tens
        // of milliseconds: off the request threads, where it held other tenants' queries
        // behind it during a bulk load.
        let index = Arc::clone(index);
        crate::work::cpu(move || {
            let docs: Vec<crate::index::Doc> = changed.iter().flat_map(pages::index_docs).collect();
            index.apply(&paths, docs, rev)
        })
        .await??;
        Ok(())
    }

    /// Renders `index.md` from the index's catalogue with `changed` pages applied.
    pub(crate) fn render_index(
        catalogue: Vec<crate::index::CatalogEntry>,
        changed: &[Page],
    ) -> String {
        let lines = catalogue
            .into_iter()
            .map(|e| {
                let line = index_line(&e.path, &e.title, &e.summary);
                (e.path, line)
            })
            .collect();
        index_text(lines, changed)
    }

    /// `index.md` as `existing` (a file [`Wiki::render_index`] or this wrote) with the entries
    /// of `changed` pages put in, added or replaced: no catalogue read, so an ingest costs the
    /// file's size, not a fetch of every page from the index.
    pub(crate) fn update_index(existing: &str, changed: &[Page]) -> String {
        let lines = existing
            .lines()
            .filter_map(|line| {
                let link = line.strip_prefix("- [[")?.split(['|', ']']).next()?;
                Some((format!("{link}.md"), line.to_owned()))
            })
            .collect();
        index_text(lines, changed)
    }

    /// Purges a tenant's search index (its pages are purged by the storage).
    pub fn forget_index(&self, tenant: &str) {
        self.indexes.drop_tenant(tenant);
    }

    /// Today (`YYYY-MM-DD`), from the configured clock.
    pub(crate) fn today(&self) -> String {
        (self.today)()
    }

    /// Checks the wiki for defects; writes `lint-report.md` when `publish`.
    pub async fn lint(
        &self,
        tenant: &str,
        scope: &str,
        publish: bool,
        staleness_days: u32,
    ) -> WikiResult<Value> {
        self.lint_with(tenant, scope, publish, staleness_days, &no_progress)
            .await
    }

    /// Writes the lint report page (`wiki/lint-report.md`: one row per finding) and a log line.
    async fn publish_lint(
        &self,
        tenant: &str,
        scope: &str,
        index: &Arc<TenantIndex>,
        findings: &[crate::lint::Finding],
    ) -> WikiResult<()> {
        let lease = self.storage.lock(tenant).await?;
        let mut report = format!(
            "# Lint report ({})\n\nScope: {scope}. Findings: {}.\n\n",
            (self.today)(),
            findings.len()
        );
        report.push_str(
            "| Rule | Severity | Page | Evidence | Suggestion |\n|---|---|---|---|---|\n",
        );
        let cell = |text: &str| crate::page::label(text).replace('|', "\\|");
        for f in findings {
            report.push_str(&format!(
                "| {} | {} | wiki/{} | {} | {} |\n",
                f.rule.name(),
                f.severity.name(),
                cell(&f.page),
                cell(&f.evidence),
                cell(&f.suggestion),
            ));
        }
        let mut batch = Batch::default();
        batch.put(format!("{}/wiki/lint-report.md", root(tenant)), report);
        self.append_log(tenant, "lint", scope, &mut batch).await?;
        self.commit(tenant, &lease, index, batch, Vec::new(), Vec::new())
            .await?;
        lease.release().await;
        Ok(())
    }

    /// [`Wiki::lint`], telling `progress` as each rule finishes.
    pub async fn lint_with(
        &self,
        tenant: &str,
        scope: &str,
        publish: bool,
        staleness_days: u32,
        progress: Progress<'_>,
    ) -> WikiResult<Value> {
        let folder = match scope {
            "full" => None,
            "concepts" | "entities" | "sources" | "syntheses" => Some(scope),
            other => return Err(WikiError::Invalid(format!("unknown scope {other:?}"))),
        };
        if !(0..=365).contains(&staleness_days) {
            return Err(WikiError::Invalid(
                "staleness_days must be between 0 and 365".into(),
            ));
        }
        let index = self.fresh_index(tenant).await?;
        progress(
            0.0,
            1.0 + crate::lint::RULES.len() as f64,
            "reading the pages",
        );
        let pages = self.pages(tenant).await?;
        let index_md = self
            .storage
            .get(&format!("{}/wiki/index.md", root(tenant)))
            .await?
            .unwrap_or_default();
        // Claims are grouped by the attribute the tenant's synonym table makes of theirs: a
        // "head count" and a "staff" it says are one are compared.
        let synonyms = self.synonyms(tenant).await?;
        let mut claims = index.all_claims()?;
        for found in &mut claims {
            if let std::borrow::Cow::Owned(meaning) = synonyms.attribute(&found.claim.attribute) {
                found.claim.attribute = meaning;
            }
        }
        let pages_checked = pages.len();
        let total = 1.0 + crate::lint::RULES.len() as f64;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, String)>();
        let work = crate::work::cpu(move || {
            let input = crate::lint::Input {
                pages: &pages,
                index: &index_md,
                claims: &claims,
                staleness_days,
            };
            crate::lint::run(&input, &|done, _, name| {
                let _ = tx.send((done, name.to_owned()));
            })
        });
        tokio::pin!(work);
        let findings = loop {
            tokio::select! {
                Some((done, name)) = rx.recv() => {
                    progress(1.0 + done as f64, total, &format!("rule {name} checked"));
                }
                findings = &mut work => break findings?,
            }
        };
        let findings: Vec<crate::lint::Finding> = findings
            .into_iter()
            .filter(|f| {
                folder.is_none_or(|folder| {
                    f.page.starts_with(&format!("{folder}/")) || f.page == "index.md"
                })
            })
            .collect();
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for finding in &findings {
            *counts.entry(finding.rule.name()).or_insert(0) += 1;
        }
        if publish {
            self.publish_lint(tenant, scope, &index, &findings).await?;
        }
        Ok(serde_json::json!({
            "scope": scope,
            "pages_checked": pages_checked,
            "findings": findings.iter().map(crate::lint::Finding::to_json).collect::<Vec<_>>(),
            "counts": counts,
            "report": if publish { serde_json::json!("wiki/lint-report.md") } else { Value::Null },
            "cost_usd": 0.0,
        }))
    }
}

/// One entry of `index.md`. Titles and summaries come from sources: they must not break the
/// link syntax or start new Markdown blocks.
fn index_line(path: &str, title: &str, summary: &str) -> String {
    let link = path.trim_end_matches(".md");
    let title = crate::page::label(title);
    let summary = crate::page::label(summary);
    if summary.is_empty() {
        format!("- [[{link}|{title}]]")
    } else {
        format!("- [[{link}|{title}]] — {summary}")
    }
}

/// `index.md` from its entries (path → line) with those of `changed` pages put in, grouped
/// by kind in path order.
fn index_text(mut lines: std::collections::BTreeMap<String, String>, changed: &[Page]) -> String {
    for page in changed {
        lines.insert(
            page.path.clone(),
            index_line(&page.path, page.title(), page.get("summary")),
        );
    }
    let mut out = String::from("# Wiki index\n");
    for kind in crate::page::KINDS {
        let prefix = format!("{kind}/");
        let members: Vec<&String> = lines
            .iter()
            .filter(|(path, _)| path.starts_with(&prefix))
            .map(|(_, line)| line)
            .collect();
        if members.is_empty() {
            continue;
        }
        out.push_str(&format!("\n## {} ({})\n", capitalise(kind), members.len()));
        for line in members {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub(crate) fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}
impl tp_registry::HasErrorCode for WikiError {
    fn code(&self) -> tp_registry::ErrorCode {
        use tp_registry::ErrorCode;
        match self {
            WikiError::Invalid(_) => ErrorCode::InvalidArgument,
            WikiError::Forbidden(_) => ErrorCode::PermissionDenied,
            WikiError::Fetch(_) => ErrorCode::FailedPrecondition,
            WikiError::Storage(error) => tp_registry::HasErrorCode::code(error),
            WikiError::Quota(_) => ErrorCode::ResourceExhausted,
            WikiError::Internal(_) => ErrorCode::Internal,
        }
    }
}
