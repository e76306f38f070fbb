//! Claims: (entity, attribute, value, unit, date, source sentence) facts read from sentences
//! such as "The population of Portugal is 10,467,366 (2024 est.)", "Portugal's capital is
//! Lisbon.", "Acme Corp has 1,200 employees.", fact lines ("Population: 10,467,366 (2024 est.)")
//! about a document's subject, and Markdown tables of figures.
//!
//! Values are normalised (thousands separators, `million`/`billion`, `$4.2M`, percentages,
//! `sq km`) so that two sources stating one figure differently agree; attributes are
//! normalised phrases (`total area` → `area`, `inhabitants` → `population`), so questions and
//! sentences meet on the same key. Dates are the vintage a sentence states — `(2024 est.)`,
//! `in 2024`, `as of July 2023`, a `2021 census` — else the source's own date.

use serde::{Deserialize, Serialize};

/// One fact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// The entity as written (display form).
    pub entity: String,
    /// Its normalised key (see [`key`]).
    pub key: String,
    /// The normalised attribute (`population`, `area`, `capital`, …).
    pub attribute: String,
    /// The value as written in the source (`10,467,366`, `Lisbon`).
    pub value: String,
    /// The value as a number, for numeric claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<f64>,
    /// The unit (`km²`, `%`, `USD`, `years`), empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// The vintage as `YYYYMMDD` (`YYYY0000` when only the year is known; 0 unknown).
    #[serde(default)]
    pub date: u32,
    /// Index of the source sentence (its `^sN` block id).
    pub sentence: usize,
    /// What narrows the fact beyond its subject and attribute, normalised and sorted: a
    /// table's row or column label (`meta`), a period (`q1 2026`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualifiers: Vec<String>,
    /// The value this claim says replaced an earlier one ("down to 58k from 83k", "not 91k
    /// but 86k"): the earlier value as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
}

impl Claim {
    /// A claim of `attribute` of `entity` with a value as written, unqualified.
    pub(crate) fn new(
        entity: &str,
        attribute: String,
        value: Written,
        date: u32,
        sentence: usize,
    ) -> Claim {
        Claim {
            entity: entity.to_owned(),
            key: key(entity),
            attribute,
            value: value.0,
            number: value.1,
            unit: value.2,
            date,
            sentence,
            qualifiers: Vec::new(),
            replaces: None,
        }
    }
}

pub use crate::text::key;

/// The normal form of an attribute phrase: lower case, no article, synonyms applied, a plain
/// plural of the last word made singular (`employees` stays: it is its own attribute).
pub fn attribute(phrase: &str) -> Option<String> {
    let lower = phrase.to_lowercase();
    let mut words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .map(|w| w.trim_matches('-'))
        .filter(|w| !w.is_empty())
        .collect();
    while words.first().is_some_and(|w| {
        matches!(
            *w,
            "the" | "a" | "an" | "its" | "their" | "estimated" | "current"
        )
    }) {
        words.remove(0);
    }
    if words.is_empty() || words.len() > 5 || Vocabulary::has(&vocabulary().not_attribute, words[0])
    {
        return None;
    }
    if words.iter().any(|w| w.chars().all(|c| c.is_ascii_digit())) {
        return None;
    }
    // An identifier is not an attribute: "CVE-2023-36053: Potential …" is a heading, not a
    // field ("COVID-19 cases" is one).
    if words.iter().any(|w| {
        w.contains('-')
            && w.split('-')
                .any(|part| part.len() >= 4 && part.chars().all(|c| c.is_ascii_digit()))
    }) {
        return None;
    }
    let phrase = words.join(" ");
    if let Some((_, normal)) = vocabulary()
        .attribute_synonyms
        .iter()
        .find(|(from, _)| *from == phrase)
    {
        return Some(normal.clone());
    }
    Some(phrase)
}

/// A value as written: the text, its number (if it is one) and its unit.
type Written = (String, Option<f64>, String);

/// Verbs between an attribute phrase and its value.
const COPULAS: &[&str] = &[
    "is estimated at",
    "was estimated at",
    "is estimated to be",
    "was estimated to be",
    "stands at",
    "stood at",
    "amounts to",
    "amounted to",
    "totals",
    "totaled",
    "totalled",
    "reached",
    "reaches",
    "was about",
    "is about",
    "is roughly",
    "was roughly",
    "is now",
    "are now",
    "is around",
    "was around",
    "is",
    "was",
    "are",
    "were",
    "of",
    ":",
    "=",
];

