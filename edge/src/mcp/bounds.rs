//! Bounds on what a client can make the edge build or forward, checked on the parsed request
//! before anything else is built from it: every client-supplied structure that reaches an
//! executor must decode there (protobuf's recursion limit) and must not make the edge or the
//! executor spend memory out of proportion to the limits.

use serde_json::Value;

/// Deepest nesting of a client-supplied JSON value forwarded to an executor (`arguments`,
/// `inputResponses`). Each JSON object level costs three protobuf message levels in a
/// `google.protobuf.Struct` (struct, map entry, value), and executors decode with protobuf's
/// recursion limit of 100: 30 levels stay below it inside an `InvokeRequest`.
pub const MAX_DEPTH: usize = 30;

/// Nesting depth of a JSON value (a scalar is 0).
pub fn depth(value: &Value) -> usize {
    // Iterative: a value nested 25,000 deep (the parser stops at 128) must not recurse here.
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Object(map) => {
                deepest = deepest.max(level + 1);
                stack.extend(map.values().map(|v| (v, level + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(level + 1);
                stack.extend(items.iter().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The size of a JSON value as compact JSON, in bytes (an upper bound for strings with
/// escapes counted as written), without serialising it.
pub fn size(value: &Value) -> usize {
    let mut total = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        total += match value {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => n.to_string().len(),
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len().saturating_sub(1)
            }
            Value::Object(map) => {
                stack.extend(map.values());
                2 + map.len().saturating_sub(1) + map.keys().map(|k| k.len() + 3).sum::<usize>()
            }
        };
    }
    total
}

pub use crate::config::{BODY_COPIES, BYTES_PER_KEY, BYTES_PER_VALUE};

/// The in-flight budget (KiB), in a request's extensions, for the parts of the request path
/// that learn a cost only on the way: the body's working memory once it has arrived, an
/// executor's result once it has come back.
#[derive(Clone, Debug)]
pub struct InFlightBytes(pub std::sync::Arc<tokio::sync::Semaphore>);

/// Working memory an executor's result costs per byte of its protobuf encoding while the edge
/// turns it into the MCP answer (the decoded `Struct`, the JSON value, the serialised answer).
pub const RESULT_BYTES_PER_ENCODED_BYTE: usize = 10;

/// How many JSON values a body holds at most (commas and openings outside strings, plus one),
/// and how many of them are object keys (colons outside strings), found by one pass over the
/// bytes without building anything.
pub fn count_values(bytes: &[u8]) -> (usize, usize) {
    let mut values = 1usize;
    let mut keys = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => values += 1,
            b':' => keys += 1,
            _ => {}
        }
    }
    (values, keys)
}

/// The JSON values of a body and the working memory it will cost once parsed and forwarded
/// (see [`BYTES_PER_VALUE`], [`BYTES_PER_KEY`], [`BODY_COPIES`]), its own bytes included.
pub fn working_memory(bytes: &[u8]) -> (usize, usize) {
    let (values, keys) = count_values(bytes);
    (
        values,
        bytes
            .len()
            .saturating_mul(BODY_COPIES)
            .saturating_add(values.saturating_mul(BYTES_PER_VALUE))
            .saturating_add(keys.saturating_mul(BYTES_PER_KEY)),
    )
}

/// The JSON-RPC id of a body too large to parse in full: the envelope is read with its
/// `params` skipped, so nothing is built from them.
pub fn envelope_id(bytes: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        id: Value,
        #[serde(default, rename = "params")]
        _params: serde::de::IgnoredAny,
    }
    serde_json::from_slice::<Envelope>(bytes)
        .map(|e| e.id)
        .ok()
        .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
        .unwrap_or(Value::Null)
}

/// Checks one client-supplied value (`what` names it in the message) against [`MAX_DEPTH`]
/// and `max_bytes`.
pub fn check(what: &str, value: &Value, max_bytes: usize) -> Result<(), String> {
    if depth(value) > MAX_DEPTH {
        return Err(format!("{what} are nested deeper than {MAX_DEPTH} levels"));
    }
    let bytes = size(value);
    if bytes > max_bytes {
        return Err(format!(
            "{what} are {bytes} bytes; at most {max_bytes} bytes (mcp.max_argument_bytes)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!({ "a": value });
        }
        value
    }

    #[test]
    fn depth_and_size() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(depth(&nested(30)), 30);
        for value in [
            json!({"a": [1, 2.5, null, true, false, "xy"], "bb": {}}),
            json!([]),
            json!("plain"),
            nested(5),
        ] {
            assert_eq!(
                size(&value),
                serde_json::to_vec(&value).unwrap().len(),
                "{value}"
            );
        }
        assert!(check("arguments", &nested(30), 1024).is_ok());
        assert!(
            check("arguments", &nested(31), 1024)
                .unwrap_err()
                .contains("30 levels")
        );
        assert!(
            check("arguments", &json!({"a": "x".repeat(2000)}), 1024)
                .unwrap_err()
                .contains("1024")
        );
    }

    #[test]
    fn values_are_counted_outside_strings_and_ids_read_without_params() {
        assert_eq!(count_values(br#"{"a": [1, 2, 3], "b": "x,y,[z"}"#), (6, 2));
        assert_eq!(count_values(br#""\"[,:""#), (1, 0));
        let many = format!(
            r#"{{"jsonrpc":"2.0","id":7,"params":[{}0]}}"#,
            "0,".repeat(1000)
        );
        assert!(count_values(many.as_bytes()).0 > 1000);
        assert_eq!(envelope_id(many.as_bytes()), json!(7));
        assert_eq!(envelope_id(b"not json"), Value::Null);
    }

    #[test]
    fn the_deepest_allowed_arguments_decode_as_an_invoke_request() {
        use prost::Message as _;
        let request = tp_proto::pb::InvokeRequest {
            arguments: tp_proto::json::to_struct(&nested(MAX_DEPTH)),
            input_responses: tp_proto::json::to_struct(&nested(MAX_DEPTH)),
            ..Default::default()
        };
        let bytes = request.encode_to_vec();
        assert!(tp_proto::pb::InvokeRequest::decode(bytes.as_slice()).is_ok());
        let deeper = tp_proto::pb::InvokeRequest {
            arguments: tp_proto::json::to_struct(&nested(MAX_DEPTH + 4)),
            ..Default::default()
        };
        assert!(
            tp_proto::pb::InvokeRequest::decode(deeper.encode_to_vec().as_slice()).is_err(),
            "the limit is there because deeper arguments do not decode"
        );
    }
}
