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
    } else if text.chars().count() <= 280 && lines.len() <= 3 && sentences(text).len() <= 3 {
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

/// Month and day names, which are capitalised but not entities on their own.
const CALENDAR: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Q1",
    "Q2",
    "Q3",
    "Q4",
];

/// Named entities: runs of capitalised words (with `&`, `of`, `de`, `van` inside), not at
/// the start of a sentence unless they recur elsewhere; at least two characters.
pub fn entities(sentences: &[String]) -> Vec<String> {
    let mut seen: BTreeMap<String, (usize, bool)> = BTreeMap::new();
    // Words the text also writes in lower case: a sentence-initial "Desalination" is one.
    let lower_case: BTreeSet<&str> = sentences
        .iter()
        .flat_map(|s| s.split_whitespace().skip(1))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.chars().next().is_some_and(char::is_lowercase))
        .collect();
    for sentence in sentences {
        let tokens: Vec<&str> = sentence.split_whitespace().collect();
        let mut i = 0;
        while i < tokens.len() {
            let clean = |t: &str| {
                let t = t.trim_matches(|c: char| !c.is_alphanumeric() && c != '&' && c != '.');
                // A sentence's full stop is not part of a name (but `U.S.` keeps its dots).
                let t = if t.matches('.').count() == 1 {
                    t.trim_end_matches('.')
                } else {
                    t
                };
                let t = t.trim_start_matches('.');
                // Possessives name the owner: "Portugal's capital".
                t.strip_suffix("'s")
                    .or_else(|| t.strip_suffix("’s"))
                    .unwrap_or(t)
                    .to_owned()
            };
            let first = clean(tokens[i]);
            if matches!(first.as_str(), "Dr" | "Mr" | "Mrs" | "Ms" | "Prof" | "Sir") {
                i += 1;
                continue;
            }
            // A capitalised function word opens no name ("The Lisbon office" names Lisbon).
            if is_capitalised(&first) && is_stopword(&first.to_lowercase()) {
                i += 1;
                continue;
            }
            if is_acronym(&first) {
                let entry = seen.entry(first.clone()).or_insert((0, false));
                entry.0 += 1;
                entry.1 |= i > 0;
                i += 1;
                continue;
            }
            if is_capitalised(&first) {
                let start = i;
                let mut parts = vec![first];
                let mut j = i + 1;
                while j < tokens.len() {
                    let previous_ends =
                        tokens[j - 1].ends_with([',', '.', ';', ':', ')', '!', '?']);
                    if previous_ends {
                        break;
                    }
                    let next = clean(tokens[j]);
                    // "Trinidad and Tobago" on a line of its own is one name.
                    let joiner = matches!(next.as_str(), "&" | "of" | "de" | "van" | "von")
                        || (next == "and" && start == 0 && tokens.len() <= 5);
                    if is_capitalised(&next)
                        || (joiner && j + 1 < tokens.len() && is_capitalised(&clean(tokens[j + 1])))
                    {
                        parts.push(next);
                        j += 1;
                    } else {
                        break;
                    }
                }
                let name = parts.join(" ");
                let single_common = parts.len() == 1
                    && (is_stopword(&name.to_lowercase()) || CALENDAR.contains(&name.as_str()));
                // "Population: …", "Host: …": a field or speaker label, not a name.
                let label = start == 0 && tokens[j - 1].ends_with(':');
                // A line that is only a name ("Jamaica" over a profile) is that name.
                let title_line = start == 0 && j == tokens.len() && tokens.len() <= 4;
                if !single_common && !label && name.chars().count() >= 2 {
                    let entry = seen.entry(name).or_insert((0, false));
                    entry.0 += 1;
                    // After a label ("Host: Welcome back") a sentence starts again.
                    let opening = start == 0 || tokens[start - 1].ends_with(':');
                    entry.1 |= !opening || title_line;
                }
                i = j;
            } else {
                i += 1;
            }
        }
    }
    seen.into_iter()
        .filter(|(name, (count, mid_sentence))| {
            *mid_sentence
                || name.contains(' ')
                || (*count >= 2 && !lower_case.contains(name.to_lowercase().as_str()))
        })
        .map(|(name, _)| name)
        .collect()
}

/// Whether a word is a month or day name (capitalised, but not a name of its own).
pub fn is_calendar(word: &str) -> bool {
    CALENDAR.contains(&word)
}

/// Acronyms that are attributes or units, not names.
const ACRONYM_STOP: &[&str] = &[
    "GDP", "GNP", "GNI", "PPP", "CEO", "CFO", "CTO", "COO", "USD", "EUR", "GBP", "JPY", "CNY",
    "UTC", "GMT", "API", "PDF", "FAQ", "AI", "HR", "IT", "PR", "VAT", "KPI", "ROI", "OK", "TV",
    "EST", "BC", "AD", "AM", "PM", "ID", "NA", "II", "III", "IV",
];

/// An acronym used as a name: 2–6 capital letters, dots allowed (`U.S.`, `NATO`).
fn is_acronym(word: &str) -> bool {
    let letters: String = word.chars().filter(|c| c.is_alphabetic()).collect();
    (2..=6).contains(&letters.chars().count())
        && letters.chars().all(char::is_uppercase)
        && word.chars().all(|c| c.is_alphabetic() || c == '.')
        && !ACRONYM_STOP.contains(&letters.as_str())
}

fn is_capitalised(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase)
        && word.chars().any(char::is_lowercase)
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || c == '&' || c == '-' || c == '\'')
}

/// The initials of a name's capitalised words (`United States` → `us`), for acronyms.
fn initials(name: &str) -> String {
    name.split_whitespace()
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase))
        .filter_map(|w| w.chars().next())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Names that stand for another name of the list — acronyms (`U.S.`, `US` for
/// `United States`) — as (alias, canonical) pairs; the canonical is the longest form.
pub fn aliases(names: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for alias in names {
        let compact = crate::claims::key(alias).replace(' ', "");
        let is_acronym = alias
            .chars()
            .filter(|c| c.is_alphabetic())
            .all(char::is_uppercase)
            && (2..=6).contains(&compact.len());
        if !is_acronym {
            continue;
        }
        if let Some(canonical) = names
            .iter()
            .filter(|n| *n != alias && n.split_whitespace().count() >= 2)
            .find(|n| initials(n) == compact)
        {
            out.push((alias.clone(), canonical.clone()));
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

#[cfg(test)]
mod tests {
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
        assert_eq!(classify("Short thought about launches."), "tweet");
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
}
