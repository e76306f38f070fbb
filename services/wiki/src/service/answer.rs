//! What the wiki answers a call with: the structured result and the text beside it, one
//! line per finding or a short answer.

use super::*;

pub(super) fn result(structured: Value, text: String) -> pb::InvokeEvent {
    pb::InvokeEvent {
        event: Some(pb::invoke_event::Event::Result(pb::Result {
            content: vec![pb::ContentBlock {
                block: Some(pb::content_block::Block::Text(text)),
            }],
            structured: tp_proto::json::to_struct(&structured),
            is_error: false,
            cost_usd: 0.0,
        })),
    }
}

pub(super) fn summary_text(value: &Value) -> String {
    if let Some(answer) = value.get("answer").and_then(Value::as_str) {
        return answer.to_owned();
    }
    if let Some(pages) = value.get("pages").and_then(Value::as_array)
        && value.get("source").is_some()
    {
        let changed: Vec<String> = pages
            .iter()
            .filter(|p| p["change"] != "unchanged")
            .map(|p| {
                format!(
                    "{} ({})",
                    p["path"].as_str().unwrap_or_default(),
                    p["change"].as_str().unwrap_or_default()
                )
            })
            .collect();
        return if changed.is_empty() {
            format!(
                "Already ingested: {} (no page changed).",
                value["source"].as_str().unwrap_or_default()
            )
        } else {
            format!(
                "Ingested {} as {}. Pages: {}.",
                value["source"].as_str().unwrap_or_default(),
                value["doc_type"].as_str().unwrap_or_default(),
                changed.join(", ")
            )
        };
    }
    if let Some(findings) = value.get("findings").and_then(Value::as_array) {
        let mut text = format!(
            "{} finding(s) in {} page(s).",
            findings.len(),
            value["pages_checked"]
        );
        for f in findings.iter().take(20) {
            text.push_str(&format!(
                "\n- [{}] {} {}: {}",
                f["severity"].as_str().unwrap_or_default(),
                f["rule"].as_str().unwrap_or_default(),
                f["page"].as_str().unwrap_or_default(),
                f["evidence"].as_str().unwrap_or_default()
            ));
        }
        return text;
    }
    if let Some(table) = value.get("synonyms").and_then(Value::as_object) {
        let mut text = format!(
            "The synonym table holds {} phrase(s); {} changed by this call.",
            table.len(),
            value["changed"]
        );
        for (phrase, meaning) in table {
            text.push_str(&format!(
                "\n- {phrase} = {}",
                meaning.as_str().unwrap_or_default()
            ));
        }
        return text;
    }
    value.to_string()
}
