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
            Value::Number(n) => number_len(n),
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

/// The length of a number as serde_json writes it, without writing integers out.
fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut v: u64| {
        let mut len = 1;
        while v >= 10 {
            v /= 10;
            len += 1;
        }
        len
    };
    if let Some(v) = n.as_u64() {
        digits(v)
    } else if let Some(v) = n.as_i64() {
        1 + digits(v.unsigned_abs())
    } else {
        n.to_string().len()
    }
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
/// how many of them are object keys (colons outside strings), and how deep its arrays and
/// objects nest, found by one pass over the bytes without building anything.
pub fn count_values(bytes: &[u8]) -> (usize, usize, usize) {
    let mut values = 1usize;
    let mut keys = 0usize;
    let (mut level, mut deepest) = (0usize, 0usize);
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        at += 1;
        match byte {
            // A string is skipped to its closing quote (most of a body's bytes are in
            // strings: found by memchr, not byte by byte).
            b'"' => {
                while let Some(rest) = bytes.get(at..) {
                    match memchr::memchr2(b'"', b'\\', rest) {
                        None => {
                            at = bytes.len();
                            break;
                        }
                        Some(found) if rest[found] == b'\\' => at += found + 2,
                        Some(found) => {
                            at += found + 1;
                            break;
                        }
                    }
                }
            }
            b',' => values += 1,
            b'[' | b'{' => {
                values += 1;
                level += 1;
                deepest = deepest.max(level);
            }
            b']' | b'}' => level = level.saturating_sub(1),
            b':' => keys += 1,
            _ => {}
        }
    }
    (values, keys, deepest)
}

/// How deep a body may nest: serde_json's own recursion limit, which the typed parse of a
/// method's params would meet (the envelope skips params without counting their depth).
pub const MAX_BODY_DEPTH: usize = 128;

/// What a body costs before it is parsed: its JSON values, the working memory it will cost
/// once parsed and forwarded, and how deep it nests.
#[derive(Clone, Copy, Debug)]
pub struct BodyCost {
    /// JSON values (at most).
    pub values: usize,
    /// Bytes of working memory, the body's own included.
    pub bytes: usize,
    /// Nesting of arrays and objects.
    pub depth: usize,
}

/// Bodies up to this long are first measured by [`bounds_of`]: most requests are a few
/// hundred bytes, where the exact scan's per-string set-up costs more than the bytes.
const SMALL_BODY: usize = 4096;

/// Upper bounds of [`count_values`] found without telling strings apart: every `,`, `[`, `{`
/// and `:` counts, inside strings too (so a bound is never below the exact count), and depth
/// is bounded by the openings. Counted in bytes, 255 input bytes at a time (no count can
/// pass 255), which the compiler turns into 16 comparisons an instruction: about 280
/// instructions for a 170-byte `tools/list`, against 1,400 for the exact scan and 2,100 for
/// the same loop counting in `usize`.
pub fn bounds_of(bytes: &[u8]) -> (usize, usize, usize) {
    let (mut separators, mut openings, mut colons) = (0usize, 0usize, 0usize);
    for chunk in bytes.chunks(255) {
        let (mut s, mut o, mut c) = (0u8, 0u8, 0u8);
        for &byte in chunk {
            s += u8::from(byte == b',');
            o += u8::from(byte == b'[' || byte == b'{');
            c += u8::from(byte == b':');
        }
        separators += usize::from(s);
        openings += usize::from(o);
        colons += usize::from(c);
    }
    (1 + separators + openings, colons, openings)
}

