//! The persistent per-tenant search index: tantivy, one directory per tenant
//! (`<index-dir>/{tenant}/`, in memory for in-memory stores), updated at every write of the
//! tenant's pages. Pages stay the source of truth: the index records the revision of the pages
//! it reflects (`wiki/{tenant}/.rev` in the store), and an index that is missing, unreadable or
//! behind is rebuilt from the pages before it answers.
//!
//! Three kinds of documents, all filed under the path of the page they come from:
//! - `page`: every page's title, aliases and summary, its folder, and the entity keys it names
//!   (what a question's names resolve against, and the catalogue `index.md` is written from);
//! - `passage`: every sentence of a source, with its citation and the entity keys it mentions;
//! - `claim`: every claim (entity, attribute, value, unit, date) with its sentence and citation.
//!
//! A query costs one index lookup, whatever the number of pages.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
    Value as _,
};
use tantivy::tokenizer::TokenStream as _;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// Why the search index could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// tantivy failed.
    #[error("search index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The index directory could not be used.
    #[error("search index directory: {0}")]
    Io(#[from] std::io::Error),
}

/// Result alias.
pub type IndexResult<T> = Result<T, IndexError>;

/// One document to index.
#[derive(Debug, Clone)]
pub enum Doc {
    /// A wiki page: its title, aliases, summary and folder.
    Page {
        /// Path under `wiki/` (`entities/portugal.md`).
        path: String,
        /// The page's title (its entity key comes from it).
        title: String,
        /// Summary (one line).
        summary: String,
        /// Aliases and other names, space-separated (searchable).
        names: String,
        /// Entity keys the page stands for (its title's and its aliases' keys).
        keys: Vec<String>,
    },
    /// A sentence of a source.
    Passage {
        /// The source page's path.
        path: String,
        /// The source's title.
        title: String,
        /// `[[sources/x#^s3]]`.
        cite: String,
        /// The sentence.
        text: String,
        /// Keys of the entities it mentions.
        keys: Vec<String>,
        /// The source's date (`YYYYMMDD`, 0 unknown).
        date: u64,
    },
    /// A claim stated on a source page, indexed for lint and answers.
    Claim {
        /// The source page's path.
        path: String,
        /// `[[sources/x#^s3]]`.
        cite: String,
        /// The sentence.
        text: String,
        /// What the claim says (subject, attribute, value).
        claim: crate::claims::Claim,
    },
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    kind: Field,
    path: Field,
    folder: Field,
    title: Field,
    text: Field,
    names: Field,
    summary: Field,
    cite: Field,
    key: Field,
    attribute: Field,
    value: Field,
    number: Field,
    unit: Field,
    date: Field,
    entity: Field,
    /// A claim's qualifiers and replaced value (JSON).
    extra: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let stemmed = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("en_stem")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let fields = Fields {
        kind: builder.add_text_field("kind", STRING | STORED),
        path: builder.add_text_field("path", STRING | STORED),
        folder: builder.add_text_field("folder", STRING | STORED),
        title: builder.add_text_field("title", stemmed.clone()),
        text: builder.add_text_field("text", stemmed.clone()),
        names: builder.add_text_field("names", stemmed),
        summary: builder.add_text_field("summary", STORED),
        cite: builder.add_text_field("cite", STORED),
        key: builder.add_text_field("key", STRING | STORED),
        attribute: builder.add_text_field("attribute", STRING | STORED),
        value: builder.add_text_field("value", STORED),
        number: builder.add_f64_field("number", STORED),
        unit: builder.add_text_field("unit", STORED),
        date: builder.add_u64_field("date", STORED | FAST),
        entity: builder.add_text_field("entity", STORED),
        extra: builder.add_text_field("extra", STORED),
    };
    (builder.build(), fields)
}

/// A passage found for a question.
#[derive(Debug, Clone)]
pub struct Passage {
    /// The source page.
    pub path: String,
    /// The source page's title.
    pub title: String,
    /// The citation.
    pub cite: String,
    /// The sentence.
    pub text: String,
    /// BM25 score.
    pub score: f32,
    /// Entity keys it mentions.
    pub keys: Vec<String>,
    /// The source's date.
    pub date: u64,
}

