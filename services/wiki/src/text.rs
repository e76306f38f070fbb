//! Deterministic text analysis: sentences, terms, key phrases, entities, document types and
//! extractive summaries. No model, no randomness: the same input gives the same pages.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Words that carry no topic.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "said",
    "says",
    "new",
    "one",
    "two",
    "may",
    "might",
    "must",
    "shall",
    "per",
    "via",
    "yet",
    "us",
    "much",
    "many",
    "well",
    "get",
    "got",
    "make",
    "made",
    "like",
    "use",
    "used",
    "using",
    "within",
    "without",
    "across",
    "among",
    "around",
    "upon",
    "whether",
];

/// Whether `word` (lowercase) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    static SET: std::sync::OnceLock<std::collections::HashSet<&'static str>> =
        std::sync::OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect())
        .contains(word)
}

/// Lowercase word tokens (letters, digits, inner apostrophes and hyphens).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
        .map(|w| w.trim_matches(|c| c == '\'' || c == '-').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// A crude, deterministic stem (plural and common suffixes), for matching.
pub fn stem(word: &str) -> String {
    let mut w = word.to_owned();
    for suffix in ["ingly", "edly", "ing", "ied", "ies", "ed", "es", "s"] {
        if w.len() > suffix.len() + 3 && w.ends_with(suffix) {
            w.truncate(w.len() - suffix.len());
            if suffix == "ies" || suffix == "ied" {
                w.push('y');
            }
            break;
        }
    }
    w
}

/// Content terms (no stopwords, no pure numbers), stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| w.len() > 2 && !is_stopword(w) && !w.chars().all(|c| c.is_ascii_digit()))
        .map(|w| stem(&w))
        .collect()
}

/// Splits text into sentences (on `.`, `!`, `?` followed by whitespace, and on blank lines).
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for paragraph in text.split("\n\n").flat_map(blocks) {
        let paragraph = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
        // A table row is one sentence, whatever its cells hold ("Conv. rate", "Avg. CPC").
        if paragraph.starts_with('|') {
            push_sentence(&mut out, &paragraph);
            continue;
        }
        let mut current = String::new();
        let chars: Vec<char> = paragraph.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            current.push(c);
            let end = matches!(c, '.' | '!' | '?')
                && chars.get(i + 1).is_none_or(|n| n.is_whitespace())
                && !ends_with_abbreviation(&current);
            if end {
                push_sentence(&mut out, &current);
                current.clear();
            }
        }
        push_sentence(&mut out, &current);
    }
    out
}

/// Whether a line starts a block of its own: a field ("Population: 10,825,309"), a speaker's
/// turn, a list item or a table row. Other lines continue the line before (wrapped prose).
fn starts_block(line: &str) -> bool {
    let line = line.trim_start();
    if line.starts_with(['-', '*', '|', '•']) {
        return true;
    }
    if let Some(number) = line.split_once(". ").map(|(n, _)| n)
        && !number.is_empty()
        && number.len() <= 3
        && number.chars().all(|c| c.is_ascii_digit())
    {
        return true;
    }
    line.split_once(':').is_some_and(|(head, rest)| {
        !head.is_empty()
            && head.split_whitespace().count() <= 6
            && head.chars().next().is_some_and(char::is_uppercase)
            && !rest.starts_with("//")
            && !head.contains(['.', '!', '?'])
    })
}

/// The blocks of a paragraph: its lines joined, except where a line starts a block.
fn blocks(paragraph: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in paragraph.lines() {
        match out.last_mut() {
            Some(block) if !starts_block(line) => {
                block.push(' ');
                block.push_str(line);
            }
            _ => out.push(line.to_owned()),
        }
    }
    out
}

fn ends_with_abbreviation(sentence: &str) -> bool {
    let last = sentence.split_whitespace().last().unwrap_or_default();
    matches!(
        last,
        "Mr."
            | "Mrs."
            | "Ms."
            | "Dr."
            | "Inc."
            | "Ltd."
            | "Co."
            | "Corp."
            | "e.g."
            | "i.e."
            | "vs."
            | "St."
    ) || (last.len() == 2 && last.chars().next().is_some_and(char::is_uppercase))
        // Initials: "J.J.", "C.F." (a name goes on after them).
        || (last.len() >= 2
            && last.ends_with('.')
            && last.split('.').filter(|p| !p.is_empty()).all(|p| {
                p.chars().count() == 1 && p.chars().all(char::is_uppercase)
            }))
}

fn push_sentence(out: &mut Vec<String>, sentence: &str) {
    let trimmed = sentence.trim();
    if trimmed.chars().filter(|c| c.is_alphanumeric()).count() >= 3 {
        out.push(trimmed.to_owned());
    }
}

