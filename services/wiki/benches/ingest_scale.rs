//! Ingest cost against the tenant's size (issue 32: "ingest cost independent of the tenant's
//! size"). One tenant on a local folder with its search index on disk, as `tp-wiki` runs by
//! default; documents ingested one after another (`support/memos.rs`), each naming people, companies
//! and cities that recur across the corpus (so that hub pages — an entity every tenth document mentions — grow
//! as they do with real material). Prints the mean cost per document of each block and the
//! last block's ratio to the first block's, measured in the same run.
//!
//! Run: `cargo bench -p tp-wiki --bench ingest_scale` (`WIKI_SCALE_DOCS` sets the count).

use std::time::{Duration, Instant};

use tp_wiki::{Source, Storage, Wiki};

#[path = "support/memos.rs"]
mod memos;

use memos::{People, memo};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let total: usize = std::env::var("WIKI_SCALE_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_200);
    let block = (total / 6).max(1);
    let dir = tempfile::tempdir().expect("temporary folder");
    let wiki = Wiki::new(Storage::local(&dir.path().join("store")).expect("local store"))
        .with_index_dir(dir.path().join("index"))
        .with_today(|| "2026-11-27".to_owned());
    let mut blocks: Vec<(usize, Duration)> = Vec::new();
    let mut spent = Duration::ZERO;
    for n in 0..total {
        let memos::Memo { label, text, .. } = memo(n, People::Recurring);
        let started = Instant::now();
        wiki.ingest(
            "scale",
            Source {
                text,
                label,
                doc_type: "auto".into(),
                ..Default::default()
            },
        )
        .await
        .expect("ingest");
        spent += started.elapsed();
        if (n + 1) % block == 0 {
            let pages = wiki.pages("scale").await.expect("pages").len();
            blocks.push((pages, spent / u32::try_from(block).unwrap_or(1)));
            spent = Duration::ZERO;
        }
    }
    let Some(&(_, first)) = blocks.first() else {
        return;
    };
    let line: Vec<String> = blocks
        .iter()
        .map(|(pages, mean)| format!("{mean:.1?} at {pages} pages"))
        .collect();
    let (pages, last) = blocks[blocks.len() - 1];
    println!(
        "ingest cost per document, {total} documents into one tenant in blocks of {block} (local folder, index on disk): {}; last block {:.2}x the first ({pages} pages)",
        line.join(", "),
        last.as_secs_f64() / first.as_secs_f64()
    );
    // Before the index's merges were let finish (2026-11-27) this ratio was 3.47 at 1,200
    // documents and rising; it has been 0.66 to 0.77 since. A block is 200 documents, enough to
    // smooth this shared machine's noise; the bound leaves room for it.
    assert!(
        last.as_secs_f64() <= 2.5 * first.as_secs_f64(),
        "ingest cost grows with the tenant's size: the last block costs {:.2}x the first",
        last.as_secs_f64() / first.as_secs_f64()
    );
}
