//! Strict decoding of what operators write by hand (tool definitions, tenant and executor
//! files, export documents): a field the type does not define is an error that names it with
//! its path, never silently dropped — `{"provder": "salesforce"}` must not register a platform
//! tool visible to everyone.

use serde::de::DeserializeOwned;

/// Decodes `T` from JSON text, refusing unknown fields; `what` names the document in errors.
pub fn from_json_str<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, String> {
    let mut unknown = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value: T = serde_ignored::deserialize(&mut deserializer, |path| {
        unknown.push(path.to_string());
    })
    .map_err(|error| format!("{what}: {error}"))?;
    deserializer
        .end()
        .map_err(|error| format!("{what}: {error}"))?;
    refuse_unknown(what, unknown)?;
    Ok(value)
}

/// Decodes `T` from a JSON value, refusing unknown fields.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value, what: &str) -> Result<T, String> {
    let mut unknown = Vec::new();
    let decoded: T = serde_ignored::deserialize(value, |path| unknown.push(path.to_string()))
        .map_err(|error| format!("{what}: {error}"))?;
    refuse_unknown(what, unknown)?;
    Ok(decoded)
}

fn refuse_unknown(what: &str, unknown: Vec<String>) -> Result<(), String> {
    match unknown.as_slice() {
        [] => Ok(()),
        [one] => Err(format!("{what}: unknown field `{one}`")),
        many => Err(format!(
            "{what}: unknown fields {}",
            many.iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolDef;

    #[test]
    fn misspelt_fields_are_named() {
        let text = r#"{"name":"crm","description":"d","category":"crm","provder":"salesforce",
            "input_schema":{"type":"object"},"executor":"demo","rols":["admin"],
            "annotations":{"read_only":true,"idempotnt":true}}"#;
        let error = from_json_str::<ToolDef>(text, "tool").unwrap_err();
        assert!(error.contains("`provder`"), "{error}");
        assert!(error.contains("`rols`"), "{error}");
        assert!(error.contains("`annotations.idempotnt`"), "{error}");
        let good = text
            .replace("\"provder\"", "\"provider\"")
            .replace("\"rols\"", "\"roles\"")
            .replace("idempotnt", "idempotent");
        let def = from_json_str::<ToolDef>(&good, "tool").unwrap();
        assert_eq!(def.provider.as_deref(), Some("salesforce"));
        assert!(from_json_str::<ToolDef>(&format!("{good} trailing"), "tool").is_err());
    }
}
