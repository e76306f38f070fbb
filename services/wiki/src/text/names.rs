//! Names in text: the entities sentences mention (capitalised runs, acronyms; calendar words
//! aside) and the aliases one name has in another (initials, a shorter form).

use super::*;

/// Month and day names, which are capitalised but not entities on their own.
pub(super) const CALENDAR: &[&str] = &[
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

/// Words that open a greeting or a sign-off.
const GREETINGS: &[&str] = &[
    "hi",
    "hello",
    "hey",
    "dear",
    "thanks",
    "best",
    "regards",
    "cheers",
    "greetings",
];

/// A line without its list or heading marker (`- `, `* `, `• `, `1. `, `## `).
pub fn strip_markers(line: &str) -> &str {
    let line = line.trim_start();
    let line = line.trim_start_matches('#').trim_start();
    if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("• "))
    {
        return rest.trim_start();
    }
    if let Some((number, rest)) = line.split_once(". ")
        && !number.is_empty()
        && number.len() <= 3
        && number.bytes().all(|b| b.is_ascii_digit())
    {
        return rest.trim_start();
    }
    line
}

/// A token as a word of a name: outer punctuation off (a sentence's full stop too, but `U.S.`
/// keeps its dots), a possessive's `'s` off ("Portugal's capital" names Portugal).
fn clean_token(t: &str) -> String {
    let t = t.trim_matches(|c: char| !c.is_alphanumeric() && c != '&' && c != '.');
    let t = if t.matches('.').count() == 1 {
        t.trim_end_matches('.')
    } else {
        t
    };
    let t = t.trim_start_matches('.');
    t.strip_suffix("'s")
        .or_else(|| t.strip_suffix("’s"))
        .unwrap_or(t)
        .to_owned()
}

/// The name that starts with `first` (token `start`): the capitalised words after it, joined
/// by `&`, `of`, `de`, `van`, `von` (and `and` on a short line of its own), up to punctuation,
/// an aside or a version; its words, and the index of the token after it.
fn name_run(tokens: &[&str], start: usize, first: String) -> (Vec<String>, usize) {
    let clean = clean_token;
    let mut parts = vec![first];
    let mut j = start + 1;
    while j < tokens.len() {
        let previous_ends = tokens[j - 1].ends_with([',', '.', ';', ':', ')', '!', '?']);
        // A parenthesis opens an aside: "Silicon (Si)" names Silicon.
        if previous_ends || tokens[j].starts_with(['(', '[']) {
            break;
        }
        // A version ends a product's name: "Django 4.2.3", "Python 3.12".
        let version = tokens[j].trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
        if is_version(version) {
            parts.push(version.to_owned());
            j += 1;
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
    (parts, j)
}

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
        // Table cells are labels and values, never names of their own; list and heading
        // markers are not words.
        // A section heading ("## Overview") names a part of the document, not a thing; the
        // title ("# Acme Corp") may.
        if sentence.starts_with('|') || sentence.starts_with("##") {
            continue;
        }
        let sentence = strip_markers(sentence);
        let mut tokens: Vec<&str> = sentence.split_whitespace().collect();
        // "Hi Tom," / "Dear Ms Smith": a greeting names its addressee, not "Hi Tom".
        if tokens
            .first()
            .is_some_and(|t| GREETINGS.contains(&t.trim_end_matches(',').to_lowercase().as_str()))
        {
            tokens.remove(0);
        }
        let mut i = 0;
        while i < tokens.len() {
            let first = clean_token(tokens[i]);
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
                let (parts, j) = name_run(&tokens, i, first);
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

/// A version number: digits with at least one dot between them (`4.2`, `3.2.19`).
pub fn is_version(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a word is a month or day name (capitalised, but not a name of its own).
pub fn is_calendar(word: &str) -> bool {
    CALENDAR.contains(&word)
}

/// An acronym used as a name: 2–6 capital letters, dots allowed (`U.S.`, `NATO`).
pub(super) fn is_acronym(word: &str) -> bool {
    let letters: String = word.chars().filter(|c| c.is_alphabetic()).collect();
    (2..=6).contains(&letters.chars().count())
        && letters.chars().all(char::is_uppercase)
        && word.chars().all(|c| c.is_alphabetic() || c == '.')
        && !crate::vocabulary::Vocabulary::has(
            &crate::vocabulary::vocabulary().acronyms_not_names,
            &letters,
        )
}

pub(super) fn is_capitalised(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase)
        && word.chars().any(char::is_lowercase)
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || c == '&' || c == '-' || c == '\'')
}

/// The initials of a name's capitalised words (`United States` → `us`), for acronyms.
pub(super) fn initials(name: &str) -> String {
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
        let compact = super::key(alias).replace(' ', "");
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
