//! Wiki benchmarks: ingest of a 500,000-character text; query latency (p50, p99) on wikis of
//! 1,000, 10,000 and 50,000 pages, with the ratio to the 1,000-page wiki's p50 measured in the
//! same run; lint of the 1,000-page wiki. In-memory object store, release build, one thread.
//!
//! Run: `cargo bench --workspace --bench wiki`.
#![allow(
    clippy::too_many_lines,
    reason = "a benchmark reads as one measurement"
)]

use std::time::{Duration, Instant};

use tp_wiki::{Source, Storage, Wiki};

const FIRST: [&str; 12] = [
    "Ada", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jana", "Kofi", "Lena",
];
const LAST: [&str; 10] = [
    "Adler", "Brandt", "Costa", "Duarte", "Eklund", "Fischer", "Garcia", "Horvat", "Ito", "Jensen",
];
const CITIES: [&str; 10] = [
    "Lisbon", "Porto", "Krakow", "Gdansk", "Lyon", "Nantes", "Utrecht", "Ghent", "Tartu", "Riga",
];
const TOPICS: [&str; 8] = [
    "pricing strategy",
    "data engineering",
    "warehouse automation",
    "customer churn",
    "security review",
    "hiring plan",
    "supply chain",
    "cloud migration",
];

fn company(i: usize) -> String {
    format!(
        "{} {}",
        [
            "Nova", "Blue", "Iron", "Silver", "North", "Delta", "Prime", "Urban"
        ][i % 8],
        [
            "Labs",
            "Systems",
            "Works",
            "Foods",
            "Energy",
            "Logistics",
            "Health",
            "Media"
        ][(i / 8) % 8]
    )
}

fn document(seed: usize, sentences: usize) -> String {
    let mut text = String::new();
    for s in 0..sentences {
        let k = seed * 31 + s * 7;
        let person = format!("{} {}", FIRST[k % FIRST.len()], LAST[(k / 3) % LAST.len()]);
        let place = CITIES[(k / 5) % CITIES.len()];
        let topic = TOPICS[(k / 7) % TOPICS.len()];
        let org = company(seed + s % 5);
        text.push_str(&format!(
            "{person} of {org} presented the {topic} review in {place} on day {s}. The team agreed to revisit the {topic} budget of {} thousand euros next quarter.\n",
            10 + k % 90
        ));
    }
    text
}

