//! The lint rules, one function each.

use std::collections::{BTreeMap, BTreeSet};

use super::{Finding, Input, Rule, Severity};
use crate::claims::{Claim, disagree, key};
use crate::index::FoundClaim;
use crate::page::cited_sentences;
use crate::page::{Page, links};
use crate::text::mentions;

/// A rule: its name and the function that runs it.
pub type RuleFn = fn(&Input<'_>) -> Vec<Finding>;

/// Every rule, in report order.
pub const RULES: &[(&str, RuleFn)] = &[
    ("contradiction", contradictions),
    ("stale_claim", stale_claims),
    ("broken_link", broken_links),
    ("front_matter", front_matter),
    ("orphan", orphans),
    ("undocumented_concept", undocumented_concepts),
    ("missing_cross_reference", missing_cross_references),
    ("index_drift", index_drift),
];

fn finding(
    rule: Rule,
    severity: Severity,
    page: &str,
    evidence: String,
    suggestion: &str,
) -> Finding {
    Finding {
        rule,
        severity,
        page: page.to_owned(),
        evidence,
        suggestion: suggestion.to_owned(),
    }
}

fn entity_page(claim: &Claim) -> String {
    format!("entities/{}.md", crate::text::slug(&claim.entity))
}

fn show(claim: &FoundClaim) -> String {
    let date = crate::page::show_date(claim.claim.date);
    let unit = if claim.claim.unit.is_empty() || claim.claim.value.contains(&claim.claim.unit) {
        String::new()
    } else {
        format!(" {}", claim.claim.unit)
    };
    if date.is_empty() {
        format!("{}{unit} in {}", claim.claim.value, claim.cite)
    } else {
        format!("{}{unit} ({date}) in {}", claim.claim.value, claim.cite)
    }
}

/// A claim's group: subject, attribute, qualifiers.
type Group = (String, String, Vec<String>);

/// Claims grouped by (entity key, attribute, qualifiers), each group oldest first.
fn by_attribute(claims: &[FoundClaim]) -> BTreeMap<Group, Vec<&FoundClaim>> {
    // Attributes written with most of the same words are one ("google ads" of a call and
    // "google ads budget" of a brief): each goes under the longest such attribute.
    let mut attributes: BTreeMap<(String, Vec<String>), BTreeSet<String>> = BTreeMap::new();
    for claim in claims {
        attributes
            .entry((claim.claim.key.clone(), claim.claim.qualifiers.clone()))
            .or_default()
            .insert(claim.claim.attribute.clone());
    }
    let mut groups: BTreeMap<Group, Vec<&FoundClaim>> = BTreeMap::new();
    for claim in claims {
        let scope = (claim.claim.key.clone(), claim.claim.qualifiers.clone());
        let attribute = attributes
            .get(&scope)
            .and_then(|all| {
                all.iter()
                    .filter(|other| crate::claims::same_attribute(&claim.claim.attribute, other))
                    .max_by(|a, b| a.len().cmp(&b.len()).then(b.cmp(a)))
            })
            .cloned()
            .unwrap_or_else(|| claim.claim.attribute.clone());
        groups
            .entry((scope.0, attribute, scope.1))
            .or_default()
            .push(claim);
    }
    for group in groups.values_mut() {
        group.sort_by(|a, b| a.claim.date.cmp(&b.claim.date).then(a.cite.cmp(&b.cite)));
    }
    groups
}

/// Whether two dates (`YYYYMMDD`; `YYYYMM00` or `YYYY0000` when less is known) can be the
/// same day: equal, or equal as far as the less precise one goes.
fn same_as_of(a: u32, b: u32) -> bool {
    let precision = |d: u32| {
        if d.is_multiple_of(10_000) {
            10_000
        } else if d.is_multiple_of(100) {
            100
        } else {
            1
        }
    };
    let unit = precision(a).max(precision(b));
    a / unit == b / unit
}

/// An attribute with its qualifiers, as findings name it.
fn qualified(attribute: &str, qualifiers: &[String]) -> String {
    if qualifiers.is_empty() {
        attribute.to_owned()
    } else {
        format!("{attribute} ({})", qualifiers.join(", "))
    }
}

/// Two sources of the same as-of date disagreeing on one attribute (with the same qualifiers)
/// of one subject, values apart beyond tolerance. A value one source says replaced another is
/// not a disagreement.
pub fn contradictions(input: &Input<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for ((_, attribute, qualifiers), group) in by_attribute(input.claims) {
        let attribute = qualified(&attribute, &qualifiers);
        let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
        for (i, a) in group.iter().enumerate() {
            for b in &group[i + 1..] {
                if !same_as_of(a.claim.date, b.claim.date)
                    || a.path == b.path
                    || !disagree(&a.claim, &b.claim)
                {
                    continue;
                }
                if !reported.insert((a.cite.clone(), b.cite.clone())) {
                    continue;
                }
                out.push(finding(
                    Rule::Contradiction,
                    Severity::Error,
                    &entity_page(&a.claim),
                    format!(
                        "{attribute} of {}: {} vs {}",
                        a.claim.entity,
                        show(a),
                        show(b)
                    ),
                    "check the sources and keep the value that holds (or note why they differ)",
                ));
            }
        }
    }
    out
}

/// Days from `earlier` to `later` (dates as `YYYYMMDD`, month or day 0 read as the first).
fn days(earlier: u32, later: u32) -> i64 {
    let date = |code: u32| {
        let year = i32::try_from(code / 10_000).unwrap_or(1970);
        let month = u8::try_from(((code / 100) % 100).max(1)).unwrap_or(1);
        let day = u8::try_from((code % 100).max(1)).unwrap_or(1);
        time::Month::try_from(month)
            .ok()
            .and_then(|m| time::Date::from_calendar_date(year, m, day).ok())
    };
    match (date(earlier), date(later)) {
        (Some(a), Some(b)) => (b - a).whole_days(),
        _ => 0,
    }
}

/// Whether a newer value revises an older one: any change of a number (a revision of
/// $4.53 billion to $4.516 billion is a new estimate, however small), or another text.
fn revised(old: &Claim, new: &Claim) -> bool {
    match (old.number, new.number) {
        (Some(x), Some(y)) => old.unit == new.unit && x != y,
        _ => disagree(old, new),
    }
}

/// A value superseded by a later source's different value of the same attribute (with the
/// same qualifiers) of the same subject, at least `staleness_days` later.
pub fn stale_claims(input: &Input<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for ((_, attribute, qualifiers), group) in by_attribute(input.claims) {
        let attribute = qualified(&attribute, &qualifiers);
        let Some(newest) = group.last() else {
            continue;
        };
        if newest.claim.date == 0 {
            continue;
        }
        for old in &group[..group.len() - 1] {
            if old.claim.date == 0 {
                continue;
            }
            // What replaced it: the values of the next later as-of date that differ from it
            // (all of them, when sources of that date disagree among themselves).
            let later: Vec<&&FoundClaim> = group
                .iter()
                .filter(|c| {
                    c.claim.date > old.claim.date
                        && !same_as_of(old.claim.date, c.claim.date)
                        && c.path != old.path
                        && days(old.claim.date, c.claim.date) >= i64::from(input.staleness_days)
                })
                .collect();
            let Some(next) = later.first().map(|c| c.claim.date) else {
                continue;
            };
            let by: Vec<&&FoundClaim> = later
                .into_iter()
                .filter(|c| same_as_of(c.claim.date, next) && revised(&old.claim, &c.claim))
                .collect();
            if by.is_empty() {
                continue;
            }
            out.push(finding(
                Rule::StaleClaim,
                Severity::Warning,
                &entity_page(&old.claim),
                format!(
                    "{attribute} of {}: {} is superseded by {}",
                    old.claim.entity,
                    show(old),
                    by.iter()
                        .map(|c| show(c))
                        .collect::<Vec<_>>()
                        .join(" and by ")
                ),
                "mark the older value as historical, or ingest a source that confirms it",
            ));
        }
    }
    out
}

/// Links to pages that do not exist.
pub fn broken_links(input: &Input<'_>) -> Vec<Finding> {
    let existing: BTreeSet<String> = input.pages.values().map(Page::link).collect();
    let mut out = Vec::new();
    for page in input.pages.values() {
        for target in links(&page.body) {
            if target != page.link() && !existing.contains(&target) {
                out.push(finding(
                    Rule::BrokenLink,
                    Severity::Error,
                    &page.path,
                    format!("[[{target}]]"),
                    "create the page or fix the link",
                ));
            }
        }
    }
    out
}

/// Front matter missing keys, or a type that does not match the folder.
pub fn front_matter(input: &Input<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for page in input.pages.values() {
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
            out.push(finding(
                Rule::FrontMatter,
                Severity::Error,
                &page.path,
                format!("missing {}", missing.join(", ")),
                "add the missing keys to the front matter",
            ));
        } else if page.get("type") != expected {
            out.push(finding(
                Rule::FrontMatter,
                Severity::Error,
                &page.path,
                format!("type {:?} in folder {folder}/", page.get("type")),
                "set the type that matches the folder, or move the page",
            ));
        }
    }
    out
}

