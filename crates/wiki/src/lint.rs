//! Lint rules over a tenant's pages. Each finding: rule, severity, page, evidence, suggestion.
//!
//! | Rule | Severity | What |
//! |---|---|---|
//! | `broken_link` | error | a `[[link]]` to a page that does not exist |
//! | `front_matter` | error | missing `title` / `type` / `updated`, or a type that does not match the folder |
//! | `contradiction` | error | one entity, one attribute (founded, revenue, headcount, …), different values in different sources |
//! | `stale_claim` | warning | a claim about an entity from a source more than `staleness_days` older than the newest source about it |
//! | `orphan` | warning | an entity, concept or synthesis page nothing links to |
//! | `index_drift` | warning | a page missing from `index.md`, or an index entry without a page |
//! | `missing_cross_reference` | info | a page names another entity or concept without linking it |
//! | `undocumented_concept` | info | a source lists an entity or concept that has no page |

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::engine::cited_sentences;
use crate::page::{Page, links};

fn finding(
    rule: &str,
    severity: &str,
    page: &str,
    evidence: impl Into<String>,
    suggestion: impl Into<String>,
) -> Value {
    json!({
        "rule": rule,
        "severity": severity,
        "page": format!("wiki/{page}"),
        "evidence": evidence.into(),
        "suggestion": suggestion.into(),
    })
}

/// Attribute keywords for contradiction and staleness checks, with the kind of value.
const ATTRIBUTES: &[(&str, &str)] = &[
    ("founded", "year"),
    ("established", "year"),
    ("launched", "year"),
    ("acquired", "year"),
    ("revenue", "number"),
    ("valuation", "number"),
    ("valued", "number"),
    ("raised", "number"),
    ("employees", "number"),
    ("headcount", "number"),
    ("budget", "number"),
    ("price", "number"),
];

/// (attribute, value) claims in a sentence: the first year or number after (or for
/// `employees`, before) an attribute keyword.
pub fn claims(sentence: &str) -> Vec<(String, String)> {
    let tokens: Vec<String> = sentence
        .split_whitespace()
        .map(|t| {
            t.trim_matches(|c: char| !c.is_alphanumeric() && c != '$' && c != '€' && c != '.')
                .to_lowercase()
        })
        .collect();
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Some((attribute, kind)) = ATTRIBUTES
            .iter()
            .find(|(a, _)| token.trim_end_matches('.').starts_with(a))
        else {
            continue;
        };
        let window: Vec<&String> = if *attribute == "employees" || *attribute == "headcount" {
            tokens[i.saturating_sub(3)..i]
                .iter()
                .rev()
                .chain(tokens[i + 1..(i + 5).min(tokens.len())].iter())
                .collect()
        } else {
            tokens[i + 1..(i + 7).min(tokens.len())].iter().collect()
        };
        let value = window.into_iter().find_map(|t| {
            let t = t.trim_end_matches('.');
            let digits: String = t
                .chars()
                .filter(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            if digits.is_empty() || !digits.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                return None;
            }
            match *kind {
                "year"
                    if digits.len() == 4
                        && (digits.starts_with("19") || digits.starts_with("20")) =>
                {
                    Some(digits)
                }
                "number" => Some(t.to_owned()),
                _ => None,
            }
        });
        if let Some(value) = value {
            out.push(((*attribute).to_owned(), value));
        }
    }
    out
}

