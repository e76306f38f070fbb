//! BM25 page ranking with tantivy, over titles, aliases, summaries and bodies (in that order of
//! weight). The index is built in RAM from the tenant's pages for each query: pages are the
//! source of truth, so it can never be stale or leak another tenant's pages.

use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{STORED, STRING, Schema, TEXT, Value as _};
use tantivy::{Index, TantivyDocument, doc};

use crate::page::Page;
use crate::text;

/// The `limit` best pages for `question` by BM25, as (path, score), best first; ties by path.
pub fn rank(
    pages: &std::collections::BTreeMap<String, Page>,
    question: &str,
    limit: usize,
) -> Vec<(String, f64)> {
    match try_rank(pages, question, limit) {
        Ok(ranked) => ranked,
        Err(error) => {
            tracing::warn!(%error, "ranking pages failed");
            Vec::new()
        }
    }
}

fn try_rank(
    pages: &std::collections::BTreeMap<String, Page>,
    question: &str,
    limit: usize,
) -> tantivy::Result<Vec<(String, f64)>> {
    // Only words reach the query parser: no syntax from the question.
    let words: Vec<String> = text::words(question)
        .into_iter()
        .filter(|w| !text::is_stopword(w) && w.len() > 1)
        .collect();
    if words.is_empty() || pages.is_empty() {
        return Ok(Vec::new());
    }
    let mut builder = Schema::builder();
    let path = builder.add_text_field("path", STRING | STORED);
    let title = builder.add_text_field("title", TEXT);
    let aliases = builder.add_text_field("aliases", TEXT);
    let summary = builder.add_text_field("summary", TEXT);
    let body = builder.add_text_field("body", TEXT);
    let index = Index::create_in_ram(builder.build());
    let mut writer = index.writer_with_num_threads(1, 30_000_000)?;
    for page in pages.values() {
        writer.add_document(doc!(
            path => page.path.clone(),
            title => page.title().to_owned(),
            aliases => page.list("aliases").join(" "),
            summary => page.get("summary").to_owned(),
            body => page.body.clone(),
        ))?;
    }
    writer.commit()?;
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let mut parser = QueryParser::for_index(&index, vec![title, aliases, summary, body]);
    parser.set_field_boost(title, 3.0);
    parser.set_field_boost(aliases, 2.0);
    parser.set_field_boost(summary, 2.0);
    let query = parser.parse_query(&words.join(" "))?;
    let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
    let mut ranked = Vec::with_capacity(top.len());
    for (score, address) in top {
        let document: TantivyDocument = searcher.doc(address)?;
        if let Some(found) = document.get_first(path).and_then(|v| v.as_str()) {
            ranked.push((found.to_owned(), f64::from(score)));
        }
    }
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(ranked)
}
