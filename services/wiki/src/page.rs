//! Wiki pages: Markdown with a small YAML front matter, and `[[wikilinks]]`.
//!
//! ```text
//! ---
//! title: Q3 board memo
//! type: source
//! updated: 2026-11-23
//! aliases: []
//! summary: The board approved the Berlin office.
//! ---
//! body with [[entities/acme-corp]] links
//! ```
//!
//! The front matter is written and read by this module only, one `key: value` per line with
//! JSON-quoted strings and JSON arrays, so it is valid YAML and round-trips exactly.

use std::collections::BTreeMap;

use serde_json::Value;

/// Page kinds, by folder.
pub const KINDS: [&str; 5] = ["sources", "entities", "concepts", "syntheses", "outputs"];

/// One wiki page.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// Path under `wiki/{tenant}/wiki/`, e.g. `entities/acme-corp.md`.
    pub path: String,
    /// Front matter, in key order.
    pub meta: BTreeMap<String, Value>,
    /// Markdown body.
    pub body: String,
}

impl Page {
    /// A new page.
    pub fn new(path: impl Into<String>, title: &str, kind: &str, updated: &str) -> Page {
        let mut meta = BTreeMap::new();
        meta.insert("title".to_owned(), Value::String(title.to_owned()));
        meta.insert("type".to_owned(), Value::String(kind.to_owned()));
        meta.insert("updated".to_owned(), Value::String(updated.to_owned()));
        Page {
            path: path.into(),
            meta,
            body: String::new(),
        }
    }

    /// A front-matter string value.
    pub fn get(&self, key: &str) -> &str {
        self.meta
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// A front-matter list of strings.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.meta
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The title from the page's front matter.
    pub fn title(&self) -> &str {
        self.get("title")
    }

    /// The link target of this page: its path without `.md`.
    pub fn link(&self) -> String {
        self.path.trim_end_matches(".md").to_owned()
    }

    /// Renders front matter and body.
    pub fn render(&self) -> String {
        let mut out = String::from("---\n");
        for (key, value) in &self.meta {
            out.push_str(key);
            out.push_str(": ");
            out.push_str(&serde_json::to_string(value).unwrap_or_default());
            out.push('\n');
        }
        out.push_str("---\n");
        out.push_str(&self.body);
        if !self.body.ends_with('\n') {
            out.push('\n');
        }
        out
    }

    /// Parses a rendered page; `None` when the front matter is missing or malformed.
    pub fn parse(path: &str, text: &str) -> Option<Page> {
        let rest = text.strip_prefix("---\n")?;
        let (head, body) = rest.split_once("\n---\n")?;
        let mut meta = BTreeMap::new();
        for line in head.lines() {
            let (key, value) = line.split_once(": ")?;
            meta.insert(key.to_owned(), serde_json::from_str(value).ok()?);
        }
        Some(Page {
            path: path.to_owned(),
            meta,
            body: body.to_owned(),
        })
    }
}

/// Every `[[target]]` or `[[target|label]]` in a text (targets without `#anchor`).
pub fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("]]") else { break };
        let inner = &after[..end];
        let target = inner.split('|').next().unwrap_or_default();
        let target = target.split('#').next().unwrap_or_default().trim();
        if !target.is_empty() {
            out.push(target.to_owned());
        }
        rest = &after[end + 2..];
    }
    out
}

/// Pages of a tenant by path (relative to `wiki/{tenant}/wiki/`).
pub type Pages = std::collections::BTreeMap<String, Page>;

/// The citable sentences of a page with their citation: `^sN` lines of sources, dated
/// mention lines elsewhere.
pub fn cited_sentences(page: &Page) -> Vec<(String, String)> {
    let link = page.link();
    let mut out = Vec::new();
    for line in page.body.lines() {
        if let Some((sentence, anchor)) = line.rsplit_once(" ^s")
            && anchor.chars().all(|c| c.is_ascii_digit())
            && !anchor.is_empty()
        {
            out.push((sentence.to_owned(), format!("[[{link}#^s{anchor}]]")));
        } else if let Some(rest) = line.strip_prefix("- [")
            && let Some((_, rest)) = rest.split_once("] [[")
            && let Some((target, sentence)) = rest.split_once("]]: ")
        {
            out.push((sentence.to_owned(), format!("[[{target}]]")));
        }
    }
    out
}

/// A date code as people write it: `2024`, `2024-07`.
pub fn show_date(date: u32) -> String {
    match (date / 10_000, (date / 100) % 100) {
        (0, _) => String::new(),
        (year, 0) => year.to_string(),
        (year, month) => format!("{year}-{month:02}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip() {
        let mut page = Page::new(
            "entities/acme-corp.md",
            "Acme \"Corp\"",
            "entity",
            "2026-11-23",
        );
        page.meta
            .insert("aliases".into(), serde_json::json!(["Acme", "ACME"]));
        page.body = "Mentioned in [[sources/q3-memo#s2|the memo]].\n".into();
        let text = page.render();
        assert_eq!(Page::parse(&page.path, &text), Some(page.clone()));
        assert_eq!(links(&page.body), vec!["sources/q3-memo"]);
    }

    #[test]
    fn malformed_front_matter_is_none() {
        assert!(Page::parse("x.md", "no front matter").is_none());
        assert!(Page::parse("x.md", "---\ntitle: unquoted\n---\nbody").is_none());
    }
}

/// A title or summary as it may appear inside a `[[link|label]]` or a one-line Markdown list
/// item: one line, no link or table syntax, at most 200 characters.
pub fn label(text: &str) -> String {
    let mut out: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| match c {
            '[' => '(',
            ']' => ')',
            '|' => '/',
            c if c.is_control() => ' ',
            c => c,
        })
        .take(200)
        .collect();
    // A leading `#`, `>` or list marker would start another block.
    while out.starts_with(['#', '>', '-', '*', '+']) {
        out.remove(0);
    }
    out.trim().to_owned()
}

#[cfg(test)]
mod label_tests {
    use super::label;

    #[test]
    fn labels_cannot_break_out_of_a_link_or_a_line() {
        assert_eq!(
            label("Q3 ]] [[x|y]]\n# Heading | a"),
            "Q3 )) ((x/y)) # Heading / a"
        );
        assert_eq!(label("# title"), "title");
        assert_eq!(label(&"é".repeat(300)).chars().count(), 200);
    }
}
