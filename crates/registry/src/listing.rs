//! The input schema a tool is *listed* with, for clients whose model APIs refuse combinators at
//! the top of a tool's schema — the Anthropic API (Claude Code skips such a tool: "its input
//! schema uses top-level oneOf") and OpenAI's function calling, which want one object schema.
//!
//! A polymorphic tool validates against `oneOf` branches, one per action; it is listed as one
//! object: the discriminator with its `enum`, the union of every branch's properties, and a
//! description saying what each action requires. The edge still validates every call against
//! its action's branch, so a call missing what its action requires is refused (-32602).
//!
//! Only the schemas Toolplane composes (polymorphic tools') are flattened: a schema a tool's
//! author wrote with top-level combinators is listed as written, as MCP asks (SEP-2106: servers
//! preserve `allOf`/`anyOf`), and `check_listable` says why a model API would refuse it.

use serde_json::{Map, Value, json};

/// Keywords that may not appear at the top of a listed schema.
const COMBINATORS: [&str; 3] = ["oneOf", "anyOf", "allOf"];

/// The schema a tool is listed with: `schema` flattened into one object schema when
/// `composed` (a polymorphic tool's, as described in the module's documentation), else as
/// written; without the `x-roles` marks either way.
pub fn listed_schema(schema: &Value, composed: bool) -> Value {
    let mut listed = if composed {
        flattened(schema)
    } else {
        schema.clone()
    };
    strip_role_marks(&mut listed);
    listed
}

/// Removes the `x-roles` marks (what decides the projection is not the client's business).
fn strip_role_marks(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("x-roles");
            map.values_mut().for_each(strip_role_marks);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_role_marks),
        _ => {}
    }
}

fn flattened(schema: &Value) -> Value {
    let Some(top) = schema.as_object() else {
        return json!({"type": "object"});
    };
    if !COMBINATORS.iter().any(|k| top.contains_key(*k)) {
        return schema.clone();
    }
    let mut out: Map<String, Value> = top
        .iter()
        .filter(|(k, _)| {
            !COMBINATORS.contains(&k.as_str()) && *k != "properties" && *k != "required"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert("type".into(), json!("object"));
    let mut properties: Map<String, Value> = top
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut required: Vec<Value> = top
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // allOf: every branch applies, so each adds its properties and requirements.
    for branch in branches(top, "allOf") {
        merge_properties(&mut properties, branch, None);
        for name in branch_required(branch) {
            if !required.contains(&Value::from(name.clone())) {
                required.push(Value::from(name));
            }
        }
    }
    // oneOf / anyOf: one branch applies; what a branch requires is said, not required.
    let mut alternatives = Vec::new();
    for keyword in ["oneOf", "anyOf"] {
        for branch in branches(top, keyword) {
            let discriminated = discriminator_of(branch);
            merge_properties(
                &mut properties,
                branch,
                discriminated.as_ref().map(|(k, _)| k.as_str()),
            );
            alternatives.push((discriminated, branch_required(branch), branch));
        }
    }
    let discriminator = alternatives
        .iter()
        .find_map(|(d, _, _)| d.as_ref().map(|(k, _)| k.clone()));
    let lines = choice_lines(&alternatives, discriminator.as_ref());
    if !lines.is_empty() {
        let said = format!("Required by choice — {}.", lines.join("; "));
        // Said on the discriminator's description when there is one, else on the tool's.
        let (holder, separator) = match discriminator.as_ref().and_then(|k| properties.get_mut(k)) {
            Some(Value::Object(property)) => (property, ". "),
            _ => (&mut out, " "),
        };
        let description = holder
            .get("description")
            .and_then(Value::as_str)
            .map_or_else(|| said.clone(), |d| format!("{d}{separator}{said}"));
        holder.insert("description".into(), Value::from(description));
    }
    out.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        out.insert("required".into(), Value::Array(required));
    }
    Value::Object(out)
}

/// One alternative of a `oneOf` / `anyOf`: its discriminator's key and value (when it has
/// one), what it requires, and the branch.
type Alternative<'a> = (
    Option<(String, String)>,
    Vec<String>,
    &'a Map<String, Value>,
);

/// One line per alternative: what picks it, and what it then requires beyond the
/// discriminator.
fn choice_lines(alternatives: &[Alternative<'_>], discriminator: Option<&String>) -> Vec<String> {
    let mut lines = Vec::new();
    for (discriminated, needs, branch) in alternatives {
        let needs: Vec<String> = needs
            .iter()
            .filter(|n| Some(*n) != discriminator)
            .map(|n| format!("`{n}`"))
            .collect();
        let what = match discriminated {
            Some((key, value)) => format!("{key} = {value}"),
            None => branch
                .get("description")
                .and_then(Value::as_str)
                .map_or_else(|| "one form".to_owned(), str::to_owned),
        };
        lines.push(if needs.is_empty() {
            format!("{what}: nothing more")
        } else {
            format!("{what}: requires {}", needs.join(", "))
        });
    }
    lines
}

fn branches<'a>(
    top: &'a Map<String, Value>,
    keyword: &str,
) -> impl Iterator<Item = &'a Map<String, Value>> {
    top.get(keyword)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn branch_required(branch: &Map<String, Value>) -> Vec<String> {
    branch
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// The property a branch is selected by (`"action": {"const": "ingest"}`), and its value.
fn discriminator_of(branch: &Map<String, Value>) -> Option<(String, String)> {
    branch
        .get("properties")?
        .as_object()?
        .iter()
        .find_map(|(name, schema)| {
            let value = schema.get("const")?;
            Some((
                name.clone(),
                value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned),
            ))
        })
}