/// The entity and concept keys a source names.
fn topics(page: &Page) -> BTreeSet<String> {
    page.list("entities")
        .iter()
        .chain(page.list("concepts").iter())
        .map(|n| key(n))
        .collect()
}

/// Sources connected to nothing; syntheses nothing links to.
pub fn orphans(input: &Input<'_>) -> Vec<Finding> {
    let mut inbound: BTreeMap<String, usize> = BTreeMap::new();
    for page in input.pages.values() {
        // A source's own entity and concept links do not connect it to anything else.
        for target in links(&page.body) {
            if target != page.link()
                && !(page.path.starts_with("entities/") || page.path.starts_with("concepts/"))
            {
                *inbound.entry(target).or_insert(0) += 1;
            }
        }
    }
    let sources: Vec<&Page> = input
        .pages
        .values()
        .filter(|p| p.path.starts_with("sources/"))
        .collect();
    let mut shared: BTreeMap<String, usize> = BTreeMap::new();
    for source in &sources {
        for topic in topics(source) {
            *shared.entry(topic).or_insert(0) += 1;
        }
    }
    let mut out = Vec::new();
    if sources.len() >= 2 {
        for source in &sources {
            let connected = topics(source)
                .iter()
                .any(|t| shared.get(t).copied().unwrap_or(0) >= 2);
            if !connected && inbound.get(&source.link()).copied().unwrap_or(0) == 0 {
                // A source about something nothing else covers is not wrong: worth a look.
                out.push(finding(
                    Rule::Orphan,
                    Severity::Info,
                    &source.path,
                    "shares no entity or concept with any other source, and nothing links to it"
                        .into(),
                    "link it from a related page, or check it belongs in this wiki",
                ));
            }
        }
    }
    // Entity and concept pages are reached from the sources that name them; one nothing
    // links to was written by hand or lost its sources.
    let mut any_inbound: BTreeSet<String> = BTreeSet::new();
    for page in input.pages.values() {
        for target in links(&page.body) {
            if target != page.link() {
                any_inbound.insert(target);
            }
        }
    }
    for page in input
        .pages
        .values()
        .filter(|p| p.path.starts_with("entities/") || p.path.starts_with("concepts/"))
    {
        if !any_inbound.contains(&page.link()) {
            out.push(finding(
                Rule::Orphan,
                Severity::Warning,
                &page.path,
                "no page links here: no source names it".into(),
                "ingest a source about it, link it from a related page, or delete it",
            ));
        }
    }
    for page in input
        .pages
        .values()
        .filter(|p| p.path.starts_with("syntheses/"))
    {
        if inbound.get(&page.link()).copied().unwrap_or(0) == 0 {
            out.push(finding(
                Rule::Orphan,
                Severity::Warning,
                &page.path,
                "no page links here".into(),
                "link it from a related page, or merge it",
            ));
        }
    }
    out
}