/// Document types `doc_type: auto` chooses among.
pub fn classify(text: &str) -> &'static str {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let speakers: Vec<&str> = lines
        .iter()
        .filter_map(|l| {
            l.split_once(':').and_then(|(who, _)| {
                let who = who.trim();
                (!who.is_empty()
                    && who.len() <= 30
                    && who.split_whitespace().count() <= 3
                    && who.chars().next().is_some_and(char::is_uppercase))
                .then_some(who)
            })
        })
        .collect();
    // Speakers take turns: few names, each on many lines. Many names once each are the
    // fields of a record ("Population: …", "Capital: …").
    let distinct: BTreeSet<&str> = speakers.iter().copied().collect();
    let lower = text.to_lowercase();
    if lines.len() >= 4 && speakers.len() * 2 >= lines.len() && distinct.len() * 2 <= speakers.len()
    {
        "transcript"
    } else if lower.contains("abstract")
        && (lower.contains("references") || lower.contains("et al"))
    {
        "paper"
    } else if text.chars().count() <= 280
        && lines.len() <= 3
        && sentences(text).len() <= 3
        && text.split_whitespace().any(|w| {
            (w.starts_with('#') || w.starts_with('@'))
                && w[1..].chars().next().is_some_and(char::is_alphanumeric)
        })
    {
        // Short and addressed or tagged as posts are: a post. Short alone is a note.
        "tweet"
    } else if text.chars().count() >= 1500 {
        "article"
    } else {
        "note"
    }
}

/// Term frequencies of a text.
pub fn term_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for term in terms(text) {
        *counts.entry(term).or_insert(0) += 1;
    }
    counts
}

/// The `n` best sentences (by the document's own term frequencies, favouring early ones),
/// as (index, sentence), in document order.
pub fn summary(sentences: &[String], n: usize) -> Vec<(usize, String)> {
    let all = sentences.join(" ");
    let counts = term_counts(&all);
    let mut scored: Vec<(usize, f64)> = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let t = terms(s);
            if t.is_empty() {
                return (i, 0.0);
            }
            let score: f64 = t
                .iter()
                .map(|w| counts.get(w).copied().unwrap_or(0) as f64)
                .sum::<f64>()
                / (t.len() as f64).sqrt();
            (i, score * (1.0 + 1.0 / (1.0 + i as f64)))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut chosen: Vec<usize> = scored.into_iter().take(n).map(|(i, _)| i).collect();
    chosen.sort_unstable();
    chosen
        .into_iter()
        .map(|i| (i, sentences[i].clone()))
        .collect()
}

/// Key phrases: the most frequent content words and two-word phrases (ties by name).
pub fn key_phrases(text: &str, n: usize) -> Vec<String> {
    let ws: Vec<String> = words(text);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for w in &ws {
        if w.len() > 3 && !is_stopword(w) && !w.chars().any(|c| c.is_ascii_digit()) {
            *counts.entry(w.clone()).or_insert(0) += 1;
        }
    }
    // Two-word phrases only within a clause (never across punctuation).
    let clauses: Vec<Vec<String>> = text
        .split(['.', ',', ';', ':', '!', '?', '\n', '(', ')'])
        .map(words)
        .collect();
    let mut pairs: BTreeMap<String, usize> = BTreeMap::new();
    for pair in clauses.iter().flat_map(|clause| clause.windows(2)) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.len() > 3
            && b.len() > 3
            && !is_stopword(a)
            && !is_stopword(b)
            && !a.chars().any(|c| c.is_ascii_digit())
            && !b.chars().any(|c| c.is_ascii_digit())
        {
            *pairs.entry(format!("{a} {b}")).or_insert(0) += 1;
        }
    }
    // A topic recurs: words and phrases seen at least twice; phrases weigh double.
    let mut ranked: Vec<(String, usize)> = counts
        .into_iter()
        .filter(|(_, c)| *c >= 2)
        .chain(
            pairs
                .into_iter()
                .filter(|(_, c)| *c >= 2)
                .map(|(p, c)| (p, c * 2)),
        )
        .collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out: Vec<String> = Vec::new();
    for (phrase, _) in ranked {
        // Skip a word already covered by a chosen phrase and vice versa.
        if out
            .iter()
            .any(|p| p.contains(&phrase) || phrase.contains(p.as_str()))
        {
            continue;
        }
        out.push(phrase);
        if out.len() == n {
            break;
        }
    }
    out
}

/// A URL- and file-safe slug: lowercase ASCII letters, digits and `-`, at most 64 characters.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let trimmed: String = out.trim_matches('-').chars().take(64).collect();
    let trimmed = trimmed.trim_end_matches('-').to_owned();
    if trimmed.is_empty() {
        "untitled".to_owned()
    } else {
        trimmed
    }
}

/// Distinct stems of a text, for overlap scoring.
pub fn term_set(text: &str) -> BTreeSet<String> {
    terms(text).into_iter().collect()
}

/// Whether a sentence mentions a name (whole words, case-insensitive).
pub fn mentions(sentence: &str, name: &str) -> bool {
    // ASCII lower case keeps byte offsets; names and sentences are compared the same way.
    let lower = sentence.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    if name.is_empty() {
        return false;
    }
    lower.match_indices(&name).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + name.len()..].chars().next();
        before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

/// The normalised key of an entity name: lower case, no leading article, no possessive, no
/// dots (so `U.S.` and `US` meet), single spaces.
pub fn key(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    while words
        .first()
        .is_some_and(|w| matches!(*w, "the" | "a" | "an"))
        && words.len() > 1
    {
        words.remove(0);
    }
    let joined = words.join(" ");
    let joined = joined
        .trim_end_matches("'s")
        .trim_end_matches("’s")
        .replace(['.', ','], "");
    joined
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '&')
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub mod dates;
pub mod document;
mod names;

pub use self::names::{aliases, entities, is_calendar, is_version, strip_markers};

#[cfg(test)]
mod tests;
