//! Wiki benchmarks: ingest of a 500,000-character text, query latency on a wiki of 1,000+
//! pages, lint of that wiki. In-memory object store, release build, one thread.
//!
//! Run: `cargo bench --workspace --bench wiki`.

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

    // 2. A wiki of 1,000+ pages from many small sources.
    let wiki = Wiki::new(Storage::memory()).with_today(today);
    let started = Instant::now();
    let mut sources = 0;
    while wiki.pages("bench").await.expect("pages").len() < 1_000 {
        let mut text = document(sources, 6);
        // Distinct people and organisations so entity pages keep growing.
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
        sources += 1;
    }
    let pages = wiki.pages("bench").await.expect("pages").len();
    println!(
        "built a wiki of {pages} pages from {sources} sources in {:.2?}",
        started.elapsed()
    );

    let questions = [
        "What was the pricing strategy budget in Lisbon?",
        "Who presented the security review?",
        "Which company did Zed42 Quill42 join?",
        "When will the team revisit the hiring plan budget?",
        "What happened in Riga with the cloud migration review?",
    ];
    let mut latencies = Vec::new();
    let mut answered = 0;
    for round in 0..10 {
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
    println!(
        "query on {pages} pages: p50 {:.2?}, p99 {:.2?} over {} queries ({answered}/{} questions answered)",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.len(),
        questions.len()
    );

    let started = Instant::now();
    let report = wiki.lint("bench", "full", true, 90).await.expect("lint");
    println!(
        "lint of {pages} pages: {:.2?} ({} findings)",
        started.elapsed(),
        report["findings"].as_array().map_or(0, Vec::len)
    );
}