/// The JSON values of a body, the working memory it will cost once parsed and forwarded (see
/// [`BYTES_PER_VALUE`], [`BYTES_PER_KEY`], [`BODY_COPIES`]), its own bytes included, and its
/// depth. A small body whose upper bounds ([`bounds_of`]) pass `max_values` and
/// [`MAX_BODY_DEPTH`] is charged by its bounds (a 4 KiB body of punctuation inside strings
/// at most about 1 MiB more than exact, for as long as it is handled); any other by the exact
/// count, so no body is refused for punctuation inside its strings.
pub fn working_memory(bytes: &[u8], max_values: usize) -> BodyCost {
    let (values, keys, depth) = match bytes.len() {
        len if len <= SMALL_BODY => match bounds_of(bytes) {
            bound @ (values, _, depth) if values <= max_values && depth <= MAX_BODY_DEPTH => bound,
            _ => count_values(bytes),
        },
        _ => count_values(bytes),
    };
    BodyCost {
        values,
        bytes: bytes
            .len()
            .saturating_mul(BODY_COPIES)
            .saturating_add(values.saturating_mul(BYTES_PER_VALUE))
            .saturating_add(keys.saturating_mul(BYTES_PER_KEY)),
        depth,
    }
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

/// [`check`] for an object held as a map (a typed request's `arguments`): the same depth and
/// size as the object would have as a value.
pub fn check_object(
    what: &str,
    object: &serde_json::Map<String, Value>,
    max_bytes: usize,
) -> Result<(), String> {
    let deepest = 1 + object.values().map(depth).max().unwrap_or(0);
    if deepest > MAX_DEPTH {
        return Err(format!("{what} are nested deeper than {MAX_DEPTH} levels"));
    }
    let bytes = 2
        + object.len().saturating_sub(1)
        + object
            .iter()
            .map(|(k, v)| k.len() + 3 + size(v))
            .sum::<usize>();
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
            json!([
                0,
                9,
                10,
                -1,
                -10,
                123456789,
                i64::MIN,
                u64::MAX,
                -0.5,
                1e300
            ]),
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
        // An object held as a map measures as the same object as a value.
        for value in [
            nested(30),
            nested(31),
            json!({"a": "x".repeat(2000)}),
            json!({}),
            json!({"a": [1, {"b": null}], "cc": "d"}),
        ] {
            let Value::Object(map) = &value else {
                unreachable!()
            };
            assert_eq!(
                check_object("arguments", map, 1024),
                check("arguments", &value, 1024),
                "{value}"
            );
            assert_eq!(
                check_object("arguments", map, usize::MAX),
                check("arguments", &value, usize::MAX)
            );
        }
        assert_eq!(
            size(&json!({"a": [1, {"b": null}], "cc": "d"})),
            r#"{"a":[1,{"b":null}],"cc":"d"}"#.len()
        );
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
        assert_eq!(
            count_values(br#"{"a": [1, 2, 3], "b": "x,y,[z"}"#),
            (6, 2, 2)
        );
        assert_eq!(count_values(br#""\"[,:""#), (1, 0, 0));
        assert_eq!(count_values(br#"[[{"a":[]}],{}]"#).2, 4);
        // The same counts as a byte-by-byte scan, escapes and unterminated strings included.
        let naive = |bytes: &[u8]| {
            let (mut values, mut keys, mut level, mut deepest) = (1, 0, 0usize, 0);
            let (mut in_string, mut escaped) = (false, false);
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
                    b',' => values += 1,
                    b'[' | b'{' => {
                        values += 1;
                        level += 1;
                        deepest = deepest.max(level);
                    }
                    b']' | b'}' => level = usize::saturating_sub(level, 1),
                    b':' => keys += 1,
                    _ => {}
                }
            }
            (values, keys, deepest)
        };
        for body in [
            &br#"{"a\"b":[1,{"c":"d\\"}],"e":"\\\"x,["}"#[..],
            br#"{"a":"unterminated, [ {"#,
            br#"{"a":"ends with a backslash\"#,
            br#""\""#,
            b"[[[[]]]]]]]]{,:,:}",
            b"",
        ] {
            assert_eq!(
                count_values(body),
                naive(body),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let many = format!(
            r#"{{"jsonrpc":"2.0","id":7,"params":[{}0]}}"#,
            "0,".repeat(1000)
        );
        assert!(count_values(many.as_bytes()).0 > 1000);
        // The small-body bounds are never below the exact counts.
        for body in [
            &br#"{"a\"b":[1,{"c":"d\\"}],"e":"\\\"x,["}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"p":"2026-07-28","c":{}}}}"#,
            br#"{"a":"x,y,[z:"}"#,
            many.as_bytes(),
        ] {
            let (exact, bound) = (count_values(body), bounds_of(body));
            assert!(
                bound.0 >= exact.0 && bound.1 >= exact.1 && bound.2 >= exact.2,
                "{exact:?} {bound:?}"
            );
            let (cost, by_count) = (working_memory(body, usize::MAX), working_memory(body, 0));
            assert!(cost.bytes >= by_count.bytes && cost.values >= by_count.values);
        }
        // Counts past one chunk of 255 bytes (each chunk's count fits a byte).
        let commas = ",".repeat(1000);
        assert_eq!(bounds_of(commas.as_bytes()), (1001, 0, 0));
        let mixed = "[{:,".repeat(300);
        assert_eq!(bounds_of(mixed.as_bytes()), (901, 300, 600));
        // Punctuation in strings does not get a small body refused: over a limit, the exact
        // count decides.
        let prose = format!(r#"{{"a":"{}"}}"#, ",[:".repeat(300));
        assert_eq!(working_memory(prose.as_bytes(), 10).values, 2);
        assert_eq!(working_memory(prose.as_bytes(), 10).depth, 1);
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
