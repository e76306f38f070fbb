//! Helpers the evaluations share.
#![allow(clippy::unwrap_used, reason = "test code")]

use serde_json::Value;

/// The pages an answer cites, in order of first citation.
pub(crate) fn cited_pages(answer: &Value) -> Vec<String> {
    let mut pages = Vec::new();
    for cite in answer["citations"].as_array().unwrap() {
        let page = cite
            .as_str()
            .unwrap()
            .trim_start_matches("[[")
            .split('#')
            .next()
            .unwrap()
            .trim_end_matches("]]")
            .to_owned();
        if !pages.contains(&page) {
            pages.push(page);
        }
    }
    pages
}