/// A value after a copula: a number (with unit), or a short proper name for attributes such as
/// `capital`.
fn value_after(text: &str) -> Option<(String, Option<f64>, String)> {
    let text = text.trim_start();
    let text = text
        .strip_prefix("about ")
        .or_else(|| text.strip_prefix("approximately "))
        .or_else(|| text.strip_prefix("roughly "))
        .or_else(|| text.strip_prefix("around "))
        .or_else(|| text.strip_prefix("nearly "))
        .or_else(|| text.strip_prefix("over "))
        .or_else(|| text.strip_prefix("some "))
        .unwrap_or(text);
    // A date is a value of its own ("Contract renewal: 2026-09-30"), not the number 2026.
    let head: String = text
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(date) = crate::text::dates::find(&head)
        && text.split_whitespace().next().is_some_and(|w| {
            w.starts_with(|c: char| c.is_ascii_digit())
                || crate::text::dates::month_number(w).is_some()
        })
    {
        return Some((crate::text::dates::show(date), None, String::new()));
    }
    if let Some((written, value, unit, rest)) = number(text) {
        // A range ("3.8 to 3.12") is one value, written as it stands.
        if let Some(after) = rest.trim_start().strip_prefix("to ")
            && let Some((upper, _, _, _)) = number(after)
        {
            return Some((format!("{written} to {upper}"), None, unit));
        }
        return Some((written, Some(value), unit));
    }
    // A proper name: capitalised words (and `de`, `of`, `and` inside).
    let mut words = Vec::new();
    for word in text.split_whitespace() {
        let clean = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'');
        let capital = clean.chars().next().is_some_and(char::is_uppercase);
        if capital
            || (!words.is_empty()
                && matches!(clean, "de" | "of" | "and" | "da" | "do" | "la" | "el"))
        {
            words.push(clean.to_owned());
            if word.ends_with([',', '.', ';', ':', ')']) {
                break;
            }
        } else {
            break;
        }
    }
    while words
        .last()
        .is_some_and(|w| matches!(w.as_str(), "de" | "of" | "and" | "da" | "do" | "la" | "el"))
    {
        words.pop();
    }
    if words.is_empty() || words.len() > 6 {
        return None;
    }
    Some((words.join(" "), None, String::new()))
}

/// Finds `name` (or one of its aliases) in `lower` (the lower-cased sentence): its byte range.
fn find_names(lower: &str, names: &[String]) -> Vec<(usize, usize, usize)> {
    let mut found: Vec<(usize, usize, usize)> = Vec::new();
    for (n, name) in names.iter().enumerate() {
        let needle = name.to_ascii_lowercase();
        if needle.is_empty() {
            continue;
        }
        for (at, _) in lower.match_indices(&needle) {
            let end = at + needle.len();
            let before_ok = lower[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric());
            let after_ok = lower[end..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric());
            if before_ok && after_ok {
                found.push((at, end, n));
            }
        }
    }
    // Longest first, then drop those inside a longer one; in sentence order.
    found.sort_by(|a, b| (b.1 - b.0).cmp(&(a.1 - a.0)).then(a.0.cmp(&b.0)));
    let mut kept: Vec<(usize, usize, usize)> = Vec::new();
    for candidate in found {
        if !kept.iter().any(|k| candidate.0 < k.1 && k.0 < candidate.1) {
            kept.push(candidate);
        }
    }
    kept.sort_by_key(|k| k.0);
    kept
}

/// The claims of one sentence, about the entities named in it (`entities`: display names) or,
/// for fact lines without a named subject, about `subject`. `fallback_date` is the source's own
/// date, used when the sentence states none.
pub fn extract(
    sentence: &str,
    index: usize,
    entities: &[String],
    subject: Option<&str>,
    fallback_date: u32,
) -> Vec<Claim> {
    extract_with(
        sentence,
        index,
        entities,
        subject,
        false,
        true,
        fallback_date,
    )
}

