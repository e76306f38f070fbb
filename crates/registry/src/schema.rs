//! What a tool's JSON Schemas may contain, beyond being valid JSON Schema:
//!
//! - only keywords JSON Schema defines (2020-12, plus draft-07's `definitions` and
//!   `dependencies`) or extensions named `x-…`: a misspelt keyword (`requried`, `maxLenght`)
//!   would otherwise be ignored by every validator and let anything through;
//! - only `pattern`s a linear-time regular-expression engine runs (no look-around, no
//!   back-references), compiled within a size limit — edges validate every call's arguments
//!   against these schemas, and a backtracking pattern would let one call freeze a thread.

use serde_json::Value;

/// Keywords whose value is a schema.
const SCHEMA_VALUED: &[&str] = &[
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];

/// Keywords whose value is an array of schemas.
const SCHEMA_ARRAY_VALUED: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_VALUED: &[&str] = &[
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
];

/// Keywords whose value is data, not a schema.
const VALUE_KEYWORDS: &[&str] = &[
    "$anchor",
    "$comment",
    "$dynamicAnchor",
    "$dynamicRef",
    "$id",
    "$ref",
    "$schema",
    "$vocabulary",
    "const",
    "contentEncoding",
    "contentMediaType",
    "default",
    "dependencies",
    "dependentRequired",
    "deprecated",
    "description",
    "enum",
    "examples",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "format",
    "maxContains",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minContains",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "pattern",
    "readOnly",
    "required",
    "title",
    "type",
    "uniqueItems",
    "writeOnly",
];

/// Largest compiled size of one pattern (bytes of the regex engine's program).
pub const MAX_PATTERN_SIZE: usize = 256 * 1024;

/// Refuses keywords JSON Schema does not define (extensions must be named `x-…`), naming the
/// first one with its JSON pointer.
pub fn check_keywords(schema: &Value) -> Result<(), String> {
    let mut problems = Vec::new();
    walk(schema, "", &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Every unknown keyword of `schema` (at `pointer`), into `problems`.
fn walk(schema: &Value, pointer: &str, problems: &mut Vec<String>) {
    let Value::Object(map) = schema else {
        // `true` / `false` are schemas too; anything else is the meta-schema's to refuse.
        return;
    };
    for (key, value) in map {
        let here = format!("{pointer}/{}", escape(key));
        if key.starts_with("x-") {
            continue;
        }
        if SCHEMA_VALUED.contains(&key.as_str()) {
            match value {
                // draft-07 `items` may be an array of schemas.
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        walk(item, &format!("{here}/{i}"), problems);
                    }
                }
                other => walk(other, &here, problems),
            }
        } else if SCHEMA_ARRAY_VALUED.contains(&key.as_str()) {
            if let Value::Array(items) = value {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{here}/{i}"), problems);
                }
            }
        } else if SCHEMA_MAP_VALUED.contains(&key.as_str()) {
            if let Value::Object(entries) = value {
                for (name, sub) in entries {
                    walk(sub, &format!("{here}/{}", escape(name)), problems);
                }
            }
        } else if !VALUE_KEYWORDS.contains(&key.as_str()) {
            problems.push(format!(
                "unknown keyword {key:?} at {here} (JSON Schema keywords only; name extensions x-…)"
            ));
        }
    }
}

/// Compiles the schema with the linear-time regular-expression engine the edges validate
/// with, so a pattern it cannot run (look-around, back-references) or that is too large is
/// refused when the tool is registered, not when it is called.
pub fn compile_linear(schema: &Value) -> Result<(), String> {
    linear_options()
        .build(schema)
        .map(|_| ())
        .map_err(|error| {
            format!(
                "does not compile with the linear-time pattern engine (look-around and back-references are not supported): {error}"
            )
        })
}

/// The validator options every Toolplane component validates arguments with: the `regex`
/// crate's linear-time engine for `pattern` and `patternProperties`, with a size limit.
pub fn linear_options() -> jsonschema::ValidationOptions<'static> {
    jsonschema::options().with_pattern_options(
        jsonschema::PatternOptions::regex()
            .size_limit(MAX_PATTERN_SIZE)
            .dfa_size_limit(MAX_PATTERN_SIZE),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn misspelt_keywords_are_named_with_their_path() {
        let error = check_keywords(&json!({
            "type": "object",
            "properties": {"q": {"type": "string", "maxLenght": 3}},
        }))
        .unwrap_err();
        assert!(
            error.contains("maxLenght") && error.contains("/properties/q/maxLenght"),
            "{error}"
        );
        let error = check_keywords(&json!({"type": "object", "requried": ["q"]})).unwrap_err();
        assert!(error.contains("requried"), "{error}");
        let error =
            check_keywords(&json!({"type": "object", "oneOf": [{"rols": []}]})).unwrap_err();
        assert!(error.contains("/oneOf/0/rols"), "{error}");
    }

    #[test]
    fn every_standard_shape_and_extensions_pass() {
        check_keywords(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "title": "t", "description": "d", "x-mcp-header": "Q",
            "properties": {
                "properties": {"type": "string", "pattern": "^a"},
                "list": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 3},
                "old": {"items": [{"type": "string"}], "additionalItems": false},
                "choice": {"oneOf": [{"const": 1}, {"enum": [2, 3]}]},
            },
            "patternProperties": {"^x": {"type": "boolean"}},
            "additionalProperties": false,
            "required": ["properties"],
            "$defs": {"a": {"type": "null"}},
            "if": {"required": ["list"]}, "then": {"minProperties": 1}, "else": true,
        }))
        .unwrap();
    }

    #[test]
    fn backtracking_patterns_are_refused_and_linear_ones_compile() {
        assert!(compile_linear(&json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}})).is_ok());
        for pattern in ["(?=a)b", "(a)\\1", "(?<!x)y"] {
            let schema = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}});
            assert!(compile_linear(&schema).is_err(), "{pattern}");
        }
    }
}
