//! The words the deterministic engine reads with — attribute synonyms, question shapes, units,
//! words that are never attributes or names — as data (`services/wiki/vocabulary/default.json`),
//! not code: nothing in `src/` knows what a population or a melting point is.

use std::sync::LazyLock;

use serde::Deserialize;

/// A question shape: words that must appear in order, and the attribute they ask for.
#[derive(Debug, Clone, Deserialize)]
pub struct Shape {
    /// The words, lower case, in order.
    pub words: Vec<String>,
    /// The attribute asked for.
    pub attribute: String,
}

/// How claims are read: attribute synonyms, question shapes, units and the words that are not
/// attributes, so that two phrasings of one fact compare equal.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Vocabulary {
    /// Attribute phrases to their normal form (`inhabitants` → `population`).
    #[serde(default)]
    pub attribute_synonyms: Vec<(String, String)>,
    /// Question shapes ("how many people" asks for the population).
    #[serde(default)]
    pub question_shapes: Vec<Shape>,
    /// Words that never begin an attribute phrase (the sentence's grammar, "city", "company").
    #[serde(default)]
    pub not_attribute: Vec<String>,
    /// Attributes whose values are years, compared exactly.
    #[serde(default)]
    pub year_attributes: Vec<String>,
    /// Verbs whose year is an event's, not the vintage of a figure ("founded in 1999").
    #[serde(default)]
    pub event_verbs: Vec<String>,
    /// Units written after a number, to their normal form.
    #[serde(default)]
    pub units: Vec<(String, String)>,
    /// Acronyms that are attributes or units, never names (`GDP`, `CEO`).
    #[serde(default)]
    pub acronyms_not_names: Vec<String>,
    /// Words too common for a recurring phrase to be a concept.
    #[serde(default)]
    pub common_words: Vec<String>,
    /// Groups of phrases that mean the same thing when a question is compared with a sentence
    /// ("security issue", "vulnerability", "CVE"), lower case.
    #[serde(default)]
    pub term_synonyms: Vec<Vec<String>>,
    /// Title phrases that name an event the document's dateline dates, with the attribute
    /// that date becomes for its subject (`release notes` → `released`).
    #[serde(default)]
    pub title_events: Vec<(String, String)>,
    /// Verb phrases after a name that state one of its attributes with the figure that
    /// follows (`covers an area of` → `area`, `employs` → `employees`), longest first.
    #[serde(default)]
    pub verb_attributes: Vec<(String, String)>,
    /// Front matter keys, besides `subject`, `about` and `entity`, that name what a document
    /// is about (`client`, `company`).
    #[serde(default)]
    pub subject_fields: Vec<String>,
}

const DEFAULT: &str = include_str!("../vocabulary/default.json");

static VOCABULARY: LazyLock<Vocabulary> = LazyLock::new(|| {
    serde_json::from_str(DEFAULT).unwrap_or_else(|error| {
        tracing::error!(%error, "the wiki's default vocabulary does not parse; reading without it");
        Vocabulary::default()
    })
});

/// The vocabulary in force.
pub fn vocabulary() -> &'static Vocabulary {
    &VOCABULARY
}

impl Vocabulary {
    /// Whether `word` is in `list`.
    pub fn has(list: &[String], word: &str) -> bool {
        list.iter().any(|w| w == word)
    }

    /// `text` followed by the other phrases of each synonym group one of whose phrases it
    /// contains (as whole words, in any case): what a question and a sentence are compared by,
    /// so that a question about a "security issue" meets a heading that names a CVE.
    pub fn with_term_synonyms<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        expand(text, self.term_synonyms.iter().map(Vec::as_slice))
    }
}

/// `text` followed by the other phrases of each group one of whose phrases it contains (as
/// whole words, in any case); groups are lower case.
pub(crate) fn expand<'t, 'g>(
    text: &'t str,
    groups: impl Iterator<Item = &'g [String]>,
) -> std::borrow::Cow<'t, str> {
    let words: String = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ");
    let padded = format!(" {words} ");
    let mut added = String::new();
    for group in groups {
        if group.iter().any(|p| padded.contains(&format!(" {p} "))) {
            for phrase in group.iter().filter(|p| !padded.contains(&format!(" {p} "))) {
                added.push(' ');
                added.push_str(phrase);
            }
        }
    }
    if added.is_empty() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("{text}{added}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_vocabulary_parses_and_is_not_empty() {
        let parsed: super::Vocabulary = serde_json::from_str(super::DEFAULT).unwrap();
        assert!(!parsed.attribute_synonyms.is_empty());
        assert!(!parsed.question_shapes.is_empty());
        assert!(!parsed.units.is_empty());
        assert!(!parsed.not_attribute.is_empty());
        assert!(!parsed.acronyms_not_names.is_empty());
    }

    /// Issue 32: "no domain vocabulary in services/wiki/src". No string literal of the crate's
    /// code (tests aside) holds a word the vocabulary gives a meaning to — an attribute's normal
    /// form, a unit, an event — so those words can only come from the data.
    #[test]
    fn the_code_names_no_word_the_vocabulary_defines() {
        let vocabulary: super::Vocabulary = serde_json::from_str(super::DEFAULT).unwrap();
        let mut words: Vec<String> = vocabulary
            .attribute_synonyms
            .iter()
            .map(|(_, normal)| normal.clone())
            .chain(vocabulary.verb_attributes.iter().map(|(_, a)| a.clone()))
            .chain(vocabulary.title_events.iter().map(|(_, e)| e.clone()))
            .chain(
                vocabulary
                    .question_shapes
                    .iter()
                    .map(|s| s.attribute.clone()),
            )
            .chain(vocabulary.year_attributes.iter().cloned())
            .chain(vocabulary.subject_fields.iter().cloned())
            .filter(|w| w.chars().count() > 2)
            .collect();
        words.sort();
        words.dedup();
        assert!(words.len() > 10, "{words:?}");
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src];
        let mut found = Vec::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.file_name().is_some_and(|n| n == "tests.rs")
                || path.extension().is_none_or(|e| e != "rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (n, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("//") {
                    continue;
                }
                let line = line.split(" // ").next().unwrap_or_default();
                for literal in line.split('"').skip(1).step_by(2) {
                    let literal = literal.to_lowercase();
                    let tokens: Vec<&str> = literal
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .filter(|t| !t.is_empty())
                        .collect();
                    for word in &words {
                        let parts: Vec<&str> = word.split_whitespace().collect();
                        if tokens.windows(parts.len()).any(|w| w == parts.as_slice()) {
                            found.push(format!(
                                "{}:{}: {word:?} in \"{literal}\"",
                                path.display(),
                                n + 1
                            ));
                        }
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "domain words in code:\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn a_phrase_brings_its_synonyms_and_a_word_inside_another_does_not() {
        let vocabulary = super::Vocabulary {
            term_synonyms: vec![vec!["security issue".into(), "cve".into()]],
            ..Default::default()
        };
        assert_eq!(
            vocabulary.with_term_synonyms("Which security issue does 3.2.1 fix?"),
            "Which security issue does 3.2.1 fix? cve"
        );
        assert_eq!(
            vocabulary.with_term_synonyms("CVE-2021-31542: directory traversal"),
            "CVE-2021-31542: directory traversal security issue"
        );
        // Whole words only: "security issues" is not "security issue", "cves" not "cve".
        assert_eq!(
            vocabulary.with_term_synonyms("Two security issues, cves"),
            "Two security issues, cves"
        );
    }
}