/// [`extract`], and when `sure` (the subject was declared, or the document's title or first
/// line names it), sentences that name nothing ("Unemployment stood at 6.4% in 2024.") and
/// changes that name no one are about `subject` too. Without `fields` (a transcript, whose
/// "Name: …" lines are turns of speech), no line is read as a field.
pub fn extract_with(
    sentence: &str,
    index: usize,
    entities: &[String],
    subject: Option<&str>,
    sure: bool,
    fields: bool,
    fallback_date: u32,
) -> Vec<Claim> {
    let sure_subject = if sure { subject } else { None };
    // "It melts at 1687 K." in a document sure of its subject: "It" is the subject.
    if let Some(subject) = sure_subject
        && let Some(rest) = sentence
            .strip_prefix("It ")
            .or_else(|| sentence.strip_prefix("Its "))
        && find_names(&sentence.to_ascii_lowercase(), entities).is_empty()
    {
        let possessive = if sentence.starts_with("Its ") {
            "'s"
        } else {
            ""
        };
        let named = format!("{subject}{possessive} {rest}");
        let names = [subject.to_owned()];
        return extract_with(
            &named,
            index,
            &names,
            Some(subject),
            false,
            false,
            fallback_date,
        );
    }
    // ASCII lower case keeps byte offsets, so positions found in `lower` slice `sentence`.
    let date = match stated_date(sentence) {
        0 => fallback_date,
        d => d,
    };
    let lower = sentence.to_ascii_lowercase();
    let mut reading = Reading {
        sentence,
        lower: &lower,
        entities,
        date,
        index,
        out: Vec::new(),
    };
    for (start, end, n) in find_names(&lower, entities) {
        reading.about(start, end, &entities[n]);
    }
    reading.participles(fallback_date);
    reading.roles();
    reading.changes(sure_subject);
    // "Unemployment stood at 6.4% in 2024.": a sentence naming nothing is about the subject.
    if reading.out.is_empty()
        && let Some(subject) = sure_subject
        && find_names(&lower, entities).is_empty()
        && let Some((phrase, value)) = phrase_then_value(&lower, sentence)
        && let Some(attribute) = attribute(&phrase)
    {
        reading.push(subject, attribute, value);
    }
    // A fact line about the document's subject: "Population: 10,467,366 (2024 est.)".
    // Not a heading ("# Acme: Q1 2026"), and not a name's line ("Acme Corp: Q1").
    let line = crate::text::strip_markers(sentence);
    if reading.out.is_empty()
        && fields
        && !sentence.trim_start().starts_with('#')
        && let Some(subject) = subject
        && let Some((head, tail)) = line.split_once(':')
        && !entities.iter().any(|e| e.eq_ignore_ascii_case(head.trim()))
        // "Date: …" dated the document; it is not a fact about the subject.
        && !DATE_FIELDS.contains(&head.trim().to_ascii_lowercase().as_str())
        && head.split_whitespace().count() <= 5
        && let Some(attribute) = attribute(head)
        && let Some(value) = value_after(tail)
        // A value, not a sentence ("Guest: Thank you." is a speaker's turn).
        && (value.1.is_some()
            || (tail.split_whitespace().count() <= 12 && !tail.trim_end().ends_with(['.', '?', '!'])))
    {
        reading.push(subject, attribute, value);
    }
    reading.out
}

/// One sentence being read for claims (see [`extract_with`]).
struct Reading<'a> {
    sentence: &'a str,
    /// `sentence` in ASCII lower case (same byte offsets).
    lower: &'a str,
    entities: &'a [String],
    /// The date the sentence states, else the document's.
    date: u32,
    /// The sentence's index in its document.
    index: usize,
    out: Vec<Claim>,
}

