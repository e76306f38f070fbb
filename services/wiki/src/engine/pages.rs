//! What pages hold and what the index is built from them.
//!
//! - A **source** page: front matter `id`, `doc_type`, `raw`, `summary`, `date` (the source's
//!   vintage, `YYYYMMDD`), `entities`, `aliases` (`[alias, canonical]` pairs), `concepts`,
//!   `claims`; the body lists the summary, entities, concepts and claims with citations, then
//!   every sentence with its block id (`sentence ^sN`).
//! - An **entity** page: `aliases`, `sources`, `claims` (the newest of each attribute and every
//!   value that disagrees with it), a `## Facts` list and a `## Mentions` list of dated quotes.
//! - A **concept** page: `sources` and `## Mentions`.

use serde_json::{Value, json};

use crate::claims::{Claim, key};
use crate::index::Doc;
use crate::page::Page;
pub use crate::page::{cited_sentences, show_date};
pub use crate::text::mentions;

/// The claims a page records in its front matter.
pub(crate) fn page_claims(page: &Page) -> Vec<Claim> {
    page.meta
        .get("claims")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The `[alias, canonical]` pairs a source page records.
pub(crate) fn page_aliases(page: &Page) -> Vec<(String, String)> {
    page.meta
        .get("aliases")
        .and_then(Value::as_array)
        .map(|pairs| {
            pairs
                .iter()
                .filter_map(|p| {
                    let p = p.as_array()?;
                    Some((
                        p.first()?.as_str()?.to_owned(),
                        p.get(1)?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The date of a page's source (`YYYYMMDD`, 0 unknown).
pub(crate) fn page_date(page: &Page) -> u32 {
    page.meta
        .get("date")
        .and_then(Value::as_u64)
        .and_then(|d| u32::try_from(d).ok())
        .unwrap_or(0)
}

/// Whether a sentence names a multi-word entity by its first word alone ("Northwind" for
/// "Northwind Logistics"), written capitalised, when no other entity starts with that word.
fn mentions_head(sentence: &str, entity: &str, entities: &[String]) -> bool {
    let Some((head, _)) = entity.split_once(' ') else {
        return false;
    };
    if head.chars().count() < 4
        || !head.chars().next().is_some_and(char::is_uppercase)
        || crate::text::is_stopword(&head.to_lowercase())
        || entities
            .iter()
            .filter(|e| e.split(' ').next() == Some(head))
            .count()
            > 1
    {
        return false;
    }
    sentence.match_indices(head).any(|(at, _)| {
        let before = sentence[..at].chars().next_back();
        let after = sentence[at + head.len()..].chars().next();
        before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

/// The keys of the entities (names and aliases) a sentence mentions.
pub(crate) fn keys_in(
    sentence: &str,
    entities: &[String],
    aliases: &[(String, String)],
) -> Vec<String> {
    let mut keys: Vec<String> = entities
        .iter()
        .filter(|e| mentions(sentence, e) || mentions_head(sentence, e, entities))
        .map(|e| key(e))
        .collect();
    for (alias, canonical) in aliases {
        if mentions(sentence, alias) {
            keys.push(key(canonical));
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The index documents of a page.
pub(crate) fn index_docs(page: &Page) -> Vec<Doc> {
    let folder = page.path.split('/').next().unwrap_or_default();
    let mut docs = Vec::new();
    // The page itself: names for entity and concept pages.
    let mut names = vec![page.title().to_owned()];
    if folder != "sources" {
        names.extend(page.list("aliases"));
    }
    let keys = if matches!(folder, "entities" | "concepts") {
        let mut keys: Vec<String> = names.iter().map(|n| key(n)).collect();
        keys.sort();
        keys.dedup();
        keys
    } else {
        Vec::new()
    };
    docs.push(Doc::Page {
        path: page.path.clone(),
        title: page.title().to_owned(),
        summary: page.get("summary").to_owned(),
        names: names.join(" "),
        keys,
    });
    if folder != "sources" {
        return docs;
    }
    let entities = page.list("entities");
    let aliases = page_aliases(page);
    let subject = key(page.get("subject"));
    let date = u64::from(page_date(page));
    let link = page.link();
    for line in page.body.lines() {
        if let Some((sentence, anchor)) = line.rsplit_once(" ^s")
            && !anchor.is_empty()
            && anchor.chars().all(|c| c.is_ascii_digit())
        {
            docs.push(Doc::Passage {
                path: page.path.clone(),
                title: page.title().to_owned(),
                cite: format!("[[{link}#^s{anchor}]]"),
                text: sentence.to_owned(),
                keys: {
                    let mut keys = keys_in(sentence, &entities, &aliases);
                    if !subject.is_empty() && !keys.contains(&subject) {
                        keys.push(subject.clone());
                    }
                    keys
                },
                date,
            });
        }
    }
    let sentences: std::collections::BTreeMap<usize, String> = page
        .body
        .lines()
        .filter_map(|line| {
            let (sentence, anchor) = line.rsplit_once(" ^s")?;
            Some((anchor.parse().ok()?, sentence.to_owned()))
        })
        .collect();
    for claim in page_claims(page) {
        docs.push(Doc::Claim {
            path: page.path.clone(),
            cite: format!("[[{link}#^s{}]]", claim.sentence),
            text: sentences.get(&claim.sentence).cloned().unwrap_or_default(),
            claim,
        });
    }
    docs
}

/// One line of a claim for a page's body.
pub(crate) fn claim_line(claim: &Claim, cite: &str) -> String {
    let date = show_date(claim.date);
    let unit = if claim.unit.is_empty() || claim.value.contains(&claim.unit) {
        String::new()
    } else {
        format!(" {}", claim.unit)
    };
    if date.is_empty() {
        format!("- {}: {}{unit} {cite}\n", claim.attribute, claim.value)
    } else {
        format!(
            "- {}: {}{unit} ({date}) {cite}\n",
            claim.attribute, claim.value
        )
    }
}

/// The body of a source page.
#[allow(clippy::too_many_arguments)]
pub(crate) fn source_body(
    label: &str,
    link: &str,
    summary: &[(usize, String)],
    entities: &[String],
    concepts: &[String],
    claims: &[Claim],
    sentences: &[String],
) -> String {
    let mut body = format!("# {}\n\n## Summary\n", crate::page::label(label));
    for (i, sentence) in summary {
        body.push_str(&format!("- {sentence} ([[{link}#^s{i}]])\n"));
    }
    if !entities.is_empty() {
        body.push_str("\n## Entities\n");
        let list: Vec<String> = entities
            .iter()
            .map(|e| {
                format!(
                    "[[entities/{}|{}]]",
                    crate::text::slug(e),
                    crate::page::label(e)
                )
            })
            .collect();
        body.push_str(&list.join(", "));
        body.push('\n');
    }
    if !concepts.is_empty() {
        body.push_str("\n## Concepts\n");
        let list: Vec<String> = concepts
            .iter()
            .map(|c| format!("[[concepts/{}|{c}]]", crate::text::slug(c)))
            .collect();
        body.push_str(&list.join(", "));
        body.push('\n');
    }
    if !claims.is_empty() {
        body.push_str("\n## Claims\n");
        for claim in claims {
            body.push_str(&format!(
                "- [[entities/{}|{}]] {}",
                crate::text::slug(&claim.entity),
                crate::page::label(&claim.entity),
                claim_line(claim, &format!("[[{link}#^s{}]]", claim.sentence))
                    .trim_start_matches("- ")
            ));
        }
    }
    body.push_str("\n## Text\n");
    for (i, sentence) in sentences.iter().enumerate() {
        body.push_str(&format!("{sentence} ^s{i}\n"));
    }
    body
}

/// A claim as an entity page keeps it: with the source it came from.
pub(crate) fn entity_claim(claim: &Claim, source_link: &str) -> Value {
    let mut value = serde_json::to_value(claim).unwrap_or(Value::Null);
    value["source"] = json!(source_link);
    value
}

/// Rewrites the `## Facts` section of an entity page from its `claims` front matter: per
/// attribute, the newest value first, then older or disagreeing ones, each cited.
pub(crate) fn write_facts(page: &mut Page) {
    let claims: Vec<Value> = page
        .meta
        .get("claims")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut by_attribute: std::collections::BTreeMap<String, Vec<(Claim, String)>> =
        std::collections::BTreeMap::new();
    for value in claims {
        let source = value["source"].as_str().unwrap_or_default().to_owned();
        if let Ok(claim) = serde_json::from_value::<Claim>(value) {
            by_attribute
                .entry(claim.attribute.clone())
                .or_default()
                .push((claim, source));
        }
    }
    let mut facts = String::new();
    for claims in by_attribute.values_mut() {
        claims.sort_by(|a, b| b.0.date.cmp(&a.0.date).then(a.1.cmp(&b.1)));
        for (claim, source) in claims.iter() {
            facts.push_str(&claim_line(
                claim,
                &format!("[[{source}#^s{}]]", claim.sentence),
            ));
        }
    }
    let mentions = page
        .body
        .split_once("\n## Mentions\n")
        .map(|(_, m)| m.to_owned())
        .unwrap_or_default();
    let mut body = format!("# {}\n", crate::page::label(page.title()));
    if !facts.is_empty() {
        body.push_str("\n## Facts\n");
        body.push_str(&facts);
    }
    body.push_str("\n## Mentions\n");
    body.push_str(&mentions);
    page.body = body;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_pages_give_passages_and_claims_to_the_index() {
        let claim = crate::claims::extract(
            "The population of Portugal is 10,467,366 (2024 est.).",
            1,
            &["Portugal".into()],
            None,
            0,
        )
        .remove(0);
        let mut page = Page::new("sources/pt.md", "Portugal 2024", "source", "2026-11-25");
        page.meta.insert("entities".into(), json!(["Portugal"]));
        page.meta.insert("claims".into(), json!([claim]));
        page.meta.insert("date".into(), json!(20_240_000));
        page.body = source_body(
            "Portugal 2024",
            "sources/pt",
            &[],
            &["Portugal".into()],
            &[],
            std::slice::from_ref(&claim),
            &[
                "Portugal is in Europe.".into(),
                "The population of Portugal is 10,467,366 (2024 est.).".into(),
            ],
        );
        let docs = index_docs(&page);
        assert_eq!(docs.len(), 4, "page, two passages, one claim");
        match &docs[3] {
            Doc::Claim { cite, text, .. } => {
                assert_eq!(cite, "[[sources/pt#^s1]]");
                assert!(text.contains("10,467,366"));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            page.body.contains(
                "- [[entities/portugal|Portugal]] population: 10,467,366 (2024) [[sources/pt#^s1]]"
            ),
            "{}",
            page.body
        );
    }
}
