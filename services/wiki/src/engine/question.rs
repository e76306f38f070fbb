//! What a question asks: the names it makes (resolved to the wiki's entities, or not), the
//! attribute it asks about, and its content terms.

use crate::claims::{attribute, key};
use crate::index::TenantIndex;

/// A name the question makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    /// As written.
    pub text: String,
    /// The entity key it resolves to, if the wiki has a page for it.
    pub key: Option<String>,
    /// A single word written in lower case that an entity is named by ("does it
    /// *support*"): it narrows an answer only when the question names nothing else.
    pub soft: bool,
}

/// An analysed question.
#[derive(Debug, Clone, Default)]
pub(crate) struct Question {
    /// The question.
    pub text: String,
    /// Proper names it makes.
    pub names: Vec<Name>,
    /// The attribute asked about, when it asks for one fact.
    pub attribute: Option<String>,
}

/// Words that begin questions and requests (capitalised, not names).
const QUESTION_WORDS: &[&str] = &[
    "what",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "which",
    "why",
    "how",
    "is",
    "are",
    "was",
    "were",
    "does",
    "do",
    "did",
    "has",
    "have",
    "had",
    "can",
    "could",
    "should",
    "would",
    "will",
    "list",
    "tell",
    "give",
    "name",
    "compare",
    "describe",
    "explain",
    "summarize",
    "summarise",
    "according",
    "in",
    "on",
    "at",
    "for",
    "by",
    "from",
    "of",
    "the",
    "a",
    "an",
    "please",
    "show",
];

fn is_capitalised(word: &str) -> bool {
    word.chars().next().is_some_and(char::is_uppercase)
}

fn clean(word: &str) -> &str {
    let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '&' && c != '.');
    let word = word.trim_end_matches('.');
    word.strip_suffix("'s")
        .or_else(|| word.strip_suffix("’s"))
        .unwrap_or(word)
}

/// Analyses `text` against `index`.
pub(crate) fn analyse(
    text: &str,
    index: &TenantIndex,
    synonyms: &crate::synonyms::Synonyms,
) -> Question {
    let words: Vec<&str> = text.split_whitespace().collect();
    let cleaned: Vec<&str> = words.iter().map(|w| clean(w)).collect();
    let mut names: Vec<Name> = Vec::new();
    let mut taken = vec![false; words.len()];
    known_names(&cleaned, index, &mut names, &mut taken);
    unknown_names(&words, &cleaned, &taken, index, synonyms, &mut names);
    let attribute = asked_attribute(text, &names);
    Question {
        text: text.to_owned(),
        names,
        attribute,
    }
}

/// Word sequences the wiki has an entity page for, longest first (any case), marked `taken`.
fn known_names(cleaned: &[&str], index: &TenantIndex, names: &mut Vec<Name>, taken: &mut [bool]) {
    for len in (1..=5).rev() {
        for start in 0..cleaned.len().saturating_sub(len - 1) {
            if taken[start..start + len].iter().any(|t| *t) {
                continue;
            }
            let first = cleaned[start].to_lowercase();
            if len > 1
                && (QUESTION_WORDS.contains(&first.as_str()) || crate::text::is_stopword(&first))
            {
                // "the united states": the name starts after the article.
                continue;
            }
            // "Django 9.9.1" is not "Django": a version after the words names another thing.
            if cleaned
                .get(start + len)
                .is_some_and(|next| crate::text::is_version(next))
            {
                continue;
            }
            let phrase = cleaned[start..start + len].join(" ");
            let phrase_key = key(&phrase);
            // An acronym ("U.S.", "US") may spell a stopword; a written stopword is not a name.
            let acronym = phrase.chars().filter(|c| c.is_alphabetic()).count() >= 2
                && phrase
                    .chars()
                    .filter(|c| c.is_alphabetic())
                    .all(char::is_uppercase);
            if phrase_key.is_empty()
                || (len == 1
                    && !acronym
                    && (QUESTION_WORDS.contains(&phrase_key.as_str())
                        || crate::text::is_stopword(&phrase_key)))
            {
                continue;
            }
            // A single lower-case word must be a name the wiki knows as such (not a concept).
            if let Ok(Some(path)) = index.page_for_key(&phrase_key)
                && path.starts_with("entities/")
            {
                let soft = len == 1 && !phrase.chars().any(char::is_uppercase);
                names.push(Name {
                    text: phrase,
                    key: Some(phrase_key),
                    soft,
                });
                taken[start..start + len].iter_mut().for_each(|t| *t = true);
            }
        }
    }
}