impl Reading<'_> {
    /// A claim, unless one of the entity's claims of the sentence already has the attribute.
    fn push(&mut self, entity: &str, attribute: String, value: (String, Option<f64>, String)) {
        if self
            .out
            .iter()
            .any(|c| c.key == key(entity) && c.attribute == attribute)
        {
            return;
        }
        self.out
            .push(Claim::new(entity, attribute, value, self.date, self.index));
    }

    /// The claims of the name at `start..end` of the sentence (`entity`), in each shape.
    fn about(&mut self, start: usize, end: usize, entity: &str) {
        let (lower, sentence) = (self.lower, self.sentence);
        let mut before = lower[..start].trim_end();
        // "of the United States": the article belongs to the name.
        for article in [" the", " a", " an"] {
            if let Some(stripped) = before.strip_suffix(article) {
                before = stripped;
                break;
            }
        }
        let after = lower[end..].trim_start();
        let after_original = sentence[end..].trim_start();
        self.attribute_of(entity, before, after, after_original);
        self.possessive(entity, after, after_original);
        self.has(entity, after, after_original);
        self.verb_at(entity, after, after_original);
        self.verb_phrase(entity, after, after_original);
    }

    /// "the ATTRIBUTE of ENTITY is VALUE", "ATTRIBUTE of ENTITY: VALUE".
    fn attribute_of(&mut self, entity: &str, before: &str, after: &str, after_original: &str) {
        if let Some(head) = before
            .strip_suffix(" of")
            .or_else(|| before.strip_suffix(" in"))
            .or_else(|| before.strip_suffix(" for"))
        {
            let phrase = head.rsplit([',', ';', '.', ':']).next().unwrap_or(head);
            let phrase_words: Vec<&str> = phrase.split_whitespace().collect();
            // The attribute is the last noun phrase: at most four words after "the".
            let from = phrase_words
                .iter()
                .rposition(|w| matches!(*w, "the" | "a" | "an"))
                .map_or(phrase_words.len().saturating_sub(3), |p| p + 1);
            let candidate = phrase_words[from..].join(" ");
            if let Some(attribute) = attribute(&candidate)
                && let Some(value) = copula_value(after, after_original)
            {
                self.push(entity, attribute, value);
            }
        }
    }

    /// "ENTITY's ATTRIBUTE is VALUE".
    fn possessive(&mut self, entity: &str, after: &str, after_original: &str) {
        if after.starts_with("'s ") || after.starts_with("’s ") {
            let skip = after.find(' ').map_or(after.len(), |i| i + 1);
            let rest = &after[skip..];
            let rest_original = &after_original[after_original
                .find(' ')
                .map_or(after_original.len(), |i| i + 1)..];
            if let Some((phrase, value)) = phrase_then_value(rest, rest_original)
                && let Some(attribute) = attribute(&phrase)
            {
                self.push(entity, attribute, value);
            }
        }
    }

    /// "ENTITY has a ATTRIBUTE of VALUE", "ENTITY had an estimated ATTRIBUTE of VALUE", "Acme
    /// Corp has 1,200 employees".
    fn has(&mut self, entity: &str, after: &str, after_original: &str) {
        for verb in ["has an ", "has a ", "had an ", "had a ", "has ", "had "] {
            if let Some(rest) = after.strip_prefix(verb) {
                let offset = after.len() - rest.len();
                let rest_original = &after_original[offset.min(after_original.len())..];
                if let Some(of) = rest.find(" of ") {
                    let phrase = &rest[..of];
                    if let Some(attribute) = attribute(phrase)
                        && let Some(value) = value_after(&rest_original[of + 4..])
                    {
                        self.push(entity, attribute, value);
                    }
                } else if let Some((written, number, unit, _)) = number(rest_original) {
                    // "Acme Corp has 1,200 employees.": the noun after the figure.
                    let noun: String = rest_original
                        .split_whitespace()
                        .skip_while(|w| {
                            w.starts_with(|c: char| {
                                c.is_ascii_digit() || matches!(c, '$' | '€' | '£')
                            })
                        })
                        .find(|w| !SCALES.iter().any(|(s, _)| w.eq_ignore_ascii_case(s)))
                        .unwrap_or_default()
                        .trim_matches(|c: char| !c.is_alphanumeric())
                        .to_lowercase();
                    if let Some(attribute) = attribute(&noun) {
                        self.push(entity, attribute, (written, Some(number), unit));
                    }
                }
                break;
            }
        }
    }

    /// "ENTITY melts at VALUE": the verb is the attribute ("melts at"; the question's
    /// "melting point" and "melt" share its stem).
    fn verb_at(&mut self, entity: &str, after: &str, after_original: &str) {
        if let Some(verb) = after.split_whitespace().next()
            && verb.len() > 3
            && verb.ends_with('s')
            && verb.chars().all(|c| c.is_ascii_lowercase())
            && let Some(rest) = after[verb.len()..].trim_start().strip_prefix("at ")
        {
            let offset = after.len() - rest.len();
            if let Some((written, number, unit, _)) =
                number(&after_original[offset.min(after_original.len())..])
            {
                self.push(entity, format!("{verb} at"), (written, Some(number), unit));
            }
        }
    }

    /// "ENTITY covers VALUE", "ENTITY was founded in YEAR": the vocabulary's verb phrases
    /// that state an attribute (longest first there).
    fn verb_phrase(&mut self, entity: &str, after: &str, after_original: &str) {
        for (verb, attr) in &vocabulary().verb_attributes {
            if let Some(rest) = after
                .strip_prefix(verb.as_str())
                .and_then(|rest| rest.strip_prefix(' '))
            {
                let offset = after.len() - rest.len();
                if let Some((written, number, unit, _)) =
                    number(&after_original[offset.min(after_original.len())..])
                {
                    self.push(entity, attr.to_owned(), (written, Some(number), unit));
                }
                break;
            }
        }
    }

    /// "ENTITY was released on July 7, 2023": the participle is the attribute and the day its
    /// value; the statement speaks as of the document, not as of the day it names.
    fn participles(&mut self, fallback_date: u32) {
        let (lower, sentence, entities) = (self.lower, self.sentence, self.entities);
        for (_, end, n) in find_names(lower, entities) {
            let after = lower[end..].trim_start();
            let after_original = sentence[end..].trim_start();
            let Some(rest) = ["was ", "were ", "has been ", "had been "]
                .iter()
                .find_map(|aux| after.strip_prefix(aux))
            else {
                continue;
            };
            let Some(verb) = rest.split_whitespace().next() else {
                continue;
            };
            if verb.len() <= 4
                || !verb.ends_with("ed")
                || !verb.chars().all(|c| c.is_ascii_lowercase())
            {
                continue;
            }
            let Some(tail) = rest[verb.len()..]
                .trim_start()
                .strip_prefix("on ")
                .or_else(|| rest[verb.len()..].trim_start().strip_prefix("in "))
            else {
                continue;
            };
            let offset = after.len() - tail.len();
            let head: String = after_original
                .get(offset..)
                .unwrap_or_default()
                .chars()
                .take(24)
                .collect();
            let entity = &entities[n];
            if let Some(day) = crate::text::dates::find(&head)
                && !self
                    .out
                    .iter()
                    .any(|c| c.key == key(entity) && c.attribute == verb)
            {
                self.out.push(Claim::new(
                    entity,
                    verb.to_owned(),
                    (crate::text::dates::show(day), None, String::new()),
                    fallback_date,
                    self.index,
                ));
            }
        }
    }

    /// "VALUE is now the ATTRIBUTE for ENTITY" ("Ann Lee is now the primary contact for
    /// Acme").
    fn roles(&mut self) {
        let (lower, sentence, entities) = (self.lower, self.sentence, self.entities);
        for (start, _, n) in find_names(lower, entities) {
            let before = lower[..start].trim_end();
            let Some(head) = before
                .strip_suffix(" for")
                .or_else(|| before.strip_suffix(" of"))
                .or_else(|| before.strip_suffix(" at"))
            else {
                continue;
            };
            for copula in [
                " is now the ",
                " is the ",
                " became the ",
                " is now our ",
                " is our ",
            ] {
                if let Some(at) = head.rfind(copula) {
                    let phrase = &head[at + copula.len()..];
                    let value = sentence[..at].trim();
                    // The value is the clause's subject: after the last clause break.
                    let value = value.rsplit([';', ':', '.']).next().unwrap_or(value).trim();
                    if let Some(attribute) = attribute(phrase)
                        && !value.is_empty()
                        && value.split_whitespace().count() <= 5
                    {
                        self.push(
                            &entities[n],
                            attribute,
                            (value.to_owned(), None, String::new()),
                        );
                    }
                    break;
                }
            }
        }
    }

    /// Changes, about the named entity or else the subject: "bring Google Ads down to $58k
    /// from $83k", "the Q1 Meta spend was not $91k but $86k", "moved its headquarters to
    /// Denver".
    fn changes(&mut self, sure_subject: Option<&str>) {
        let (lower, sentence, entities) = (self.lower, self.sentence, self.entities);
        let named: Vec<String> = find_names(lower, entities)
            .iter()
            .map(|(_, _, n)| entities[*n].clone())
            .collect();
        for (phrase, value, replaced) in changes(sentence) {
            // The change is about a name the sentence makes outside the changed phrase ("bring
            // Google Ads down" changes something of the subject, not of Google Ads).
            let phrase_lower = phrase.to_ascii_lowercase();
            let about = named
                .iter()
                .find(|n| !phrase_lower.contains(&n.to_ascii_lowercase()))
                .cloned()
                .or_else(|| sure_subject.map(str::to_owned));
            let Some(about) = about.as_deref() else {
                continue;
            };
            {
                let (attribute_words, qualifiers) = split_qualifiers(&phrase);
                let Some(attribute) = attribute(&attribute_words) else {
                    continue;
                };
                if self
                    .out
                    .iter()
                    .any(|c| c.key == key(about) && c.attribute == attribute)
                {
                    continue;
                }
                self.out.push(Claim {
                    qualifiers,
                    replaces: replaced,
                    ..Claim::new(about, attribute, value, self.date, self.index)
                });
            }
        }
    }
}

