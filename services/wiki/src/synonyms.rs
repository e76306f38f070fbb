//! A tenant's own synonym table: phrases its documents use and the word each means there
//! ("head count" → "staff", "ARR" → "annual recurring revenue"), on top of the default
//! vocabulary. Data the tenant edits (the `synonyms` action of `client_wiki`), stored beside
//! its pages as `wiki/{tenant}/synonyms.json`.
//!
//! Applied when the wiki is read, never when it is written: a query compares a question with
//! claims and sentences through the table, and lint groups claims by the attribute the table
//! makes of theirs. An edit therefore takes effect on the next call, for every page already
//! ingested, with no re-ingest and no index rebuild.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Most entries in one tenant's table.
pub const MAX_ENTRIES: usize = 200;
/// Most changes in one call.
pub const MAX_CHANGES: usize = 50;
/// Longest phrase or meaning, in characters.
pub const MAX_PHRASE: usize = 60;
/// Most words in a phrase or meaning.
const MAX_WORDS: usize = 6;

/// A tenant's table: phrase → meaning, both in their normal form (lower case, one space
/// between words).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synonyms {
    pairs: BTreeMap<String, String>,
    /// Each meaning with every phrase that means it, derived from `pairs` whenever they change
    /// (a query expands every candidate sentence with them).
    groups: Vec<Vec<String>>,
}