/// A claim found in the index, with where it was read.
#[derive(Debug, Clone)]
pub struct FoundClaim {
    /// The source page.
    pub path: String,
    /// The citation.
    pub cite: String,
    /// The sentence.
    pub text: String,
    /// What the sentence states (subject, attribute, value).
    pub claim: crate::claims::Claim,
}

/// A page of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// Path under `wiki/`.
    pub path: String,
    /// The page's title, as the catalogue lists it.
    pub title: String,
    /// The page's summary line, as the catalogue lists it.
    pub summary: String,
}

/// The index of one tenant.
pub struct TenantIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    rev: AtomicU64,
    rev_file: Option<PathBuf>,
    writer: Mutex<()>,
}

impl std::fmt::Debug for TenantIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantIndex")
            .field("rev", &self.rev.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Every tenant's index, opened on first use and kept while in use (at most 256 at once).
#[derive(Debug, Clone)]
pub struct Indexes {
    root: Option<PathBuf>,
    open: Arc<Mutex<HashMap<String, Arc<TenantIndex>>>>,
}

/// Tenant indexes kept open.
const OPEN: usize = 256;

fn str_of(doc: &TantivyDocument, field: Field) -> String {
    doc.get_first(field)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

fn strs_of(doc: &TantivyDocument, field: Field) -> Vec<String> {
    doc.get_all(field)
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

impl Indexes {
    /// Indexes under `root` (one directory per tenant).
    pub fn on_disk(root: PathBuf) -> Indexes {
        Indexes {
            root: Some(root),
            open: Arc::default(),
        }
    }

    /// Indexes in memory (for in-memory stores: tests, benchmarks).
    pub fn in_memory() -> Indexes {
        Indexes {
            root: None,
            open: Arc::default(),
        }
    }

    /// The index of `tenant`, opened (or created empty) on first use. An index that cannot be
    /// opened is thrown away and created empty; its revision is then 0, so it is rebuilt.
    pub fn tenant(&self, tenant: &str) -> IndexResult<Arc<TenantIndex>> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = open.get(tenant) {
            return Ok(Arc::clone(index));
        }
        if open.len() >= OPEN {
            open.retain(|_, index| Arc::strong_count(index) > 1);
        }
        let index = Arc::new(self.open_tenant(tenant)?);
        open.insert(tenant.to_owned(), Arc::clone(&index));
        Ok(index)
    }

    fn open_tenant(&self, tenant: &str) -> IndexResult<TenantIndex> {
        let (schema, fields) = schema();
        let Some(root) = &self.root else {
            return TenantIndex::new(Index::create_in_ram(schema), fields, None);
        };
        let dir = root.join(tenant);
        let rev_file = dir.join("toolplane.rev");
        let opened = std::fs::create_dir_all(&dir)
            .map_err(IndexError::from)
            .and_then(|()| {
                let directory = tantivy::directory::MmapDirectory::open(&dir)
                    .map_err(|e| IndexError::Tantivy(e.into()))?;
                Ok(Index::open_or_create(directory, schema.clone())?)
            });
        match opened {
            Ok(index) => TenantIndex::new(index, fields, Some(rev_file)),
            Err(error) => {
                tracing::warn!(tenant, %error, "search index unreadable; rebuilding it from the pages");
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir)?;
                let index = Index::create_in_dir(&dir, schema)?;
                TenantIndex::new(index, fields, Some(rev_file))
            }
        }
    }

    /// Forgets and deletes the index of `tenant`.
    pub fn drop_tenant(&self, tenant: &str) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tenant);
        if let Some(root) = &self.root {
            let _ = std::fs::remove_dir_all(root.join(tenant));
        }
    }
}

impl TenantIndex {
    fn new(index: Index, fields: Fields, rev_file: Option<PathBuf>) -> IndexResult<TenantIndex> {
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let rev = rev_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        Ok(TenantIndex {
            index,
            reader,
            fields,
            rev: AtomicU64::new(rev),
            rev_file,
            writer: Mutex::new(()),
        })
    }