/// Words too general to be a concept a wiki should have a page for.
/// Most recurring phrases one lint reports.
const MAX_CONCEPT_FINDINGS: usize = 100;

/// Every phrase of two to four content words within a clause of `source`'s cited sentences,
/// once: a concept is what several sources discuss, even once each. Words of the source's
/// entities are not content.
fn source_phrases(source: &crate::page::Page) -> BTreeSet<String> {
    let text: String = cited_sentences(source)
        .into_iter()
        .map(|(s, _)| s)
        .collect::<Vec<_>>()
        .join(" ");
    let entity_words: BTreeSet<String> = source
        .list("entities")
        .iter()
        .flat_map(|e| crate::text::words(e))
        .collect();
    let mut phrases: BTreeSet<String> = BTreeSet::new();
    for clause in text.split(['.', ',', ';', ':', '!', '?', '(', ')', '|', '"']) {
        let words: Vec<String> = crate::text::words(clause);
        for n in [2, 3, 4] {
            for window in words.windows(n) {
                let edges_ok = !crate::text::is_stopword(&window[0])
                    && !crate::text::is_stopword(&window[n - 1]);
                let content = window.iter().all(|w| {
                    w.len() >= 3
                        && !w.chars().any(|c| c.is_ascii_digit())
                        && !crate::vocabulary::Vocabulary::has(
                            &crate::vocabulary::vocabulary().common_words,
                            w,
                        )
                        && !entity_words.contains(w)
                });
                let inner_ok = window[1..n - 1]
                    .iter()
                    .all(|w| !crate::text::is_stopword(w));
                if edges_ok && content && inner_ok {
                    phrases.insert(window.join(" "));
                }
            }
        }
    }
    phrases
}