/// The value after a copula at the start of `lower` / `original` (same text, two cases).
fn copula_value(lower: &str, original: &str) -> Option<(String, Option<f64>, String)> {
    for copula in COPULAS {
        if let Some(rest) = lower.strip_prefix(copula)
            && (copula.ends_with(':') || rest.starts_with(' '))
        {
            let offset = lower.len() - rest.len();
            return value_after(&original[offset.min(original.len())..]);
        }
    }
    None
}

/// "ATTRIBUTE is VALUE" at the start of a text: the phrase and the value.
fn phrase_then_value(lower: &str, original: &str) -> Option<(String, Written)> {
    let words: Vec<&str> = lower.split_whitespace().collect();
    for (i, word) in words.iter().enumerate().take(6) {
        if matches!(
            *word,
            "is" | "was"
                | "are"
                | "were"
                | "stands"
                | "stood"
                | "reached"
                | "totals"
                | "totaled"
                | "amounts"
        ) {
            let phrase = words[..i].join(" ");
            let at = lower.find(&format!(" {word} "))?;
            let value = copula_value(&lower[at + 1..], &original[(at + 1).min(original.len())..])?;
            return Some((phrase, value));
        }
    }
    None
}

/// Whether attribute `a` names the same thing as `b`: equal, or written with at least two
/// thirds of its words (`google ads` and `google ads budget`).
pub fn same_attribute(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let words = |s: &str| -> std::collections::BTreeSet<String> {
        s.split_whitespace().map(str::to_owned).collect()
    };
    let (a, b) = (words(a), words(b));
    let (small, large) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    small.len() >= 2 && small.is_subset(large) && small.len() * 3 >= large.len() * 2
}

