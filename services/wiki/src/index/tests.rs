use super::*;
use crate::claims::Claim;

fn claim(value: f64, date: u32) -> Claim {
    Claim {
        entity: "Portugal".into(),
        key: "portugal".into(),
        attribute: "population".into(),
        value: value.to_string(),
        number: Some(value),
        unit: String::new(),
        date,
        sentence: 0,
        ..Claim::default()
    }
}

#[test]
fn documents_are_found_replaced_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let indexes = Indexes::on_disk(dir.path().to_path_buf());
    let index = indexes.tenant("acme").unwrap();
    let docs = vec![
        Doc::Page {
            path: "entities/portugal.md".into(),
            title: "Portugal".into(),
            summary: "A country.".into(),
            names: "Portugal Portuguese Republic".into(),
            keys: vec!["portugal".into(), "portuguese republic".into()],
        },
        Doc::Passage {
            path: "sources/factbook-2010.md".into(),
            title: "Factbook 2010".into(),
            cite: "[[sources/factbook-2010#^s0]]".into(),
            text: "Portugal joined the European Union in 1986.".into(),
            keys: vec!["portugal".into()],
            date: 2010_0000,
        },
        Doc::Claim {
            path: "sources/factbook-2010.md".into(),
            cite: "[[sources/factbook-2010#^s1]]".into(),
            text: "The population of Portugal is 10,735,765.".into(),
            claim: claim(10_735_765.0, 2010_0000),
        },
        Doc::Claim {
            path: "sources/factbook-2024.md".into(),
            cite: "[[sources/factbook-2024#^s1]]".into(),
            text: "The population of Portugal is 10,467,366.".into(),
            claim: claim(10_467_366.0, 2024_0000),
        },
    ];
    index.apply(&[], docs, 3).unwrap();
    let tokens = index.tokens("When did Portugal join the union?");
    let found = index.passages(&tokens, &["portugal".into()], 5).unwrap();
    assert_eq!(found[0].cite, "[[sources/factbook-2010#^s0]]");
    let claims = index.claims("portugal", "population").unwrap();
    assert_eq!(claims[0].claim.date, 2024_0000, "newest first");
    assert_eq!(
        index
            .page_for_key("portuguese republic")
            .unwrap()
            .as_deref(),
        Some("entities/portugal.md")
    );
    assert_eq!(index.catalogue().unwrap().len(), 1);
    // Replacing one source's documents leaves the other's.
    index
        .apply(&["sources/factbook-2010.md".into()], Vec::new(), 4)
        .unwrap();
    assert_eq!(index.claims("portugal", "population").unwrap().len(), 1);
    assert!(index.passages(&tokens, &[], 5).unwrap().is_empty());
    drop(index);
    // Reopened from disk: the documents and the revision are there.
    let reopened = Indexes::on_disk(dir.path().to_path_buf())
        .tenant("acme")
        .unwrap();
    assert_eq!(reopened.rev(), 4);
    assert_eq!(reopened.claims("portugal", "population").unwrap().len(), 1);
}

#[test]
fn a_corrupt_index_is_replaced_by_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("acme")).unwrap();
    std::fs::write(dir.path().join("acme/meta.json"), "not json").unwrap();
    let index = Indexes::on_disk(dir.path().to_path_buf())
        .tenant("acme")
        .unwrap();
    assert_eq!(index.rev(), 0, "rebuilt from the pages on first use");
    assert_eq!(index.page_count().unwrap(), 0);
}