/// Runs every rule.
pub fn run(pages: &BTreeMap<String, Page>, index: &str, staleness_days: u32) -> Vec<Value> {
    let mut findings = Vec::new();
    let existing: BTreeSet<String> = pages.values().map(Page::link).collect();

    // Front matter.
    for page in pages.values() {
        let folder = page.path.split('/').next().unwrap_or_default();
        let expected = match folder {
            "sources" => "source",
            "entities" => "entity",
            "concepts" => "concept",
            "syntheses" => "synthesis",
            "outputs" => "output",
            _ => "",
        };
        let missing: Vec<&str> = ["title", "type", "updated"]
            .into_iter()
            .filter(|k| page.get(k).is_empty())
            .collect();
        if !missing.is_empty() {
            findings.push(finding(
                "front_matter",
                "error",
                &page.path,
                format!("missing {}", missing.join(", ")),
                "add the missing keys to the front matter",
            ));
        } else if page.get("type") != expected {
            findings.push(finding(
                "front_matter",
                "error",
                &page.path,
                format!("type {:?} in folder {folder}/", page.get("type")),
                format!("set type: {expected:?} or move the page"),
            ));
        }
    }

    // Links: broken, inbound counts.
    let mut inbound: BTreeMap<String, usize> = BTreeMap::new();
    for page in pages.values() {
        for target in links(&page.body) {
            if target == page.link() {
                continue;
            }
            if existing.contains(&target) {
                *inbound.entry(target).or_insert(0) += 1;
            } else {
                findings.push(finding(
                    "broken_link",
                    "error",
                    &page.path,
                    format!("[[{target}]]"),
                    "create the page or fix the link",
                ));
            }
        }
    }
    for page in pages.values() {
        let linked = inbound.get(&page.link()).copied().unwrap_or(0);
        if linked == 0 && !page.path.starts_with("sources/") && !page.path.starts_with("outputs/") {
            findings.push(finding(
                "orphan",
                "warning",
                &page.path,
                "no page links here",
                "link it from a related page, or merge it",
            ));
        }
    }

    // Missing cross-references: a page names an entity/concept page's title without linking.
    let named: Vec<(&str, String)> = pages
        .values()
        .filter(|p| p.path.starts_with("entities/") || p.path.starts_with("concepts/"))
        .filter(|p| p.title().chars().count() >= 4)
        .map(|p| (p.title(), p.link()))
        .collect();
    // Sources and filed answers quote their material; only curated pages should link.
    for page in pages
        .values()
        .filter(|p| !p.path.starts_with("sources/") && !p.path.starts_with("outputs/"))
    {
        let targets: BTreeSet<String> = links(&page.body).into_iter().collect();
        let prose: String = page
            .body
            .lines()
            // Headings and dated mentions (verbatim quotes of sources) are not prose.
            .filter(|l| !l.starts_with('#') && !l.starts_with("- ["))
            .collect::<Vec<_>>()
            .join("\n");
        for (title, link) in &named {
            if *link != page.link()
                && !targets.contains(link)
                && page.title() != *title
                && crate::engine::mentions(&strip_links(&prose), title)
            {
                findings.push(finding(
                    "missing_cross_reference",
                    "info",
                    &page.path,
                    format!("mentions {title:?} without [[{link}]]"),
                    format!("link [[{link}]]"),
                ));
            }
        }
    }

    // Undocumented: listed by a source, no page.
    for page in pages.values().filter(|p| p.path.starts_with("sources/")) {
        for (kind, key) in [("entities", "entities"), ("concepts", "concepts")] {
            for name in page.list(key) {
                let link = format!("{kind}/{}", crate::text::slug(&name));
                if !existing.contains(&link) {
                    findings.push(finding(
                        "undocumented_concept",
                        "info",
                        &page.path,
                        format!("{name:?} has no page ({link})"),
                        format!("create [[{link}]] or re-ingest the source"),
                    ));
                }
            }
        }
    }

    // Contradictions and stale claims, per entity page, from its dated mentions.
    for page in pages.values().filter(|p| p.path.starts_with("entities/")) {
        let mut by_attribute: BTreeMap<String, Vec<(String, String, String, String)>> =
            BTreeMap::new();
        let mut newest = String::new();
        for line in page.body.lines() {
            let Some(rest) = line.strip_prefix("- [") else {
                continue;
            };
            let Some((date, _)) = rest.split_once(']') else {
                continue;
            };
            if date.as_bytes().get(4) != Some(&b'-') {
                continue;
            }
            newest = newest.max(date.to_owned());
        }
        for (sentence, cite) in cited_sentences(page) {
            let source = cite
                .trim_start_matches("[[")
                .split('#')
                .next()
                .unwrap_or_default()
                .to_owned();
            let date = page
                .body
                .lines()
                .find(|l| l.contains(&cite))
                .and_then(|l| l.strip_prefix("- ["))
                .and_then(|l| l.split_once(']'))
                .map(|(d, _)| d.to_owned())
                .unwrap_or_default();
            for (attribute, value) in claims(&sentence) {
                by_attribute.entry(attribute).or_default().push((
                    value,
                    source.clone(),
                    sentence.clone(),
                    date.clone(),
                ));
            }
        }
        for (attribute, values) in &by_attribute {
            let distinct: BTreeSet<&String> = values.iter().map(|(v, _, _, _)| v).collect();
            let sources: BTreeSet<&String> = values.iter().map(|(_, s, _, _)| s).collect();
            if distinct.len() > 1 && sources.len() > 1 {
                let evidence: Vec<String> = values
                    .iter()
                    .map(|(v, s, _, _)| format!("{attribute} {v} in [[{s}]]"))
                    .collect();
                findings.push(finding(
                    "contradiction",
                    "error",
                    &page.path,
                    evidence.join("; "),
                    "check the sources and record which value holds, with a date",
                ));
            }
            for (value, source, _, date) in values {
                if !date.is_empty()
                    && !newest.is_empty()
                    && days_between(date, &newest).is_some_and(|d| d > i64::from(staleness_days))
                {
                    findings.push(finding(
                        "stale_claim",
                        "warning",
                        &page.path,
                        format!(
                            "{attribute} {value} from [[{source}]] ({date}); newest source {newest}"
                        ),
                        "confirm the claim against a newer source",
                    ));
                }
            }
        }
    }

    // Index drift.
    let indexed: BTreeSet<String> = links(index).into_iter().collect();
    for page in pages.values() {
        if !indexed.contains(&page.link()) {
            findings.push(finding(
                "index_drift",
                "warning",
                &page.path,
                "not in index.md",
                "regenerate the index (any ingest does)",
            ));
        }
    }
    for link in &indexed {
        if !existing.contains(link) {
            findings.push(json!({"rule": "index_drift", "severity": "warning", "page": "wiki/index.md", "evidence": format!("[[{link}]] has no page"), "suggestion": "regenerate the index"}));
        }
    }
    findings
}

fn strip_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        match rest[start..].find("]]") {
            Some(end) => rest = &rest[start + end + 2..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn days_between(earlier: &str, later: &str) -> Option<i64> {
    let parse = |d: &str| {
        let format = time::macros::format_description!("[year]-[month]-[day]");
        time::Date::parse(d, &format).ok()
    };
    Some((parse(later)? - parse(earlier)?).whole_days())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_find_years_and_numbers() {
        assert_eq!(
            claims("Acme Corp was founded in 1999 in Ohio."),
            vec![("founded".into(), "1999".into())]
        );
        assert_eq!(
            claims("Revenue reached $4.2M last year."),
            vec![("revenue".into(), "$4.2m".into())]
        );
        assert_eq!(
            claims("It has 250 employees."),
            vec![("employees".into(), "250".into())]
        );
        assert!(claims("Nothing to see here.").is_empty());
    }
}