/// Field labels that date a document rather than state a fact.
const DATE_FIELDS: &[&str] = &[
    "date",
    "published",
    "updated",
    "posted",
    "as of",
    "dated",
    "sent",
];

/// Changes a sentence states: (attribute phrase, new value, the value it replaced).
/// "bring Google Ads down to $58k from $83k", "raise X from 5% to 7%", "the Q1 Meta spend
/// was not $91k but $86k", "moved its headquarters to Denver".
fn changes(sentence: &str) -> Vec<(String, Written, Option<String>)> {
    let lower = sentence.to_ascii_lowercase();
    let mut out = Vec::new();
    // "PHRASE was not A but B"
    for marker in [" was not ", " is not ", " were not ", " are not "] {
        if let Some(at) = lower.find(marker)
            && let Some(but) = lower[at + marker.len()..].find(" but ")
        {
            let old = sentence[at + marker.len()..at + marker.len() + but].trim();
            let new_at = at + marker.len() + but + 5;
            let phrase = noun_phrase_before(&sentence[..at]);
            if let Some(value) = value_after(&sentence[new_at..]) {
                out.push((phrase, value, Some(old.to_owned())));
            }
            return out;
        }
    }
    // "PHRASE (down|up)? to A from B" / "PHRASE from B to A"
    if let Some(to) = lower.find(" to ")
        && let Some(from) = lower.find(" from ")
    {
        let (head_end, new_text, old_text) = if to < from {
            (to, &sentence[to + 4..from], &sentence[from + 6..])
        } else {
            (from, &sentence[to + 4..], &sentence[from + 6..to])
        };
        let head = sentence[..head_end]
            .trim_end()
            .trim_end_matches(" down")
            .trim_end_matches(" up");
        if let (Some(new), Some(old)) = (number(new_text), number(old_text)) {
            let phrase = noun_phrase_before(head);
            out.push((phrase, (new.0, Some(new.1), new.2), Some(old.0)));
            return out;
        }
    }
    // "moved its PHRASE to VALUE"
    for verb in ["moved its ", "moved the ", "relocated its ", "changed its "] {
        if let Some(at) = lower.find(verb)
            && let Some(to) = lower[at + verb.len()..].find(" to ")
        {
            let phrase = sentence[at + verb.len()..at + verb.len() + to].to_owned();
            let rest = &sentence[at + verb.len() + to + 4..];
            let value: String = rest
                .split([',', '.', ';', ' '])
                .take_while(|w| w.chars().next().is_some_and(char::is_uppercase))
                .collect::<Vec<_>>()
                .join(" ");
            if !value.is_empty() {
                out.push((phrase, (value, None, String::new()), None));
            }
            return out;
        }
    }
    out
}