/// Phrases among the key phrases of three or more sources, with no concept page.
pub fn undocumented_concepts(input: &Input<'_>) -> Vec<Finding> {
    let concept_keys: BTreeSet<String> = input
        .pages
        .values()
        .filter(|p| p.path.starts_with("concepts/") || p.path.starts_with("entities/"))
        .flat_map(|p| {
            let mut keys = vec![key(p.title())];
            keys.extend(p.list("aliases").iter().map(|a| key(a)));
            keys
        })
        .collect();
    let mut by_phrase: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for source in input
        .pages
        .values()
        .filter(|p| p.path.starts_with("sources/"))
    {
        for phrase in source_phrases(source) {
            by_phrase
                .entry(phrase)
                .or_default()
                .push(source.path.clone());
        }
    }
    // A phrase that only ever occurs inside a longer one ("capture cross section" inside
    // "neutron capture cross section") is that longer phrase.
    let counts: Vec<(String, usize)> = by_phrase
        .iter()
        .filter(|(_, s)| s.len() >= 3)
        .map(|(p, s)| (p.clone(), s.len()))
        .collect();
    by_phrase.retain(|phrase, sources| {
        sources.len() >= 3
            && !counts.iter().any(|(longer, count)| {
                *count == sources.len()
                    && longer.len() > phrase.len()
                    && longer.contains(phrase.as_str())
            })
    });
    let mut recurring: Vec<(String, Vec<String>)> = by_phrase
        .into_iter()
        .filter(|(phrase, sources)| sources.len() >= 3 && !concept_keys.contains(&key(phrase)))
        .collect();
    // Most discussed first; at most a page of them.
    recurring.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    recurring.truncate(MAX_CONCEPT_FINDINGS);
    let by_phrase = recurring;
    let mut out = Vec::new();
    for (phrase, sources) in by_phrase {
        if sources.len() >= 3 && !concept_keys.contains(&key(&phrase)) {
            out.push(finding(
                Rule::UndocumentedConcept,
                Severity::Info,
                &sources[0],
                format!(
                    "{phrase:?} is discussed in {} sources ({}) and has no concept page",
                    sources.len(),
                    sources
                        .iter()
                        .take(4)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "create a concept page that gathers what the sources say",
            ));
        }
    }
    out
}

fn strip_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        match rest[start..].find("]]") {
            Some(end) => rest = &rest[start + end + 2..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// A page names an entity or concept that has a page, without linking it.
pub fn missing_cross_references(input: &Input<'_>) -> Vec<Finding> {
    let named: Vec<(String, String)> = input
        .pages
        .values()
        .filter(|p| p.path.starts_with("entities/") || p.path.starts_with("concepts/"))
        .filter(|p| p.title().chars().count() >= 4)
        .map(|p| (p.title().to_owned(), p.link()))
        .collect();
    let mut out = Vec::new();
    for page in input
        .pages
        .values()
        .filter(|p| !p.path.starts_with("outputs/"))
    {
        let targets: BTreeSet<String> = links(&page.body).into_iter().collect();
        let is_source = page.path.starts_with("sources/");
        // Sources: their text; curated pages: their prose (not headings or dated quotes).
        let prose: String = if is_source {
            cited_sentences(page)
                .into_iter()
                .map(|(s, _)| s)
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            page.body
                .lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with("- ["))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let prose = strip_links(&prose);
        for (title, link) in &named {
            if *link == page.link() || targets.contains(link) || page.title() == title {
                continue;
            }
            // A source names an entity when it says the name twice, or a name of two words.
            let times = prose.lines().filter(|l| mentions(l, title)).count();
            let named_here = if is_source {
                times >= 2 || (times == 1 && title.contains(' ') && link.starts_with("entities/"))
            } else {
                times >= 1
            };
            if named_here {
                out.push(finding(
                    Rule::MissingCrossReference,
                    Severity::Info,
                    &page.path,
                    format!("mentions {title:?} without [[{link}]]"),
                    "link the page where the name appears",
                ));
            }
        }
    }
    out
}

/// `index.md` out of step with the pages.
pub fn index_drift(input: &Input<'_>) -> Vec<Finding> {
    let existing: BTreeSet<String> = input.pages.values().map(Page::link).collect();
    let indexed: BTreeSet<String> = links(input.index).into_iter().collect();
    let mut out = Vec::new();
    for page in input.pages.values() {
        if !indexed.contains(&page.link()) {
            out.push(finding(
                Rule::IndexDrift,
                Severity::Warning,
                &page.path,
                "not in index.md".into(),
                "regenerate the index (any ingest does)",
            ));
        }
    }
    for link in &indexed {
        if !existing.contains(link) {
            out.push(finding(
                Rule::IndexDrift,
                Severity::Warning,
                "index.md",
                format!("[[{link}]] has no page"),
                "regenerate the index",
            ));
        }
    }
    out
}
