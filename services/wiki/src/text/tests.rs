use super::*;

#[test]
fn sentences_split_on_ends_but_not_abbreviations() {
    let s = sentences(
        "Dr. Smith joined Acme Corp. in 2019. Revenue grew! Did it?\n\nNew paragraph here",
    );
    assert_eq!(
        s,
        vec![
            "Dr. Smith joined Acme Corp. in 2019.",
            "Revenue grew!",
            "Did it?",
            "New paragraph here"
        ]
    );
}

#[test]
fn entities_are_capitalised_runs() {
    let s = sentences(
        "The board of Acme Corp met Jane Smith in Berlin. Later, Jane Smith left. The memo was short.",
    );
    let e = entities(&s);
    assert!(e.contains(&"Acme Corp".to_owned()), "{e:?}");
    assert!(e.contains(&"Jane Smith".to_owned()), "{e:?}");
    assert!(e.contains(&"Berlin".to_owned()), "{e:?}");
    assert!(!e.contains(&"The".to_owned()), "{e:?}");
}

#[test]
fn no_sentence_initial_fragments_and_acronyms_are_aliases() {
    let s = sentences(
        "The Lisbon office leads sales. In Lisbon, Portugal's capital, the U.S. embassy opened. The United States sent a delegation.",
    );
    let e = entities(&s);
    assert!(
        !e.iter()
            .any(|n| n.starts_with("The ") || n.starts_with("In ")),
        "{e:?}"
    );
    assert!(e.contains(&"Lisbon".to_owned()), "{e:?}");
    assert!(e.contains(&"Portugal".to_owned()), "{e:?}");
    let pairs = aliases(&e);
    assert!(
        pairs.contains(&("U.S.".to_owned(), "United States".to_owned())),
        "{e:?} {pairs:?}"
    );
}

#[test]
fn classification_is_deterministic() {
    assert_eq!(classify("Short thought about launches."), "note");
    assert_eq!(
        classify("Shipping the new planner today #launch @acme"),
        "tweet"
    );
    assert_eq!(
        classify("Alice: hi\nBob: hello\nAlice: the plan\nBob: agreed"),
        "transcript"
    );
    assert_eq!(
        classify(&"A long article sentence. ".repeat(100)),
        "article"
    );
    assert_eq!(
        classify("Abstract. We study things. Smith et al. showed it.\nReferences"),
        "paper"
    );
}

#[test]
fn slugs_are_safe() {
    assert_eq!(slug("Q3 Board Memo (final)!"), "q3-board-memo-final");
    assert_eq!(slug("../../etc/passwd"), "etc-passwd");
    assert_eq!(slug("***"), "untitled");
}

#[test]
fn summary_keeps_document_order() {
    let s = sentences(
        "Acme raised money. Acme raised more money from investors. The weather was fine. Acme money again.",
    );
    let picked = summary(&s, 2);
    assert_eq!(picked.len(), 2);
    assert!(picked[0].0 < picked[1].0);
}