/// Adds a branch's properties: a name seen with another schema is listed with both
/// (`anyOf` inside a property is accepted); the discriminator keeps its top-level `enum`.
fn merge_properties(
    properties: &mut Map<String, Value>,
    branch: &Map<String, Value>,
    discriminator: Option<&str>,
) {
    let Some(own) = branch.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, schema) in own {
        if Some(name.as_str()) == discriminator {
            properties
                .entry(name.clone())
                .or_insert_with(|| json!({"type": "string"}));
            continue;
        }
        match properties.get_mut(name) {
            None => {
                properties.insert(name.clone(), schema.clone());
            }
            Some(existing) if existing == schema => {}
            Some(existing) => {
                let mut options = match existing.get("anyOf").and_then(Value::as_array) {
                    Some(options) if existing.as_object().is_some_and(|o| o.len() == 1) => {
                        options.clone()
                    }
                    _ => vec![existing.clone()],
                };
                if !options.contains(schema) {
                    options.push(schema.clone());
                }
                *existing = json!({ "anyOf": options });
            }
        }
    }
}

/// What a listed schema must be for the Anthropic and OpenAI tool APIs: an object schema with
/// no `oneOf`, `anyOf`, `allOf`, `not`, `enum` or `const` at its top. `Err` names the problem.
pub fn check_listable(schema: &Value) -> Result<(), String> {
    let Some(top) = schema.as_object() else {
        return Err("not a JSON object".into());
    };
    if top.get("type") != Some(&Value::from("object")) {
        return Err("the top-level type must be \"object\"".into());
    }
    for keyword in ["oneOf", "anyOf", "allOf", "not", "enum", "const"] {
        if top.contains_key(keyword) {
            return Err(format!("top-level `{keyword}`"));
        }
    }
    if let Some(properties) = top.get("properties")
        && !properties.is_object()
    {
        return Err("`properties` must be an object".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_polymorphic_schema_is_listed_as_one_object() {
        let schema = json!({
            "type": "object",
            "properties": {"action": {"type": "string", "enum": ["ingest", "query"], "description": "Which action to run"}},
            "required": ["action"],
            "oneOf": [
                {"type": "object", "properties": {"action": {"const": "ingest"}, "source": {"type": "object"}}, "required": ["action", "source"]},
                {"type": "object", "properties": {"action": {"const": "query"}, "question": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["action", "question"]}
            ]
        });
        let listed = listed_schema(&schema, true);
        assert_eq!(check_listable(&listed), Ok(()));
        assert_eq!(listed["required"], json!(["action"]));
        assert_eq!(
            listed["properties"]["action"]["enum"],
            json!(["ingest", "query"])
        );
        for name in ["source", "question", "limit"] {
            assert!(listed["properties"][name].is_object(), "{name}");
        }
        let said = listed["properties"]["action"]["description"]
            .as_str()
            .unwrap();
        assert!(
            said.contains("action = ingest: requires `source`"),
            "{said}"
        );
        assert!(
            said.contains("action = query: requires `question`"),
            "{said}"
        );
        // A schema without combinators is listed as it is.
        let plain = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        assert_eq!(listed_schema(&plain, true), plain);
        // An author's own combinators stay (MCP, SEP-2106).
        assert_eq!(listed_schema(&schema, false), schema);
    }

    #[test]
    fn a_property_with_two_shapes_keeps_both_and_all_of_requires() {
        let schema = json!({
            "type": "object",
            "anyOf": [
                {"properties": {"id": {"type": "string"}}, "required": ["id"]},
                {"properties": {"id": {"type": "integer"}, "name": {"type": "string"}}, "required": ["name"]}
            ],
            "allOf": [{"properties": {"tenant": {"type": "string"}}, "required": ["tenant"]}]
        });
        let listed = listed_schema(&schema, true);
        assert_eq!(check_listable(&listed), Ok(()));
        assert_eq!(
            listed["properties"]["id"]["anyOf"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(listed["required"], json!(["tenant"]));
        assert!(check_listable(&json!({"type": "object", "oneOf": []})).is_err());
        assert!(check_listable(&json!({"type": "string"})).is_err());
    }
}

#[cfg(test)]
mod demo_tests {
    #[test]
    fn the_demo_worlds_polymorphic_tools_list_as_one_object() {
        let state = crate::demo::DemoWorld::load().state().unwrap();
        for tool in state.tools.values() {
            let listed =
                super::listed_schema(&tool.def.input_schema, tool.def.polymorphism.is_some());
            assert_eq!(super::check_listable(&listed), Ok(()), "{}", tool.def.name);
            if tool.def.name == "client_wiki" {
                let said = listed["properties"]["action"]["description"]
                    .as_str()
                    .unwrap();
                assert!(
                    said.contains("action = query: requires `question`"),
                    "{said}"
                );
            }
        }
    }
}
