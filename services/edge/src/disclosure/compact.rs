//! `tool_schema` answers as compact text for the model: a signature per tool instead of JSON
//! Schema, one line per top-level argument. The JSON Schema itself stays in
//! `structuredContent`, for programs and for the edge's validation; nothing is dropped that a
//! caller needs to form a valid call: types, required and optional arguments, constants,
//! enumerations, defaults, bounds (of a string or an array: its length), formats, patterns,
//! closed objects and every description. Vendor keywords (`x-…`) are left out.
//! Keywords this renderer does not know are shown as JSON.
//!
//! ```text
//! client_wiki, action ingest: Add a source to the wiki
//!   action: "ingest"
//!   source: {type: "url", url: string<uri>} | {type: "text", text: string(1..500000), …}
//!   as_of?: string<date>
//!   cost_cap_usd?: number(0.01..2) = 0.15
//! ```

use serde_json::{Map, Value};

/// Keywords the renderer expresses; any other is shown as JSON after the type.
const KNOWN: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "description",
    "title",
    "default",
    "const",
    "enum",
    "oneOf",
    "anyOf",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "format",
    "pattern",
    "$schema",
    "examples",
];

fn literal(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn range(min: Option<&Value>, max: Option<&Value>, unit: &str) -> String {
    match (min, max) {
        (None, None) => String::new(),
        (Some(min), None) => format!("(≥{min}{unit})"),
        (None, Some(max)) => format!("(≤{max}{unit})"),
        (Some(min), Some(max)) => format!("({min}..{max}{unit})"),
    }
}

/// One schema as a type expression; `depth` bounds nesting (deeper parts are shown as JSON).
fn render(schema: &Value, depth: usize) -> String {
    let Some(object) = schema.as_object() else {
        // `true` (anything) or `false` (nothing).
        return if schema == &Value::Bool(false) {
            "never".to_owned()
        } else {
            "any".to_owned()
        };
    };
    if depth > 6 {
        return literal(schema);
    }
    let mut out = if let Some(value) = object.get("const") {
        literal(value)
    } else if let Some(values) = object.get("enum").and_then(Value::as_array) {
        values.iter().map(literal).collect::<Vec<_>>().join("|")
    } else if let Some(branches) = object
        .get("oneOf")
        .or_else(|| object.get("anyOf"))
        .and_then(Value::as_array)
    {
        branches
            .iter()
            .map(|b| render(b, depth + 1))
            .collect::<Vec<_>>()
            .join(" | ")
    } else {
        base_type(object, depth)
    };
    let extra: Map<String, Value> = object
        .iter()
        .filter(|(k, _)| !KNOWN.contains(&k.as_str()) && !k.starts_with("x-"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !extra.is_empty() {
        out.push(' ');
        out.push_str(&literal(&Value::Object(extra)));
    }
    out
}

fn base_type(object: &Map<String, Value>, depth: usize) -> String {
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if object.contains_key("properties") => vec!["object"],
        _ => vec![],
    };
    if types.is_empty() {
        return "any".to_owned();
    }
    types
        .iter()
        .map(|t| match *t {
            "object" => object_type(object, depth),
            "array" => {
                let items = object
                    .get("items")
                    .map_or_else(|| "any".to_owned(), |i| render(i, depth + 1));
                let items = if items.contains(' ') {
                    format!("({items})")
                } else {
                    items
                };
                // Bounds inside the brackets: `string[≤10]`, `integer[1..5]`.
                let bounds = range(object.get("minItems"), object.get("maxItems"), "");
                let bounds = bounds.trim_start_matches('(').trim_end_matches(')');
                format!("{items}[{bounds}]")
            }
            "string" => {
                let mut s = "string".to_owned();
                if let Some(format) = object.get("format").and_then(Value::as_str) {
                    s.push_str(&format!("<{format}>"));
                }
                s.push_str(&range(object.get("minLength"), object.get("maxLength"), ""));
                if let Some(pattern) = object.get("pattern").and_then(Value::as_str) {
                    s.push_str(&format!(" /{pattern}/"));
                }
                s
            }
            "number" | "integer" => format!(
                "{t}{}",
                range(object.get("minimum"), object.get("maximum"), "")
            ),
            other => other.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("|")
}

fn object_type(object: &Map<String, Value>, depth: usize) -> String {
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return "object".to_owned();
    };
    let required = required(object);
    let mut parts: Vec<String> = properties
        .iter()
        .map(|(name, schema)| {
            let mut part = property(name, schema, &required, depth + 1);
            if let Some(description) = schema.get("description").and_then(Value::as_str) {
                part.push_str(&format!(" ({})", one_line(description)));
            }
            part
        })
        .collect();
    if object.get("additionalProperties") != Some(&Value::Bool(false)) {
        parts.push("…".to_owned());
    }
    format!("{{{}}}", parts.join(", "))
}

fn required(object: &Map<String, Value>) -> Vec<&str> {
    object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `name: type`, or `name?: type = default` for an optional one.
fn property(name: &str, schema: &Value, required: &[&str], depth: usize) -> String {
    let optional = if required.contains(&name) { "" } else { "?" };
    let mut out = format!("{name}{optional}: {}", render(schema, depth));
    if let Some(default) = schema.get("default") {
        out.push_str(&format!(" = {}", literal(default)));
    }
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A tool's input schema as lines: one per top-level argument, each with its description.
fn input_lines(schema: &Value, out: &mut String) {
    let Some(object) = schema.as_object() else {
        out.push_str(&format!("  input: {}\n", render(schema, 0)));
        return;
    };
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        out.push_str(&format!("  input: {}\n", render(schema, 0)));
        return;
    };
    let required = required(object);
    let branches: Vec<&Value> = ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| object.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    for (name, property_schema) in properties {
        // A discriminator every branch states again (`action` of a polymorphic tool) is
        // shown in the branches only.
        if !branches.is_empty() && branches.iter().all(|b| b["properties"].get(name).is_some()) {
            continue;
        }
        out.push_str("  ");
        out.push_str(&property(name, property_schema, &required, 1));
        if let Some(description) = property_schema.get("description").and_then(Value::as_str) {
            out.push_str(&format!(" — {}", one_line(description)));
        }
        out.push('\n');
    }
    if branches.is_empty() && object.get("additionalProperties") != Some(&Value::Bool(false)) {
        out.push_str("  (other arguments allowed)\n");
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = object.get(key).and_then(Value::as_array) {
            out.push_str("  one of:\n");
            for branch in branches {
                let description = branch
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|d| format!(" — {}", one_line(d)))
                    .unwrap_or_default();
                out.push_str(&format!("  - {}{description}\n", render(branch, 1)));
            }
        }
    }
}

/// Whether every branch of a schema's `oneOf` (a polymorphic tool's actions) has its own
/// description: the tool's description then need not say what each action does again.
fn branches_say_what_they_do(schema: &Value) -> bool {
    schema
        .get("oneOf")
        .and_then(Value::as_array)
        .is_some_and(|branches| {
            branches.len() > 1
                && branches
                    .iter()
                    .all(|b| b.get("description").and_then(Value::as_str).is_some())
        })
}

/// A description's first sentence (up to the first `. `), or all of it.
fn first_sentence(description: &str) -> &str {
    let description = description.trim();
    description
        .find(". ")
        .map_or(description, |end| &description[..=end])
}

/// The text of a `tool_schema` answer (`{"tools": [entries]}`).
pub fn schema_text(answer: &Value) -> String {
    let mut out = String::new();
    for entry in answer["tools"].as_array().into_iter().flatten() {
        let name = entry["name"].as_str().unwrap_or_default();
        match entry["action"].as_str() {
            Some(action) => out.push_str(&format!("{name}, action {action}")),
            None => out.push_str(name),
        }
        if let Some(title) = entry["title"].as_str() {
            out.push_str(&format!(" ({title})"));
        }
        if let Some(description) = entry["description"].as_str() {
            let description = if branches_say_what_they_do(&entry["inputSchema"]) {
                first_sentence(description)
            } else {
                description.trim()
            };
            out.push_str(&format!(": {description}"));
        }
        out.push('\n');
        input_lines(&entry["inputSchema"], &mut out);
        if let Some(output) = entry.get("outputSchema") {
            out.push_str(&format!("  returns: {}\n", render(output, 1)));
        }
        if let Some(annotations) = entry.get("annotations").and_then(Value::as_object) {
            let hints: Vec<String> = annotations
                .iter()
                .filter(|(k, _)| k.as_str() != "title")
                .map(|(k, v)| format!("{}={v}", k.trim_end_matches("Hint")))
                .collect();
            if !hints.is_empty() {
                out.push_str(&format!("  hints: {}\n", hints.join(", ")));
            }
        }
        for example in entry["examples"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  example: {}\n",
                example.as_str().unwrap_or_default()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_polymorphic_tool_says_what_each_action_does_once() {
        let branch = |action: &str, what: &str| {
            json!({"type": "object", "description": what,
                   "properties": {"action": {"const": action}}, "required": ["action"]})
        };
        let entry = |branches: Vec<Value>| {
            json!({"tools": [{"name": "wiki",
                "description": "A wiki. `ingest` adds a source; `query` answers.",
                "inputSchema": {"type": "object", "properties": {}, "oneOf": branches}}]})
        };
        let text = schema_text(&entry(vec![
            branch("ingest", "Add a source"),
            branch("query", "Answer a question"),
        ]));
        assert!(text.starts_with("wiki: A wiki.\n"), "{text}");
        assert!(
            text.contains("Add a source") && text.contains("Answer a question"),
            "{text}"
        );
        // A branch without a description: the whole description stays.
        let mut bare = branch("query", "");
        bare.as_object_mut().unwrap().remove("description");
        let text = schema_text(&entry(vec![branch("ingest", "Add a source"), bare]));
        assert!(text.contains("`query` answers."), "{text}");
    }

    #[test]
    fn a_schema_becomes_a_signature_that_keeps_every_constraint() {
        let answer = json!({"tools": [{
            "name": "client_wiki", "action": "ingest", "description": "Add a source",
            "inputSchema": {"type": "object", "additionalProperties": false,
                "required": ["action", "source"],
                "properties": {
                    "action": {"const": "ingest"},
                    "source": {"oneOf": [
                        {"type": "object", "additionalProperties": false, "required": ["type", "url"],
                         "properties": {"type": {"const": "url"}, "url": {"type": "string", "format": "uri"}}},
                        {"type": "object", "required": ["text"],
                         "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 500, "description": "The text"}}}
                    ]},
                    "cost": {"type": "number", "minimum": 0.01, "maximum": 2, "default": 0.15},
                    "kind": {"enum": ["a", "b"], "default": "a"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
                    "code": {"type": "string", "pattern": "^[A-Z]{3}$", "multipleOf": 2}
                }}
        }]});
        let text = schema_text(&answer);
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.remove(0), "client_wiki, action ingest: Add a source");
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "  action: \"ingest\"",
                "  code?: string /^[A-Z]{3}$/ {\"multipleOf\":2}",
                "  cost?: number(0.01..2) = 0.15",
                "  kind?: \"a\"|\"b\" = \"a\"",
                "  source: {type: \"url\", url: string<uri>} | {text: string(1..500) (The text), …}",
                "  tags?: string[≤10]",
            ],
            "{text}"
        );
    }
}
