//! SEP-2243 `Mcp-Param-*` headers (MCP 2026-07-28): a tool's input schema may mark primitive
//! properties with `x-mcp-header: NAME`, and a client then sends each such argument's value in
//! an `Mcp-Param-NAME` header too (so proxies can route on it without reading the body), as
//! given or wrapped as `=?base64?…?=`. The edge checks the headers against the body for the
//! caller's own tool — a missing, surplus, undecodable or different header is `-32020` (HTTP
//! 400) — because the MCP transport cannot: it does not know per-tenant tools.

use serde_json::Value;

/// Every `x-mcp-header` annotation reached from the root through `properties` alone:
/// (property path, header name).
pub fn annotations(schema: &Value) -> Vec<(Vec<&str>, &str)> {
    fn collect<'a>(
        properties: Option<&'a Value>,
        path: &mut Vec<&'a str>,
        out: &mut Vec<(Vec<&'a str>, &'a str)>,
    ) {
        let Some(Value::Object(properties)) = properties else {
            return;
        };
        for (name, schema) in properties {
            path.push(name);
            if let Some(Value::String(header)) = schema.get("x-mcp-header")
                && !header.is_empty()
            {
                out.push((path.clone(), header));
            }
            collect(schema.get("properties"), path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    collect(schema.get("properties"), &mut Vec::new(), &mut out);
    out
}

fn primitive(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(crate) use crate::transport::rules::decode;

/// Checks the `Mcp-Param-*` headers of a call against its arguments; `Err` says what differs.
pub fn check(
    schema: &Value,
    arguments: Option<&serde_json::Map<String, Value>>,
    headers: &http::HeaderMap,
) -> Result<(), String> {
    for (path, header) in annotations(schema) {
        let name = format!("Mcp-Param-{header}");
        let mut values = headers.get_all(name.as_str()).iter();
        let sent = match (values.next(), values.next()) {
            (None, _) => None,
            (Some(_), Some(_)) => return Err(format!("duplicate {name} header")),
            (Some(value), None) => Some(
                value
                    .to_str()
                    .map_err(|_| format!("{name} header contains invalid characters"))?
                    .trim(),
            ),
        };
        let body = path
            .split_first()
            .and_then(|(first, rest)| {
                rest.iter()
                    .try_fold(arguments?.get(*first)?, |value, key| value.get(key))
            })
            .filter(|v| !v.is_null())
            .and_then(primitive);
        let property = path.join(".");
        match (sent, body) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(format!("unexpected {name} header for absent `{property}`"));
            }
            (None, Some(_)) => return Err(format!("missing {name} header for `{property}`")),
            (Some(raw), Some(expected)) => {
                let decoded =
                    decode(raw).ok_or_else(|| format!("{name} header is not valid Base64"))?;
                if decoded != expected {
                    return Err(format!(
                        "{name} header `{decoded}` does not match `{property}` in the body"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn headers_must_match_the_annotated_arguments() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "filter": {"type": "object", "properties": {"owner": {"type": "string", "x-mcp-header": "Owner"}}},
            "note": {"type": "string"}}});
        assert_eq!(annotations(&schema).len(), 3);
        let args =
            json!({"region": "eu-west", "limit": 5, "filter": {"owner": "ada"}, "note": "x"});
        let ok = headers(&[
            ("mcp-param-region", "eu-west"),
            ("mcp-param-limit", "5"),
            ("mcp-param-owner", "=?base64?YWRh?="),
        ]);
        assert_eq!(check(&schema, args.as_object(), &ok), Ok(()));
        // Missing, different, bad Base64 (padding), duplicate, surplus.
        let cases: [&[(&'static str, &str)]; 5] = [
            &[("mcp-param-region", "eu-west"), ("mcp-param-limit", "5")],
            &[
                ("mcp-param-region", "us-east"),
                ("mcp-param-limit", "5"),
                ("mcp-param-owner", "ada"),
            ],
            &[
                ("mcp-param-region", "eu-west"),
                ("mcp-param-limit", "5"),
                ("mcp-param-owner", "=?base64?YWR?="),
            ],
            &[
                ("mcp-param-region", "eu-west"),
                ("mcp-param-region", "eu-west"),
                ("mcp-param-limit", "5"),
                ("mcp-param-owner", "ada"),
            ],
            &[("mcp-param-region", "eu-west"), ("mcp-param-limit", "5")],
        ];
        for (i, case) in cases.iter().enumerate() {
            let arguments = if i == 4 {
                json!({"region": "eu-west", "limit": 5})
            } else {
                args.clone()
            };
            let mut case = case.to_vec();
            if i == 4 {
                case.push(("mcp-param-owner", "ada"));
            }
            assert!(
                check(&schema, arguments.as_object(), &headers(&case)).is_err(),
                "case {i}"
            );
        }
        // A literal value that merely looks odd is taken as it is.
        let literal =
            json!({"type": "object", "properties": {"q": {"type": "string", "x-mcp-header": "Q"}}});
        assert_eq!(
            check(
                &literal,
                json!({"q": "a=b"}).as_object(),
                &headers(&[("mcp-param-q", "a=b")])
            ),
            Ok(())
        );
    }
}
