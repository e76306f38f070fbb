//! The words the deterministic engine reads with — attribute synonyms, question shapes, units,
//! words that are never attributes or names — as data (`crates/wiki/vocabulary/default.json`),
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

/// The vocabulary.
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
}
