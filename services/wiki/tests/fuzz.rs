//! A seeded, structure-aware fuzz of the wiki's ingest (proptest): HTML with nested, broken
//! and unclosed tags, entities and Unicode whose case mapping changes byte lengths; Markdown
//! with headings, lists, tables and wiki links; labels full of link and table syntax. Every
//! input goes through the HTML reader, ingest, query and lint over an in-memory store: nothing
//! panics, and the index keeps one entry per line with links that resolve.
#![allow(clippy::unwrap_used, reason = "test code")]

use proptest::prelude::*;
use tp_wiki::{Source, Storage, Wiki};

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        Just("İstanbul İİİ".to_owned()),
        Just("\u{212A}elvin \u{130}".to_owned()),
        Just("Straße ﬁnance ǅ".to_owned()),
        Just("\u{202e}evil\u{200b}zero".to_owned()),
        Just("Acme Corp. Jane Smith met U.S. officials in the United States.".to_owned()),
        Just("[[entities/x|y]] ]] [[ | ^s1".to_owned()),
        Just("&amp;&lt;&#39;&nbsp;&bogus;".to_owned()),
        "[A-Z][a-z]{2,8} [A-Z][a-z]{2,8} (opened|bought|left) [A-Z][a-z]{3,9} in (19|20)[0-9]{2}\\.",
    ]
}

fn tag() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec![
        "p", "div", "h1", "h2", "li", "script", "style", "head", "title", "TITLE", "SCRIPT",
        "span", "br", "table", "td",
    ])
}

fn html() -> impl Strategy<Value = String> {
    prop::collection::vec((tag(), fragment(), any::<bool>(), any::<bool>()), 0..12).prop_map(
        |parts| {
            parts
                .into_iter()
                .map(|(tag, text, close, broken)| match (close, broken) {
                    (true, false) => format!("<{tag}>{text}</{tag}>"),
                    (false, false) => format!("<{tag} class=\"x\">{text}"),
                    (_, true) => format!("<{tag}{text}"),
                })
                .collect()
        },
    )
}

fn markdown() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            proptest::sample::select(vec!["# ", "## ", "- ", "| ", "> ", "", "1. ", "```\n"]),
            fragment(),
        ),
        1..15,
    )
    .prop_map(|lines| {
        lines
            .into_iter()
            .map(|(prefix, text)| format!("{prefix}{text}\n"))
            .collect()
    })
}

fn label() -> impl Strategy<Value = String> {
    prop_oneof![
        fragment(),
        Just("Evil]] [[entities/x|click]]\n# Heading | cell".to_owned()),
        Just("---\ntitle: injected\n---".to_owned()),
        "[\\[\\]|#\\n>*-]{1,12}",
    ]
}

fn run(inputs: Vec<(String, bool, String)>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let wiki = Wiki::new(Storage::memory());
        for (body, is_html, label) in &inputs {
            let text = if *is_html {
                tp_wiki::fetch::from_html(body).text
            } else {
                body.clone()
            };
            if text.trim().is_empty() {
                continue;
            }
            let source = Source {
                text,
                label: label.clone(),
                doc_type: "auto".into(),
                ..Default::default()
            };
            wiki.ingest("acme", source).await.unwrap();
        }
        for question in ["Who met whom?", "İstanbul", "[[entities/x]]", "|"] {
            wiki.query("acme", question, 8, "markdown", false)
                .await
                .unwrap();
        }
        wiki.lint("acme", "full", true, 90).await.unwrap();
        let index = wiki
            .storage()
            .get("wiki/acme/wiki/index.md")
            .await
            .unwrap()
            .unwrap_or_default();
        for line in index.lines() {
            assert!(
                line.is_empty() || line.starts_with('#') || line.starts_with("- [["),
                "an index line that is not an entry: {line:?}"
            );
            if let Some(rest) = line.strip_prefix("- [[") {
                let target = rest.split(['|', ']']).next().unwrap();
                let key = format!("wiki/acme/wiki/{target}.md");
                assert!(
                    wiki.storage().get(&key).await.unwrap().is_some(),
                    "{target} is listed but does not exist"
                );
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("TOOLPLANE_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(150),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn ingesting_hostile_html_markdown_and_labels_never_panics(
        inputs in prop::collection::vec(
            prop_oneof![
                (html(), Just(true), label()),
                (markdown(), Just(false), label()),
            ],
            1..4,
        )
    ) {
        run(inputs);
    }
}