/// The noun phrase that ends `text`: its last capitalised run ("we bring Google Ads" →
/// "Google Ads"), else its last words after a verb or article (at most four).
fn noun_phrase_before(text: &str) -> String {
    let text = text.rsplit([',', ';', ':']).next().unwrap_or(text).trim();
    let words: Vec<&str> = text.split_whitespace().collect();
    let from = words
        .iter()
        .rposition(|w| {
            matches!(
                w.to_ascii_lowercase().as_str(),
                "the"
                    | "a"
                    | "an"
                    | "we"
                    | "our"
                    | "their"
                    | "its"
                    | "bring"
                    | "cut"
                    | "raise"
                    | "lower"
                    | "increase"
                    | "reduce"
                    | "move"
                    | "take"
            )
        })
        .map_or(words.len().saturating_sub(4), |p| p + 1);
    words[from.max(words.len().saturating_sub(5))..].join(" ")
}

/// An attribute phrase's qualifiers: its periods and capitalised words ("Q1 2026 Meta spend"
/// → "spend" qualified by "meta" and "q1 2026"). With no lower-case word left, the phrase is
/// the attribute ("Google Ads").
fn split_qualifiers(phrase: &str) -> (String, Vec<String>) {
    let mut qualifiers = periods(phrase);
    let period_words: Vec<String> = qualifiers
        .iter()
        .flat_map(|p| p.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .collect();
    let mut rest: Vec<&str> = Vec::new();
    let mut capitalised: Vec<&str> = Vec::new();
    for word in phrase.split_whitespace() {
        if period_words.contains(&word.to_lowercase()) {
            continue;
        }
        if word.chars().next().is_some_and(char::is_uppercase) {
            capitalised.push(word);
        } else {
            rest.push(word);
        }
    }
    if rest.is_empty() {
        return (capitalised.join(" "), qualifiers);
    }
    if !capitalised.is_empty() {
        qualifiers.push(capitalised.join(" ").to_lowercase());
    }
    qualifiers.sort();
    (rest.join(" "), qualifiers)
}

/// The periods a text names (`Q1 2026`, `H2 2025`, `FY2024`, `March 2026`), lower case:
/// they qualify the figures they head.
pub fn periods(text: &str) -> Vec<String> {
    let words: Vec<String> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ':' | '|' | ';'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let year = |w: &str| w.len() == 4 && w.bytes().all(|b| b.is_ascii_digit());
    let mut out = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let next = words.get(i + 1).map(String::as_str).unwrap_or_default();
        let marker = matches!(word.as_str(), "q1" | "q2" | "q3" | "q4" | "h1" | "h2")
            || crate::text::dates::month_number(word).is_some();
        if marker && year(next) {
            out.push(format!("{word} {next}"));
        } else if let Some(rest) = word.strip_prefix("fy")
            && !rest.is_empty()
            && rest.bytes().all(|b| b.is_ascii_digit())
        {
            out.push(word.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A Markdown table's rows (lines starting with `|`), as trimmed cells.
fn table_rows(lines: &[&str]) -> Vec<Vec<String>> {
    lines
        .iter()
        .filter(|l| l.trim_start().starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// A `|---|:---:|` row.
fn is_separator(row: &[String]) -> bool {
    row.iter()
        .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// The claims of a Markdown table (`rows`, the separator row included or not).
///
/// In a document about `subject`, the table is about it: a two-column table is a list of
/// fields (`| Population | 10,194,277 |`); a wider one gives figures whose attribute is the
/// column's header and whose qualifier is the row's label (`| Meta | $86,000 | 2.4 |` under
/// `| Channel | Spend | ROAS |`), plus the period the header or `context` (the document's
/// title) names. Without a subject, the first column names the entities
/// (`| Country | Population | Area (sq km) |`).
pub fn from_table(
    lines: &[&str],
    first_index: usize,
    fallback_date: u32,
    subject: Option<&str>,
    context: &str,
) -> Vec<Claim> {
    let rows = table_rows(lines);
    let Some(header) = rows.first() else {
        return Vec::new();
    };
    // A two-column table whose first row already holds a figure has no header: every row is
    // a field (`| Density | 7.87 g/cm3 |`).
    let headless = subject.is_some()
        && header.len() == 2
        && header.get(1).is_some_and(|cell| number(cell).is_some());
    let skip = usize::from(!headless);
    let date = match stated_date(&header.join(" ")) {
        0 => fallback_date,
        d => d,
    };
    let mut period = periods(&header.join(" | "));
    if period.is_empty() {
        period = periods(context);
    }
    let mut out = Vec::new();
    // Separator rows are not sentences: row `r` of the rest is sentence `first_index + r`.
    let rows: Vec<&Vec<String>> = rows.iter().filter(|row| !is_separator(row)).collect();
    for (r, row) in rows.iter().enumerate().skip(skip) {
        let Some(label) = row.first().filter(|e| !e.is_empty()) else {
            continue;
        };
        let sentence = first_index + r;
        if let Some(subject) = subject
            && header.len() == 2
        {
            // A list of fields about the subject.
            let (name, unit_hint) = split_unit(label);
            if let Some(attribute) = attribute(name)
                && let Some(cell) = row.get(1)
                && let Some(value) = cell_value(cell, unit_hint)
            {
                out.push(Claim {
                    qualifiers: period.clone(),
                    ..Claim::new(subject, attribute, value, date, sentence)
                });
            }
            continue;
        }
        for (column, cell) in row.iter().enumerate().skip(1) {
            let Some(head) = header.get(column) else {
                continue;
            };
            let (name, unit_hint) = split_unit(head);
            let Some(attribute) = attribute(name) else {
                continue;
            };
            let Some((written, number, unit)) = cell_value(cell, unit_hint) else {
                continue;
            };
            if number.is_none() && subject.is_none() {
                continue;
            }
            let (entity, mut qualifiers) = match subject {
                Some(subject) => (subject.to_owned(), vec![label.to_lowercase()]),
                None => (label.clone(), Vec::new()),
            };
            qualifiers.extend(period.iter().cloned());
            qualifiers.retain(|q| !q.is_empty());
            qualifiers.sort();
            qualifiers.dedup();
            out.push(Claim {
                qualifiers,
                ..Claim::new(&entity, attribute, (written, number, unit), date, sentence)
            });
        }
    }
    out
}

/// "Area (sq km)": the name and the unit in parentheses (a period there is no unit).
fn split_unit(head: &str) -> (&str, &str) {
    match head.split_once('(') {
        Some((name, rest)) => (name.trim(), rest.trim_end_matches(')').trim()),
        None => (head.trim(), ""),
    }
}

/// A table cell as a value: a figure (with the header's unit when it states none), or a
/// short text.
fn cell_value(cell: &str, unit_hint: &str) -> Option<(String, Option<f64>, String)> {
    if let Some((written, number, mut unit, _)) = number(cell) {
        if unit.is_empty() {
            unit = vocabulary()
                .units
                .iter()
                .find(|(w, _)| unit_hint.eq_ignore_ascii_case(w))
                .map(|(_, n)| n.clone())
                .unwrap_or_default();
        }
        return Some((written, Some(number), unit));
    }
    let text = cell.trim();
    (!text.is_empty() && text.split_whitespace().count() <= 8)
        .then(|| (text.to_owned(), None, String::new()))
}

/// Whether two values of one attribute disagree beyond tolerance: numbers more than 0.5 %
/// apart (or in different units), texts different once normalised.
pub fn disagree(a: &Claim, b: &Claim) -> bool {
    match (a.number, b.number) {
        (Some(x), Some(y)) => {
            if a.unit != b.unit && !a.unit.is_empty() && !b.unit.is_empty() {
                return false;
            }
            // Years and counts of whole things are exact; measured figures have a tolerance.
            if Vocabulary::has(&vocabulary().year_attributes, &a.attribute) {
                return x != y;
            }
            let scale = x.abs().max(y.abs()).max(1e-9);
            (x - y).abs() / scale > 0.005
        }
        (None, None) => key(&a.value) != key(&b.value),
        _ => false,
    }
}

pub(crate) mod values;

use self::values::SCALES;
pub use self::values::{number, stated_date};
use crate::vocabulary::{Vocabulary, vocabulary};

#[cfg(test)]
mod tests;