    /// The revision of the pages the index reflects.
    pub fn rev(&self) -> u64 {
        self.rev.load(Ordering::Acquire)
    }

    fn writer(&self) -> IndexResult<IndexWriter<TantivyDocument>> {
        Ok(self.index.writer_with_num_threads(1, 15_000_000)?)
    }

    fn document(&self, doc: Doc) -> TantivyDocument {
        let f = self.fields;
        let mut out = TantivyDocument::default();
        match doc {
            Doc::Page {
                path,
                title,
                summary,
                names,
                keys,
            } => {
                out.add_text(f.kind, "page");
                out.add_text(f.folder, path.split('/').next().unwrap_or_default());
                out.add_text(f.path, &path);
                out.add_text(f.title, &title);
                out.add_text(f.names, &names);
                out.add_text(f.summary, &summary);
                for key in keys {
                    out.add_text(f.key, &key);
                }
            }
            Doc::Passage {
                path,
                title,
                cite,
                text,
                keys,
                date,
            } => {
                out.add_text(f.kind, "passage");
                out.add_text(f.path, &path);
                out.add_text(f.title, &title);
                out.add_text(f.cite, &cite);
                out.add_text(f.text, &text);
                out.add_u64(f.date, date);
                for key in keys {
                    out.add_text(f.key, &key);
                }
            }
            Doc::Claim {
                path,
                cite,
                text,
                claim,
            } => {
                out.add_text(f.kind, "claim");
                out.add_text(f.path, &path);
                out.add_text(f.cite, &cite);
                out.add_text(f.text, &text);
                out.add_text(f.key, &claim.key);
                out.add_text(f.entity, &claim.entity);
                out.add_text(f.attribute, &claim.attribute);
                out.add_text(f.value, &claim.value);
                if let Some(number) = claim.number {
                    out.add_f64(f.number, number);
                }
                out.add_text(f.unit, &claim.unit);
                out.add_u64(f.date, u64::from(claim.date));
                out.add_text(
                    f.extra,
                    serde_json::json!({"qualifiers": claim.qualifiers, "replaces": claim.replaces})
                        .to_string(),
                );
            }
        }
        out
    }

    /// Replaces every document filed under `paths` with `docs`, and records `rev`.
    pub fn apply(&self, paths: &[String], docs: Vec<Doc>, rev: u64) -> IndexResult<()> {
        let _serial = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut writer = self.writer()?;
        for path in paths {
            writer.delete_term(Term::from_field_text(self.fields.path, path));
        }
        for doc in docs {
            writer.add_document(self.document(doc))?;
        }
        writer.commit()?;
        // The merges the commit scheduled run to their end here: a writer dropped at once
        // cancels them, and then every ingest left one more segment behind for each later
        // commit and query to open (ingest cost grew with the tenant's size).
        writer.wait_merging_threads()?;
        self.reader.reload()?;
        self.set_rev(rev)
    }

    /// Replaces the whole index with `docs` at `rev` (a rebuild from the pages).
    pub fn rebuild(&self, docs: Vec<Doc>, rev: u64) -> IndexResult<()> {
        let _serial = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut writer = self.writer()?;
        writer.delete_all_documents()?;
        for doc in docs {
            writer.add_document(self.document(doc))?;
        }
        writer.commit()?;
        self.reader.reload()?;
        self.set_rev(rev)
    }

    fn set_rev(&self, rev: u64) -> IndexResult<()> {
        if let Some(file) = &self.rev_file {
            let tmp = file.with_extension("tmp");
            std::fs::write(&tmp, rev.to_string())?;
            std::fs::rename(&tmp, file)?;
        }
        self.rev.store(rev, Ordering::Release);
        Ok(())
    }
}

mod search;

impl tp_registry::HasErrorCode for IndexError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            IndexError::Tantivy(_) | IndexError::Io(_) => tp_registry::ErrorCode::Internal,
        }
    }
}

#[cfg(test)]
mod tests;
