//! The meta-tools' arguments as types. One source of truth: the edge decodes a call's
//! `arguments` into these (unknown keys refused), and the `inputSchema` each meta-tool
//! advertises in `tools/list` is generated from the same types, so what clients are told and
//! what the edge accepts cannot drift apart.
//!
//! What a schema cannot say (`tool_schema` takes `tool` or `tools`, not both; `action` goes
//! with `tool`) is checked where the arguments are used, with the same -32602 error.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::search::{MAX_QUERY_CHARS, MAX_RESULTS};
use super::{MAX_PARALLEL_CALLS, MAX_SCHEMA_BATCH};

/// A list of `MIN` to `MAX` items: decoding refuses other lengths, and the schema says
/// `minItems`/`maxItems`, so both come from these two numbers.
#[derive(Debug, Clone)]
pub struct Bounded<T, const MIN: usize, const MAX: usize>(pub Vec<T>);

impl<'de, T: Deserialize<'de>, const MIN: usize, const MAX: usize> Deserialize<'de>
    for Bounded<T, MIN, MAX>
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = Vec::<T>::deserialize(deserializer)?;
        if !(MIN..=MAX).contains(&items.len()) {
            return Err(D::Error::custom(format!(
                "must hold {MIN} to {MAX} items, not {}",
                items.len()
            )));
        }
        Ok(Self(items))
    }
}

impl<T: JsonSchema, const MIN: usize, const MAX: usize> JsonSchema for Bounded<T, MIN, MAX> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}_{MIN}_to_{MAX}", T::schema_name()).into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = Vec::<T>::json_schema(generator);
        schema.insert("minItems".into(), MIN.into());
        schema.insert("maxItems".into(), MAX.into());
        schema
    }
}

/// An optional argument that, when given, must be a `T` (`null` is refused, as the schema
/// says: the argument's type is `T`'s, not "`T` or null").
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// `capabilities`: your tools by category, or the ones matching a query.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct CapabilitiesArgs {
    /// Only this category, with one line per tool.
    #[serde(default, deserialize_with = "present")]
    pub category: Option<String>,
    /// Words saying what the tool should do: the answer is the best matching tools.
    #[serde(default, deserialize_with = "present")]
    pub query: Option<Text<1, MAX_QUERY_CHARS>>,
    /// Most results of a `query` (default 5).
    #[serde(default, deserialize_with = "present")]
    pub limit: Option<Count<1, MAX_RESULTS>>,
}

/// A string of `MIN` to `MAX` characters with something besides whitespace: decoding refuses
/// others, and the schema says `minLength`/`maxLength`.
#[derive(Debug, Clone)]
pub struct Text<const MIN: usize, const MAX: usize>(pub String);

impl<'de, const MIN: usize, const MAX: usize> Deserialize<'de> for Text<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let chars = text.chars().count();
        if !(MIN..=MAX).contains(&chars) {
            return Err(D::Error::custom(format!(
                "must be {MIN} to {MAX} characters long, not {chars}"
            )));
        }
        if MIN > 0 && text.trim().is_empty() {
            return Err(D::Error::custom("must hold more than whitespace"));
        }
        Ok(Self(text))
    }
}

impl<const MIN: usize, const MAX: usize> JsonSchema for Text<MIN, MAX> {
    fn schema_name() -> Cow<'static, str> {
        format!("text_{MIN}_to_{MAX}").into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "string", "minLength": MIN, "maxLength": MAX})
    }
}

/// A whole number from `MIN` to `MAX`: decoding refuses others, and the schema says
/// `minimum`/`maximum`.
#[derive(Debug, Clone, Copy)]
pub struct Count<const MIN: usize, const MAX: usize>(pub usize);

impl<'de, const MIN: usize, const MAX: usize> Deserialize<'de> for Count<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(deserializer)?;
        match usize::try_from(n) {
            Ok(n) if (MIN..=MAX).contains(&n) => Ok(Self(n)),
            _ => Err(D::Error::custom(format!("must be {MIN} to {MAX}, not {n}"))),
        }
    }
}

impl<const MIN: usize, const MAX: usize> JsonSchema for Count<MIN, MAX> {
    fn schema_name() -> Cow<'static, str> {
        format!("count_{MIN}_to_{MAX}").into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer", "minimum": MIN, "maximum": MAX})
    }
}

