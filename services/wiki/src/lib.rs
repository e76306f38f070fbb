//! The per-tenant compounding wiki behind the `client_wiki` tool (ADR-037): ingest sources,
//! query with citations, lint for defects. Deterministic and local by default: pages live in
//! an object store (a folder by default) under `wiki/{tenant}/`, ranking is BM25 (tantivy),
//! and every sentence of an answer cites its page.

pub mod claims;
pub mod engine;
pub mod fetch;
pub mod index;
pub mod keys;
pub mod lint;
pub mod llm;
pub mod page;
pub mod service;
pub mod storage;
pub mod synonyms;
pub mod text;
pub mod vocabulary;
pub mod work;

pub use engine::{Quotas, Receipt, Source, Wiki, WikiError};
pub use fetch::{FetchConfig, Fetcher};
pub use llm::{Llm, LlmConfig};
pub use service::{WikiService, serve, serve_tls};
pub use storage::Storage;
