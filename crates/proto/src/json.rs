//! `google.protobuf.Struct` ↔ `serde_json::Value`.
//!
//! Protobuf numbers are doubles: integral values within ±2^53 come back as JSON integers so
//! that schemas like `{"maxLength": 200}` round-trip unchanged.

use prost_types::{ListValue, Struct, Value as PbValue, value::Kind};
use serde_json::{Map, Number, Value};

/// Largest integer a double holds exactly.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// Converts a JSON object to a `Struct`; any other JSON value gives `None`.
pub fn to_struct(value: &Value) -> Option<Struct> {
    let Value::Object(map) = value else {
        return None;
    };
    Some(map_to_struct(map))
}

/// Converts a JSON map to a `Struct`.
pub fn map_to_struct(map: &Map<String, Value>) -> Struct {
    Struct {
        fields: map
            .iter()
            .map(|(key, value)| (key.clone(), to_value(value)))
            .collect(),
    }
}

/// Converts any JSON value to a protobuf `Value`.
pub fn to_value(value: &Value) -> PbValue {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(map_to_struct(map)),
    };
    PbValue { kind: Some(kind) }
}

/// Converts a `Struct` to a JSON object.
pub fn from_struct(value: &Struct) -> Value {
    Value::Object(struct_to_map(value))
}

/// Converts a `Struct` to a JSON map.
pub fn struct_to_map(value: &Struct) -> Map<String, Value> {
    value
        .fields
        .iter()
        .map(|(key, value)| (key.clone(), from_value(value)))
        .collect()
}

/// Converts a protobuf `Value` to JSON.
pub fn from_value(value: &PbValue) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => from_struct(s),
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= MAX_EXACT {
        // Exact: |n| <= 2^53 and integral.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schemas_round_trip() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": -3, "maximum": 500000},
                           "x": {"type": "number", "multipleOf": 0.01},
                           "tags": {"type": "array", "items": {"enum": ["a", null, true]}}},
            "required": ["n"],
            "additionalProperties": false
        });
        let back = from_struct(&to_struct(&schema).unwrap());
        assert_eq!(back, schema);
        assert!(to_struct(&json!([1])).is_none());
    }
}