/// `tool_schema`: input schemas, of one tool (optionally one action) or of several.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct ToolSchemaArgs {
    /// One tool's name.
    #[serde(default, deserialize_with = "present")]
    pub tool: Option<String>,
    /// One action of `tool`, for a tool with actions.
    #[serde(default, deserialize_with = "present")]
    pub action: Option<String>,
    /// Several tools' names, instead of `tool`.
    #[serde(default, deserialize_with = "present")]
    pub tools: Option<Bounded<String, 1, MAX_SCHEMA_BATCH>>,
}

/// `dispatch`: run one of your tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(
    deny_unknown_fields,
    expecting = "an object with `tool` and `arguments`"
)]
pub struct DispatchArgs {
    /// The tool to run.
    pub tool: String,
    /// The arguments for that tool (absent: none).
    #[serde(default, deserialize_with = "present")]
    pub arguments: Option<JsonObject>,
}

/// `dispatch_parallel`: run several of your tools at once.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct DispatchParallelArgs {
    /// The calls, each `{tool, arguments}`; results come back in this order.
    pub calls: Bounded<DispatchArgs, 1, MAX_PARALLEL_CALLS>,
    /// A call slower than this (milliseconds) times out alone; at most the edge's request
    /// timeout.
    #[serde(default, deserialize_with = "present")]
    pub timeout_ms: Option<NonZeroU64>,
}

/// The input schema of `T`: JSON Schema 2020-12 (MCP's default dialect) with everything
/// inlined (no `$ref`, which some model providers refuse), and only what constrains a value:
/// the doc comments, `default`s and `format` annotations are left out, because every agent in
/// progressive mode reads these four schemas first and the tools' descriptions already say
/// what each argument is for (the token budget in `benches/disclosure_tokens.rs`).
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let Ok(Value::Object(mut object)) = serde_json::to_value(schema) else {
        unreachable!("a derived schema is a JSON object");
    };
    object.remove("$schema");
    constraints_only(&mut object);
    Arc::new(object)
}

/// Removes annotations (`title`, `description`, `default`, `format`) and the no-op
/// `additionalProperties: true` from a schema and its subschemas, and the `null` schemars adds
/// to an `Option`'s type (an optional argument is absent or a value: [`present`] refuses
/// null); property names are kept whatever they are called.
fn constraints_only(schema: &mut JsonObject) {
    for key in ["title", "description", "default", "format"] {
        schema.remove(key);
    }
    if let Some(Value::Array(types)) = schema.get("type") {
        let mut types: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        let single = (types.len() == 1).then(|| types.remove(0));
        schema.insert("type".into(), single.unwrap_or(Value::Array(types)));
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
        schema.remove("additionalProperties");
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                constraints_only(property);
            }
        }
    }
    if let Some(Value::Object(items)) = schema.get_mut("items") {
        constraints_only(items);
    }
}

/// Decodes `tool`'s arguments into `T`; the error names the argument at fault in JSON's
/// words (object, array), for a -32602 answer.
pub fn decode<T: DeserializeOwned>(tool: &str, arguments: JsonObject) -> Result<T, String> {
    serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|error| {
        let message = json_words(&error.inner().to_string());
        let mut path = error.path().to_string();
        // An unknown key is the last segment of its path: name the object that holds it.
        if message.starts_with("unknown argument") {
            path = path
                .rsplit_once('.')
                .map_or_else(|| ".".to_owned(), |(parent, _)| parent.to_owned());
        }
        if path == "." {
            format!("{tool}: {message}")
        } else {
            format!("{tool}: `{path}`: {message}")
        }
    })
}

