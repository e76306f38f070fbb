//! The wiki engine over an in-memory object store with a fixed clock.
#![allow(
    clippy::unwrap_used,
    reason = "test helpers panic on unexpected shapes"
)]

use serde_json::Value;
use tp_wiki::{Source, Storage, Wiki};

fn today() -> String {
    "2026-11-23".to_owned()
}

fn wiki() -> Wiki {
    Wiki::new(Storage::memory()).with_today(today)
}

fn text(label: &str, body: &str) -> Source {
    Source {
        text: body.to_owned(),
        label: label.to_owned(),
        origin: None,
        doc_type: "auto".to_owned(),
        ..Default::default()
    }
}

const MEMO: &str = "The board of Acme Corp met in Berlin on 3 October. Jane Smith presented the Q3 results. \
Revenue reached $4.2M in the third quarter, ahead of plan. The board approved a new office in Berlin. \
Acme Corp was founded in 1999 by Jane Smith. Hiring will focus on data engineering in the Berlin office.";

const PROFILE: &str = "Acme Corp is a data company. Acme Corp was founded in 2001 in Ohio. \
The company employs data engineering teams in Ohio and Berlin. Jane Smith is the chief executive.";

fn changed(result: &Value) -> Vec<String> {
    result["pages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["change"] != "unchanged")
        .map(|p| {
            format!(
                "{} {}",
                p["change"].as_str().unwrap(),
                p["path"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn ingest_writes_pages_index_and_log_and_is_idempotent() {
    let wiki = wiki();
    let first = wiki
        .ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    let created = changed(&first);
    assert!(
        created.contains(&"created wiki/sources/q3-board-memo.md".to_owned()),
        "{created:?}"
    );
    assert!(
        created.contains(&"created wiki/entities/acme-corp.md".to_owned()),
        "{created:?}"
    );
    assert!(
        created.contains(&"created wiki/entities/jane-smith.md".to_owned()),
        "{created:?}"
    );
    assert!(
        created
            .iter()
            .any(|c| c.starts_with("created wiki/concepts/")),
        "{created:?}"
    );
    assert_eq!(first["doc_type"], "note");
    let storage = wiki.storage();
    let index = storage
        .get("wiki/acme/wiki/index.md")
        .await
        .unwrap()
        .unwrap();
    assert!(
        index.contains("[[sources/q3-board-memo|Q3 board memo]]"),
        "{index}"
    );
    let log = storage.get("wiki/acme/wiki/log.md").await.unwrap().unwrap();
    assert!(
        log.contains("## [2026-11-23] ingest | Q3 board memo"),
        "{log}"
    );
    let raw = storage.list("wiki/acme/raw").await.unwrap();
    let texts: Vec<&String> = raw.iter().filter(|k| k.ends_with(".txt")).collect();
    assert_eq!(texts.len(), 1, "content-hash id: {raw:?}");

    // The same source again: nothing changes, nothing is logged.
    let again = wiki
        .ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    assert!(changed(&again).is_empty(), "{:?}", changed(&again));
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(
        storage.get("wiki/acme/wiki/log.md").await.unwrap().unwrap(),
        log
    );

    // A second source updates the shared entity page with a dated mention.
    let second = wiki
        .ingest("acme", text("Company profile", PROFILE))
        .await
        .unwrap();
    assert!(
        changed(&second).contains(&"updated wiki/entities/acme-corp.md".to_owned()),
        "{:?}",
        changed(&second)
    );
    let entity = storage
        .get("wiki/acme/wiki/entities/acme-corp.md")
        .await
        .unwrap()
        .unwrap();
    assert!(
        entity.contains("- [2026-11-23] [[sources/q3-board-memo#^s0]]"),
        "{entity}"
    );
    assert!(entity.contains("[[sources/company-profile#^s"), "{entity}");
}

/// The i-th of eight small sources that all touch the same entity page.
fn note(i: usize) -> Source {
    text(
        &format!("Note {i}"),
        &format!(
            "Acme Corp opened office number {i} in Springfield. Jane Smith visited the office {i} team."
        ),
    )
}

/// Every note of eight is in the index, the log and the shared entity page.
async fn assert_no_note_lost(storage: &Storage) {
    let read = |key: &'static str| async move { storage.get(key).await.unwrap().unwrap() };
    let index = read("wiki/acme/wiki/index.md").await;
    let log = read("wiki/acme/wiki/log.md").await;
    let entity = read("wiki/acme/wiki/entities/acme-corp.md").await;
    for i in 0..8 {
        assert!(
            index.contains(&format!("[[sources/note-{i}|Note {i}]]")),
            "index lost note {i}"
        );
        assert!(
            log.contains(&format!("ingest | Note {i}\n")),
            "log lost note {i}"
        );
        assert!(
            entity.contains(&format!("[[sources/note-{i}#^s0]]")),
            "entity page lost note {i}"
        );
    }
}

#[tokio::test]
async fn concurrent_ingests_lose_no_update() {
    let wiki = wiki();
    let sources: Vec<Source> = (0..8).map(note).collect();
    let results =
        futures::future::join_all(sources.into_iter().map(|s| wiki.ingest("acme", s))).await;
    assert!(results.iter().all(Result::is_ok));
    let storage = wiki.storage();
    assert_no_note_lost(storage).await;
}

#[tokio::test]
async fn queries_cite_every_sentence_and_admit_ignorance() {
    let wiki = wiki();
    wiki.ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    wiki.ingest("acme", text("Company profile", PROFILE))
        .await
        .unwrap();
    for format in ["markdown", "summary_with_sources", "comparison_table"] {
        let answer = wiki
            .query("acme", "Where will the new office be?", 8, format, false)
            .await
            .unwrap();
        assert_eq!(answer["answered"], true, "{answer}");
        let text = answer["answer"].as_str().unwrap();
        assert!(text.contains("office in Berlin"), "{format}: {text}");
        for line in text
            .lines()
            .filter(|l| l.starts_with("- ") || l.starts_with("| ") && !l.starts_with("| Page"))
        {
            assert!(
                line.contains("[[sources/"),
                "{format}: uncited line {line:?}"
            );
        }
        if format == "summary_with_sources" {
            assert!(text.contains("Sources:\n[1] [[sources/"), "{text}");
        }
    }
    let nothing = wiki
        .query(
            "acme",
            "What is the recipe for sourdough bread?",
            8,
            "markdown",
            false,
        )
        .await
        .unwrap();
    assert_eq!(nothing["answered"], false, "{nothing}");
    assert!(nothing["citations"].as_array().unwrap().is_empty());

    // Persisted answers become pages later queries can find.
    let kept = wiki
        .query("acme", "When was Acme Corp founded?", 8, "markdown", true)
        .await
        .unwrap();
    assert_eq!(
        kept["persisted"],
        "wiki/outputs/when-was-acme-corp-founded.md"
    );
    let index = wiki
        .storage()
        .get("wiki/acme/wiki/index.md")
        .await
        .unwrap()
        .unwrap();
    assert!(
        index.contains("[[outputs/when-was-acme-corp-founded|"),
        "{index}"
    );

    // Bad input.
    assert!(wiki.query("acme", "", 8, "markdown", false).await.is_err());
    assert!(
        wiki.query("acme", &"x".repeat(2001), 8, "markdown", false)
            .await
            .is_err()
    );
    assert!(
        wiki.query("acme", "ok?", 0, "markdown", false)
            .await
            .is_err()
    );
    assert!(wiki.query("acme", "ok?", 8, "poem", false).await.is_err());
}

#[tokio::test]
async fn tenants_never_see_each_other() {
    let wiki = wiki();
    wiki.ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    let other = wiki
        .query(
            "globex",
            "Where will the new office be?",
            8,
            "markdown",
            false,
        )
        .await
        .unwrap();
    assert_eq!(other["answered"], false);
    assert!(wiki.pages("globex").await.unwrap().is_empty());
    assert!(wiki.storage().list("wiki/globex").await.unwrap().is_empty());
}

#[tokio::test]
async fn lint_finds_planted_defects() {
    let wiki = wiki();
    wiki.ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    wiki.ingest("acme", text("Company profile", PROFILE))
        .await
        .unwrap();
    let storage = wiki.storage();
    // A synthesis with a broken link, an unlinked mention, bad front matter, not in the index.
    storage
        .put(
            "wiki/acme/wiki/syntheses/strategy.md",
            "---\ntitle: \"Strategy\"\ntype: \"concept\"\nupdated: \"2026-11-23\"\n---\n# Strategy\nSee [[entities/ghost]]. Jane Smith leads it.\n",
        )
        .await
        .unwrap();
    let report = wiki.lint("acme", "full", true, 90).await.unwrap();
    let rules: Vec<(String, String)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["page"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let has = |rule: &str, page: &str| rules.iter().any(|(r, p)| r == rule && p == page);
    assert!(
        has("contradiction", "wiki/entities/acme-corp.md"),
        "{rules:?}"
    );
    assert!(
        has("broken_link", "wiki/syntheses/strategy.md"),
        "{rules:?}"
    );
    assert!(
        has("front_matter", "wiki/syntheses/strategy.md"),
        "{rules:?}"
    );
    assert!(
        has("index_drift", "wiki/syntheses/strategy.md"),
        "{rules:?}"
    );
    assert!(has("orphan", "wiki/syntheses/strategy.md"), "{rules:?}");
    assert!(
        has("missing_cross_reference", "wiki/syntheses/strategy.md"),
        "{rules:?}"
    );
    let evidence = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "contradiction")
        .unwrap()["evidence"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        evidence.contains("1999") && evidence.contains("2001"),
        "{evidence}"
    );
    let written = storage
        .get("wiki/acme/wiki/lint-report.md")
        .await
        .unwrap()
        .unwrap();
    assert!(
        written.contains("| contradiction | error | wiki/entities/acme-corp.md |"),
        "{written}"
    );
    // Scoped lint only reports that folder.
    let scoped = wiki.lint("acme", "entities", false, 90).await.unwrap();
    assert!(scoped["findings"].as_array().unwrap().iter().all(|f| {
        f["page"].as_str().unwrap().starts_with("wiki/entities/") || f["page"] == "wiki/index.md"
    }));
    assert!(wiki.lint("acme", "everything", false, 90).await.is_err());
    assert!(wiki.lint("acme", "full", false, 366).await.is_err());
    assert!(wiki.lint("acme", "full", false, 0).await.is_ok());
}

#[tokio::test]
async fn source_pages_match_the_golden_file() {
    let wiki = wiki();
    wiki.ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    let page = wiki
        .storage()
        .get("wiki/acme/wiki/sources/q3-board-memo.md")
        .await
        .unwrap()
        .unwrap();
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/q3-board-memo.md");
    if std::env::var_os("TOOLPLANE_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &page).unwrap();
    }
    let expected = std::fs::read_to_string(&golden)
        .expect("golden file (TOOLPLANE_UPDATE_GOLDEN=1 writes it)");
    assert_eq!(page, expected);
}

#[tokio::test]
async fn oversized_and_empty_sources_are_refused() {
    let wiki = wiki();
    assert!(wiki.ingest("acme", text("empty", "   ")).await.is_err());
    assert!(
        wiki.ingest("acme", text("huge", &"a".repeat(500_001)))
            .await
            .is_err()
    );
    assert!(
        wiki.storage().list("wiki/acme").await.unwrap().is_empty(),
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_folder_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    // Two services, two in-process locks, one storage: only the lease object serialises them.
    let replicas = [
        Wiki::new(Storage::local(dir.path()).unwrap()).with_today(today),
        Wiki::new(Storage::local(dir.path()).unwrap()).with_today(today),
    ];
    let ingests = (0..8).map(|i| {
        let wiki = replicas[i % 2].clone();
        async move { wiki.ingest("acme", note(i)).await }
    });
    for result in futures::future::join_all(ingests).await {
        result.unwrap();
    }
    let storage = replicas[0].storage();
    assert_no_note_lost(storage).await;
    assert!(
        storage.get("wiki/acme/.lock").await.unwrap().is_none(),
        "leases are released"
    );
}

#[tokio::test]
async fn an_expired_lease_of_a_dead_writer_is_taken_over() {
    let wiki = wiki();
    wiki.storage()
        .put("wiki/acme/.lock", "dead-writer 1")
        .await
        .unwrap();
    wiki.ingest("acme", text("Q3 board memo", MEMO))
        .await
        .unwrap();
    assert!(
        wiki.storage()
            .get("wiki/acme/.lock")
            .await
            .unwrap()
            .is_none()
    );
}