/// The normal form of a phrase: lower-case words of letters, digits and hyphens, one space
/// apart; `None` when it has no word, too many, or is too long.
pub fn normal(phrase: &str) -> Option<String> {
    if phrase.chars().count() > MAX_PHRASE {
        return None;
    }
    let words: Vec<String> = phrase
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .map(|w| w.trim_matches('-').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    (!words.is_empty() && words.len() <= MAX_WORDS).then(|| words.join(" "))
}

impl Synonyms {
    /// The table stored as `text` (a JSON object of phrase → meaning); entries that do not
    /// read are left out, so a hand-edited file cannot stop the wiki.
    pub fn parse(text: &str) -> Synonyms {
        let mut pairs = BTreeMap::new();
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
            for (phrase, meaning) in map {
                if let (Some(phrase), Some(meaning)) =
                    (normal(&phrase), meaning.as_str().and_then(normal))
                    && phrase != meaning
                {
                    pairs.insert(phrase, meaning);
                }
            }
        }
        Synonyms::from_pairs(pairs)
    }

    fn from_pairs(pairs: BTreeMap<String, String>) -> Synonyms {
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (phrase, meaning) in &pairs {
            groups
                .entry(meaning.as_str())
                .or_insert_with(|| vec![meaning.clone()])
                .push(phrase.clone());
        }
        let groups = groups.into_values().collect();
        Synonyms { pairs, groups }
    }

    /// The table as stored and as shown: a JSON object, phrases in order.
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.pairs
                .iter()
                .map(|(p, m)| (p.clone(), json!(m)))
                .collect::<Map<String, Value>>(),
        )
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Applies `changes` (phrase → meaning; an empty meaning removes the phrase), all or
    /// nothing: the first entry that is not valid is the error and the table is unchanged.
    /// Returns how many entries changed.
    pub fn apply(&mut self, changes: &Map<String, Value>) -> Result<usize, String> {
        if changes.is_empty() {
            return Err("set must name at least one phrase".into());
        }
        if changes.len() > MAX_CHANGES {
            return Err(format!(
                "set may change at most {MAX_CHANGES} phrases in one call (got {})",
                changes.len()
            ));
        }
        let mut next = self.pairs.clone();
        let mut changed = 0;
        for (phrase, meaning) in changes {
            let Some(key) = normal(phrase) else {
                return Err(format!(
                    "phrase {phrase:?} must be 1 to {MAX_WORDS} words of letters, digits and hyphens, at most {MAX_PHRASE} characters"
                ));
            };
            let Some(meaning) = meaning.as_str() else {
                return Err(format!(
                    "the meaning of {phrase:?} must be a string (\"\" removes the phrase)"
                ));
            };
            if meaning.trim().is_empty() {
                changed += usize::from(next.remove(&key).is_some());
                continue;
            }
            let Some(meaning) = normal(meaning) else {
                return Err(format!(
                    "meaning {meaning:?} of {phrase:?} must be 1 to {MAX_WORDS} words of letters, digits and hyphens, at most {MAX_PHRASE} characters"
                ));
            };
            if meaning == key {
                return Err(format!("{phrase:?} cannot mean itself"));
            }
            if next.insert(key, meaning.clone()).as_ref() != Some(&meaning) {
                changed += 1;
            }
        }
        // One step only: a meaning that is itself a phrase of the table would make what a
        // word means depend on the order entries are read in.
        if let Some((phrase, meaning)) = next.iter().find(|(_, m)| next.contains_key(*m)) {
            return Err(format!(
                "{phrase:?} means {meaning:?}, which is itself a phrase of the table (meaning {:?}): point {phrase:?} at {:?} instead",
                next[meaning], next[meaning]
            ));
        }
        if next.len() > MAX_ENTRIES {
            return Err(format!(
                "a tenant's synonym table holds at most {MAX_ENTRIES} phrases (this would make {})",
                next.len()
            ));
        }
        *self = Synonyms::from_pairs(next);
        Ok(changed)
    }

    /// What the table makes of an attribute (already in the engine's normal form): its
    /// meaning when the table lists it — itself read with the default vocabulary, so that
    /// "head count" → "staff" lands where the default puts "staff" —, else itself.
    pub fn attribute<'a>(&self, attribute: &'a str) -> Cow<'a, str> {
        match self.pairs.get(attribute) {
            Some(meaning) => {
                Cow::Owned(crate::claims::attribute(meaning).unwrap_or_else(|| meaning.clone()))
            }
            None => Cow::Borrowed(attribute),
        }
    }

    /// Whether `phrase` is a phrase or a meaning of the table (such words are not names).
    pub fn knows(&self, phrase: &str) -> bool {
        normal(phrase)
            .is_some_and(|p| self.pairs.contains_key(&p) || self.pairs.values().any(|m| *m == p))
    }

    /// `text` followed by the other phrases of each group of the table one of whose phrases
    /// it contains (a meaning and every phrase that means it are one group): what a question
    /// and a sentence are compared by.
    pub fn expand<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.groups.is_empty() {
            return Cow::Borrowed(text);
        }
        crate::vocabulary::expand(text, self.groups.iter().map(Vec::as_slice))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use super::*;

    fn changes(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn entries_are_normalised_applied_whole_and_removed_by_an_empty_meaning() {
        let mut table = Synonyms::default();
        assert_eq!(
            table
                .apply(&changes(
                    json!({"Head  count": "Staff", "ARR": "annual recurring revenue"})
                ))
                .unwrap(),
            2
        );
        assert_eq!(
            table.to_json(),
            json!({"arr": "annual recurring revenue", "head count": "staff"})
        );
        // The meaning is read with the default vocabulary, as claims' attributes are.
        assert_eq!(
            table.attribute("head count"),
            crate::claims::attribute("staff").unwrap()
        );
        assert_eq!(table.attribute("budget"), "budget");
        assert!(table.knows("ARR") && table.knows("Staff") && !table.knows("budget"));
        // The same entry again changes nothing.
        assert_eq!(
            table
                .apply(&changes(json!({"head count": "staff"})))
                .unwrap(),
            0
        );
        // One bad entry and nothing of the call is applied.
        let before = table.clone();
        for bad in [
            json!({"churn": "attrition", "": "x"}),
            json!({"churn": 3}),
            json!({"churn": "churn"}),
            json!({"one two three four five six seven": "x"}),
            json!({"churn": "x".repeat(61)}),
            // A chain: "people" means "head count", itself a phrase meaning "staff".
            json!({"people": "head count"}),
            json!({}),
        ] {
            assert!(table.apply(&changes(bad.clone())).is_err(), "{bad}");
            assert_eq!(table, before, "{bad}");
        }
        assert_eq!(table.apply(&changes(json!({"ARR": ""}))).unwrap(), 1);
        assert_eq!(table.to_json(), json!({"head count": "staff"}));
        // Stored and read back; an unreadable entry of a hand-edited file is left out.
        let stored = table.to_json().to_string();
        assert_eq!(Synonyms::parse(&stored), table);
        assert_eq!(
            Synonyms::parse(r#"{"head count": "staff", "x": 3, "same": "same"}"#),
            table
        );
        assert!(Synonyms::parse("not json").is_empty());
    }

    #[test]
    fn limits_are_enforced() {
        let mut table = Synonyms::default();
        let too_many: Map<String, Value> = (0..=MAX_CHANGES)
            .map(|i| (format!("phrase {i}"), json!("meaning")))
            .collect();
        assert!(table.apply(&too_many).unwrap_err().contains("at most 50"));
        for round in 0..4 {
            let batch: Map<String, Value> = (0..MAX_CHANGES)
                .map(|i| (format!("phrase {round} {i}"), json!("meaning")))
                .collect();
            table.apply(&batch).unwrap();
        }
        assert_eq!(table.len(), MAX_ENTRIES);
        let error = table
            .apply(&changes(json!({"one more": "meaning"})))
            .unwrap_err();
        assert!(error.contains("at most 200"), "{error}");
        assert_eq!(table.len(), MAX_ENTRIES);
    }

    #[test]
    fn a_phrase_and_its_meaning_bring_each_other() {
        let mut table = Synonyms::default();
        table
            .apply(&changes(json!({"head count": "staff", "FTEs": "staff"})))
            .unwrap();
        assert_eq!(
            table.expand("How many staff does Acme have?"),
            "How many staff does Acme have? ftes head count"
        );
        assert_eq!(
            table.expand("Head count: 120"),
            "Head count: 120 staff ftes"
        );
        assert_eq!(table.expand("Budget: 80k"), "Budget: 80k");
    }
}
