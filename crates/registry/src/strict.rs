//! Strict decoding of what operators write by hand (tool definitions, tenant and executor
//! files, export documents): a field the type does not define is an error that names it with
//! its path, never silently dropped — `{"provder": "salesforce"}` must not register a platform
//! tool visible to everyone.

use serde::de::DeserializeOwned;

/// Decodes `T` from JSON text, refusing unknown fields; `what` names the document in errors.
pub fn from_json_str<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, String> {
    let mut unknown = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let decoded = serde_ignored::deserialize(&mut deserializer, |path| {
        unknown.push(path.to_string());
    });
    let value: T = decoded.map_err(|error| explain(what, &error.to_string(), &unknown))?;
    deserializer
        .end()
        .map_err(|error| format!("{what}: {error}"))?;
    refuse_unknown(what, unknown)?;
    Ok(value)
}

/// Decodes `T` from a JSON value, refusing unknown fields.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value, what: &str) -> Result<T, String> {
    let mut unknown = Vec::new();
    let decoded = serde_ignored::deserialize(value, |path| unknown.push(path.to_string()));
    let decoded: T = decoded.map_err(|error| explain(what, &error.to_string(), &unknown))?;
    refuse_unknown(what, unknown)?;
    Ok(decoded)
}

/// A decoding error, with the unknown fields seen before it: `{"executer": …}` reads as
/// "missing field `executor`", which says nothing of the misspelling that caused it.
fn explain(what: &str, error: &str, unknown: &[String]) -> String {
    let mut message = format!("{what}: {error}");
    if unknown.is_empty() {
        return message;
    }
    let missing = error
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let misspelt = missing.and_then(|missing| {
        unknown.iter().find(|field| {
            let last = field.rsplit('.').next().unwrap_or(field);
            near(last, missing)
        })
    });
    match (missing, misspelt) {
        (Some(missing), Some(field)) => message.push_str(&format!(
            " — `{field}` is not a field: did you mean `{missing}`?"
        )),
        _ => message.push_str(&format!(
            "; unknown field{} {}",
            if unknown.len() == 1 { "" } else { "s" },
            unknown
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    message
}

/// Whether two names are one edit (or one swap of neighbours) apart, case aside.
fn near(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (
        a.to_lowercase().chars().collect(),
        b.to_lowercase().chars().collect(),
    );
    let (mut previous, mut current): (Vec<usize>, Vec<usize>);
    previous = (0..=b.len()).collect();
    let mut before: Vec<usize> = previous.clone();
    for i in 1..=a.len() {
        current = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous[b.len()] <= 2 && a.len().min(b.len()) >= 3
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

    #[test]
    fn a_misspelt_required_field_is_named_with_the_missing_one() {
        let text = r#"{"name":"crm","description":"d","category":"crm",
            "input_schema":{"type":"object"},"executer":"demo"}"#;
        let error = from_json_str::<ToolDef>(text, "tool").unwrap_err();
        assert!(error.contains("missing field `executor`"), "{error}");
        assert!(
            error.contains("`executer` is not a field: did you mean `executor`?"),
            "{error}"
        );
        assert!(super::near("executer", "executor") && !super::near("provider", "executor"));
    }
}