/// serde's names for JSON's kinds, in JSON's words.
fn json_words(message: &str) -> String {
    message
        .replace("unknown field", "unknown argument")
        .replace("a map", "an object")
        .replace("type: map", "type: object")
        .replace("type: sequence", "type: array")
        .replace("a sequence", "an array")
        .replace("nonzero u64", "positive integer")
        .replace("u64", "non-negative integer")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    /// What the schema accepts, decoding accepts, and the other way round, on inputs of every
    /// shape the meta-tools see.
    fn agree<T: JsonSchema + DeserializeOwned>(tool: &str, cases: &[(Value, bool)]) {
        let schema = Value::Object(input_schema::<T>().as_ref().clone());
        let validator = jsonschema::validator_for(&schema).expect("a valid schema");
        for (input, expected) in cases {
            let by_schema = validator.is_valid(input);
            let by_serde = decode::<T>(tool, object(input.clone()));
            assert_eq!(by_schema, *expected, "{tool} schema on {input}");
            assert_eq!(
                by_serde.is_ok(),
                *expected,
                "{tool} decode on {input}: {by_serde:?}",
                by_serde = by_serde.err()
            );
        }
    }

    #[test]
    fn schemas_and_decoding_accept_the_same_arguments() {
        agree::<CapabilitiesArgs>(
            "capabilities",
            &[
                (json!({}), true),
                (json!({"category": "crm"}), true),
                (json!({"category": null}), false),
                (json!({"category": 3}), false),
                (json!({"extra": 1}), false),
            ],
        );
        let many: Vec<String> = (0..=MAX_SCHEMA_BATCH).map(|i| format!("t{i}")).collect();
        agree::<ToolSchemaArgs>(
            "tool_schema",
            &[
                (json!({"tool": "gmail"}), true),
                (json!({"tool": "wiki", "action": "query"}), true),
                (json!({"tools": ["a", "b"]}), true),
                (json!({"tools": &many[..MAX_SCHEMA_BATCH]}), true),
                (json!({"tools": many}), false),
                (json!({"tools": []}), false),
                (json!({"tools": "a"}), false),
                (json!({"tools": [1]}), false),
                (json!({"tool": ["gmail"]}), false),
                (json!({"name": "gmail"}), false),
            ],
        );
        agree::<DispatchArgs>(
            "dispatch",
            &[
                (json!({"tool": "gmail"}), true),
                (json!({"tool": "gmail", "arguments": {"q": 1}}), true),
                (json!({"tool": "gmail", "arguments": null}), false),
                (json!({"arguments": {}}), false),
                (json!({"tool": "gmail", "arguments": []}), false),
                (json!({"tool": "gmail", "args": {}}), false),
                (json!({"tool": 7}), false),
            ],
        );
        let call = json!({"tool": "gmail", "arguments": {}});
        agree::<DispatchParallelArgs>(
            "dispatch_parallel",
            &[
                (json!({"calls": [call]}), true),
                (
                    json!({"calls": vec![call.clone(); MAX_PARALLEL_CALLS]}),
                    true,
                ),
                (
                    json!({"calls": vec![call.clone(); MAX_PARALLEL_CALLS + 1]}),
                    false,
                ),
                (json!({"calls": []}), false),
                (json!({"calls": [call], "timeout_ms": 250}), true),
                (json!({"calls": [call], "timeout_ms": 0}), false),
                (json!({"calls": [call], "timeout_ms": -5}), false),
                (json!({"calls": [call], "timeout_ms": 1.5}), false),
                (json!({"calls": [{"tool": "gmail", "extra": 1}]}), false),
                (json!({"calls": ["gmail"]}), false),
                (json!({"calls": [{"arguments": {}}]}), false),
                (json!({}), false),
                (json!({"calls": [call], "parallel": true}), false),
            ],
        );
    }

    #[test]
    fn the_limits_in_the_schemas_are_the_edges_limits() {
        let schema = input_schema::<ToolSchemaArgs>();
        assert_eq!(
            schema["properties"]["tools"]["maxItems"],
            json!(MAX_SCHEMA_BATCH)
        );
        let schema = input_schema::<DispatchParallelArgs>();
        assert_eq!(
            schema["properties"]["calls"]["maxItems"],
            json!(MAX_PARALLEL_CALLS)
        );
        assert_eq!(schema["properties"]["calls"]["minItems"], json!(1));
        // Inlined: no references for a client to resolve.
        let text = Value::Object(schema.as_ref().clone()).to_string();
        assert!(!text.contains("$ref") && !text.contains("$defs"), "{text}");
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(
            schema["properties"]["calls"]["items"]["additionalProperties"],
            json!(false)
        );
    }

    #[test]
    fn errors_name_the_argument_in_jsons_words() {
        let error =
            decode::<DispatchArgs>("dispatch", object(json!({"tool": "a", "arguments": []})))
                .unwrap_err();
        assert_eq!(
            error,
            "dispatch: `arguments`: invalid type: array, expected an object"
        );
        let error =
            decode::<CapabilitiesArgs>("capabilities", object(json!({"extra": 1}))).unwrap_err();
        assert!(
            error.starts_with("capabilities: unknown argument `extra`"),
            "{error}"
        );
        let error = decode::<DispatchParallelArgs>(
            "dispatch_parallel",
            object(json!({"calls": [{"tool": "a"}], "timeout_ms": 0})),
        )
        .unwrap_err();
        assert!(
            error.contains("`timeout_ms`") && error.contains("positive integer"),
            "{error}"
        );
        let error =
            decode::<DispatchParallelArgs>("dispatch_parallel", object(json!({"calls": ["a"]})))
                .unwrap_err();
        assert!(
            error.contains("`calls[0]`") && error.contains("`tool` and `arguments`"),
            "{error}"
        );
    }
}