/// Capitalised runs among the words not `taken`: names of something the wiki has no page
/// for, or parts of a name it knows ("Northwind" of "Northwind Logistics").
fn unknown_names(
    words: &[&str],
    cleaned: &[&str],
    taken: &[bool],
    index: &TenantIndex,
    synonyms: &crate::synonyms::Synonyms,
    names: &mut Vec<Name>,
) {
    let mut i = 0;
    while i < cleaned.len() {
        let word = cleaned[i];
        let starts_run = !taken[i]
            && is_capitalised(word)
            && !QUESTION_WORDS.contains(&word.to_lowercase().as_str())
            && !crate::text::is_stopword(&word.to_lowercase())
            && attribute(word).is_none_or(|a| {
                a != word.to_lowercase() || word.chars().skip(1).any(char::is_lowercase)
            });
        if !starts_run {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < cleaned.len()
            && !taken[j]
            && is_capitalised(cleaned[j])
            && !words[j - 1].ends_with([',', '?', ';'])
        {
            j += 1;
        }
        // A version ends a product's name: "Django 9.9.1" is not "Django".
        if j < cleaned.len() && !taken[j] && crate::text::is_version(cleaned[j]) {
            j += 1;
        }
        let phrase = cleaned[i..j].join(" ");
        // An acronym of an attribute (GDP) or a calendar word is not a name.
        let upper = phrase
            .chars()
            .filter(|c| c.is_alphabetic())
            .all(char::is_uppercase);
        let attribute_like = upper
            && crate::vocabulary::Vocabulary::has(
                &crate::vocabulary::vocabulary().acronyms_not_names,
                &phrase,
            );
        let calendar = crate::text::is_calendar(&phrase);
        // A phrase of the tenant's synonym table ("ARR") is a word of its documents.
        let attribute_like = attribute_like || synonyms.knows(&phrase);
        if !attribute_like && !calendar && phrase.chars().count() >= 2 {
            // A part of a known name ("Northwind" of "Northwind Logistics") is that entity.
            let words: Vec<String> = key(&phrase).split(' ').map(str::to_owned).collect();
            let known = index.entities_with_words(&words).unwrap_or_default();
            if known.is_empty() {
                names.push(Name {
                    text: phrase,
                    key: None,
                    soft: false,
                });
            } else {
                for (_, keys) in known.into_iter().take(3) {
                    let holding = keys
                        .iter()
                        .filter(|k| {
                            let key_words: Vec<&str> = k.split(' ').collect();
                            words.iter().all(|w| key_words.contains(&w.as_str()))
                        })
                        .max_by_key(|k| k.len())
                        .cloned();
                    // Only a name some entity's name holds whole resolves: "Django 9.9.1"
                    // is not "Django 3.2".
                    names.push(Name {
                        text: phrase.clone(),
                        key: holding,
                        soft: false,
                    });
                }
            }
        }
        i = j;
    }
}

/// The attribute a question asks for: "the X of NAME", "NAME's X", or a fixed shape.
fn asked_attribute(text: &str, names: &[Name]) -> Option<String> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-' || c == '’'))
        .filter(|w| !w.is_empty())
        .collect();
    for crate::vocabulary::Shape {
        words: shape,
        attribute,
    } in &crate::vocabulary::vocabulary().question_shapes
    {
        let mut at = 0;
        let matched =
            shape.iter().all(
                |needle| match words[at..].iter().position(|w| w == needle) {
                    Some(p) => {
                        at += p + 1;
                        true
                    }
                    None => false,
                },
            );
        if matched {
            return Some(attribute.clone());
        }
    }
    let name = names
        .iter()
        .find(|n| n.key.is_some())
        .or_else(|| names.first())?;
    let name_lower = name.text.to_lowercase();
    let position = lower.find(&name_lower)?;
    let before = lower[..position].trim_end();
    let before = before.strip_suffix(" the").map_or(before, str::trim_end);
    if let Some(head) = before
        .strip_suffix(" of")
        .or_else(|| before.strip_suffix(" in"))
    {
        let head_words: Vec<&str> = head
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .filter(|w| !w.is_empty())
            .collect();
        let from = head_words
            .iter()
            .rposition(|w| {
                matches!(
                    *w,
                    "the" | "is" | "was" | "what" | "what's" | "whats" | "are" | "were"
                )
            })
            .map_or(head_words.len().saturating_sub(3), |p| p + 1);
        if let Some(attribute) = attribute(&head_words[from..].join(" ")) {
            return Some(attribute);
        }
    }
    let after = lower[position + name_lower.len()..].trim_start();
    if let Some(rest) = after
        .strip_prefix("'s ")
        .or_else(|| after.strip_prefix("’s "))
    {
        let phrase: Vec<&str> = rest
            .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == ' '))
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .take_while(|w| {
                !matches!(
                    *w,
                    "in" | "as" | "according" | "now" | "today" | "currently"
                )
            })
            .collect();
        if let Some(attribute) = attribute(&phrase.join(" ")) {
            return Some(attribute);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Doc, Indexes};

    fn index() -> std::sync::Arc<TenantIndex> {
        let index = Indexes::in_memory().tenant("t").unwrap();
        let page = |path: &str, title: &str, keys: &[&str]| Doc::Page {
            path: path.into(),
            title: title.into(),
            summary: String::new(),
            names: title.into(),
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        };
        index
            .apply(
                &[],
                vec![
                    page("entities/portugal.md", "Portugal", &["portugal"]),
                    page(
                        "entities/united-states.md",
                        "United States",
                        &["united states", "us"],
                    ),
                    page("concepts/population.md", "population", &["population"]),
                ],
                1,
            )
            .unwrap();
        index
    }

    #[test]
    fn names_resolve_and_attributes_are_read() {
        let index = index();
        for (question, names, attribute) in [
            (
                "What is the population of Portugal?",
                vec![("Portugal", true)],
                Some("population"),
            ),
            (
                "What is Portugal's capital?",
                vec![("Portugal", true)],
                Some("capital"),
            ),
            (
                "what is the total area of the united states",
                vec![("united states", true)],
                Some("area"),
            ),
            (
                "How many people live in the U.S.?",
                vec![("U.S", true)],
                Some("population"),
            ),
            (
                "What is the population of Narnia?",
                vec![("Narnia", false)],
                Some("population"),
            ),
            (
                "What is the GDP of Portugal in 2024?",
                vec![("Portugal", true)],
                Some("gdp"),
            ),
            (
                "Tell me about Portugal and Atlantis.",
                vec![("Portugal", true), ("Atlantis", false)],
                None,
            ),
        ] {
            let q = analyse(question, &index, &crate::synonyms::Synonyms::default());
            let got: Vec<(String, bool)> = q
                .names
                .iter()
                .map(|n| (n.text.clone(), n.key.is_some()))
                .collect();
            let want: Vec<(String, bool)> =
                names.iter().map(|(n, k)| ((*n).to_owned(), *k)).collect();
            assert_eq!(got, want, "{question}");
            assert_eq!(q.attribute.as_deref(), attribute, "{question}");
        }
    }
}