fn today() -> String {
    "2026-11-23".to_owned()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // 1. One 500,000-character source.
    let wiki = Wiki::new(Storage::memory()).with_today(today);
    let mut big = document(1, 4_000);
    big.truncate(500_000);
    let started = Instant::now();
    let result = wiki
        .ingest(
            "bench",
            Source {
                text: big.clone(),
                label: "Annual review".into(),
                origin: None,
                doc_type: "auto".into(),
                ..Default::default()
            },
        )
        .await
        .expect("ingest");
    let ingest_big = started.elapsed();
    println!(
        "ingest 500,000 chars: {:.2?} ({} sentences, {} pages written)",
        ingest_big,
        tp_wiki::text::sentences(&big).len(),
        result["pages"].as_array().map_or(0, Vec::len)
    );

    // 2. Query latency at 1,000, 10,000 and 50,000 pages. Each wiki gets 60 ingested sources
    // (real pages, claims, entity pages), then is filled to its size with pages written
    // straight to the store (sources with cited sentences and their entity pages), as another
    // replica would have written them: the first query finds the index behind the pages and
    // rebuilds it once; later queries cost one index lookup, whatever the page count.
    let questions = [
        "What was the pricing strategy budget in Lisbon?",
        "Who presented the security review?",
        "Which company did Zed42 Quill42 join?",
        "When will the team revisit the hiring plan budget?",
        "What happened in Riga with the cloud migration review?",
    ];
    let mut baseline: Option<Duration> = None;
    let mut small_wiki = None;
    for target in [1_000usize, 10_000, 50_000] {
        let wiki = Wiki::new(Storage::memory())
            .with_today(today)
            .with_quotas(tp_wiki::Quotas {
                max_pages: 100_000,
                ..Default::default()
            });
        let started = Instant::now();
        for sources in 0..60 {
            let mut text = document(sources, 6);
            text.push_str(&format!(
                "Contact person Zed{sources} Quill{sources} joined {} Group {sources}.\n",
                company(sources)
            ));
            wiki.ingest(
                "bench",
                Source {
                    text,
                    label: format!("Meeting notes {sources}"),
                    origin: None,
                    doc_type: "auto".into(),
                    ..Default::default()
                },
            )
            .await
            .expect("ingest");
        }
        let ingested = started.elapsed();
        let mut pages = wiki.pages("bench").await.expect("pages").len();
        let ingested_pages = pages;
        let storage = wiki.storage();
        let mut bulk = 0usize;
        while pages < target {
            for page in bulk_pages(bulk) {
                storage
                    .put(&format!("wiki/bench/wiki/{}", page.path), &page.render())
                    .await
                    .expect("put");
                pages += 1;
            }
            bulk += 1;
        }
        let rev: u64 = storage
            .get("wiki/bench/.rev")
            .await
            .expect("rev")
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        storage
            .put("wiki/bench/.rev", &(rev + 1).to_string())
            .await
            .expect("rev");
        let started = Instant::now();
        wiki.query("bench", questions[0], 8, "markdown", false)
            .await
            .expect("query");
        let rebuilt = started.elapsed();
        let mut latencies = Vec::new();
        let mut answered = 0;
        for round in 0..20 {
            for question in questions {
                let started = Instant::now();
                let answer = wiki
                    .query("bench", question, 8, "markdown", false)
                    .await
                    .expect("query");
                latencies.push(started.elapsed());
                if round == 0 && answer["answered"] == true {
                    answered += 1;
                }
            }
        }
        latencies.sort();
        let p50 = percentile(&latencies, 0.5);
        let base = *baseline.get_or_insert(p50);
        println!(
            "query on {pages} pages (60 sources ingested in {ingested:.2?}, {} written in bulk; index rebuilt by the first query in {rebuilt:.2?}): p50 {p50:.2?}, p99 {:.2?} over {} queries ({answered}/{} answered); p50 {:.2}x the 1,000-page wiki's",
            pages - ingested_pages,
            percentile(&latencies, 0.99),
            latencies.len(),
            questions.len(),
            p50.as_secs_f64() / base.as_secs_f64()
        );
        if target == 1_000 {
            small_wiki = Some((wiki, pages));
        }
    }

    let (wiki, pages) = small_wiki.expect("the 1,000-page wiki");
    let started = Instant::now();
    let report = wiki.lint("bench", "full", true, 90).await.expect("lint");
    println!(
        "lint of {pages} pages: {:.2?} ({} findings)",
        started.elapsed(),
        report["findings"].as_array().map_or(0, Vec::len)
    );
}

/// A source page with six cited sentences and the pages of the four people it names.
fn bulk_pages(n: usize) -> Vec<tp_wiki::page::Page> {
    let today = today();
    let link = format!("sources/bulk-notes-{n}");
    let mut source = tp_wiki::page::Page::new(
        format!("{link}.md"),
        &format!("Bulk notes {n}"),
        "source",
        &today,
    );
    let people: Vec<String> = (0..4).map(|k| format!("Yan{n} Vale{k}")).collect();
    let text = document(n + 1_000, 6);
    let mut body = format!("# Bulk notes {n}\n\n## Text\n");
    let mut sentences = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let sentence = format!(
            "{} met {}.",
            line.split('.').next().unwrap_or_default(),
            people[i % 4]
        );
        body.push_str(&format!("{sentence} ^s{i}\n"));
        sentences.push(sentence);
    }
    source.body = body;
    source
        .meta
        .insert("entities".into(), serde_json::json!(people));
    source
        .meta
        .insert("summary".into(), serde_json::json!(sentences[0]));
    let mut out = vec![source];
    for (k, person) in people.iter().enumerate() {
        let mut page = tp_wiki::page::Page::new(
            format!("entities/yan{n}-vale{k}.md"),
            person,
            "entity",
            &today,
        );
        page.body = format!(
            "# {person}\n\n## Mentions\n- [{today}] [[{link}#^s{k}]]: {}\n",
            sentences[k]
        );
        out.push(page);
    }
    out
}
