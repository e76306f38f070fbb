//! The one parse of a `/mcp` body: the JSON-RPC envelope read with borrowed fields
//! ([`Envelope::read`]), its params read in the same pass one level deep ([`Fields`]: each
//! key with its value as written) — what the transport's rules and the access log read of
//! every request — until a method reads them into its own type. No JSON tree of the message
//! is built: `tools/call` deserialises its params' values straight into the typed request.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use tp_proto::Fault;

use crate::error::Error;

/// What a well-formed JSON-RPC message is.
#[derive(Debug)]
pub enum Read<'a> {
    /// A request (with an id) or a notification (without).
    Message(Envelope<'a>),
    /// A client's answer to one of the edge's questions: the id it answers, and the whole
    /// message.
    Answer(String, Value),
    /// A response to no question of the edge's.
    Response,
}

/// A JSON-RPC request or notification, as written.
#[derive(Debug)]
pub struct Envelope<'a> {
    /// A string or a number; `Null` for a notification.
    pub id: Value,
    /// The method, borrowed unless it was written with escapes.
    pub method: Cow<'a, str>,
    /// Whether params were sent that are neither `null` nor an object.
    pub params_not_an_object: bool,
    /// The params' keys, one level deep, when they are an object.
    pub fields: Option<Fields<'a>>,
    /// `params._meta`'s keys, when it is an object (read once: the rules read it twice).
    pub meta: Option<Fields<'a>>,
}

/// The envelope's keys, each as written; any other key (`result`, `error`, extensions) is
/// skipped without being read into a value. A repeated key is refused: a proxy in front that
/// reads the first `method` must not see another request than the edge, which would read
/// the last.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "params")]
    params: Option<Params<'a>>,
}

/// The envelope's `params` (`null` reads as absent).
enum Params<'a> {
    Object(Fields<'a>),
    /// An array, a string, a number or a boolean: no method takes one.
    Other,
}

/// `params`, read in the envelope's pass: an object one level deep, anything else skipped.
fn params<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Params<'de>>, D::Error> {
    struct Any;
    impl<'de> Visitor<'de> for Any {
        type Value = Option<Params<'de>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("params")
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            Fields::from_map(map).map(|fields| Some(Params::Object(fields)))
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(Some(Params::Other))
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Some(Params::Other))
        }

        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Some(Params::Other))
        }

        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Some(Params::Other))
        }

        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Some(Params::Other))
        }

        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Some(Params::Other))
        }
    }
    deserializer.deserialize_any(Any)
}

/// A key that is present, `null` included (an `Option` field alone reads `null` as absent).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

impl<'a> Envelope<'a> {
    /// Reads one JSON-RPC message. Malformed messages are refused with the codes JSON-RPC
    /// 2.0 defines: `-32700` for a body that is not JSON, `-32600` for JSON that is not one
    /// JSON-RPC message (batches included: MCP since 2025-06-18 has none).
    pub fn read(bytes: &'a [u8]) -> Result<Read<'a>, Error> {
        let invalid = |message: &'static str| Error::invalid_request(message);
        // An object, and only an object: serde would read a struct from an array by position.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(not_a_message(bytes, None));
        }
        // The body's UTF-8 checked once, here: nothing borrowed from it is checked again (a
        // body that is not UTF-8 gets serde_json's own error, with its position).
        let wire: Result<Wire<'a>, _> = match std::str::from_utf8(bytes) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(bytes),
        };
        let wire = match wire {
            Ok(wire) => wire,
            Err(error) => return Err(not_a_message(bytes, Some(&error))),
        };
        if wire.jsonrpc.and_then(string).as_deref() != Some("2.0") {
            return Err(invalid("invalid request: \"jsonrpc\" must be \"2.0\""));
        }
        // A request's id is a string or a number; a notification has none (`"id": null` is
        // neither, and would make the two indistinguishable).
        let id = match wire.id {
            None => Value::Null,
            Some(raw) => serde_json::from_str(raw.get()).map_err(|e| parse_error(&e))?,
        };
        let null_id = wire.id.is_some() && id.is_null() && wire.method.is_some();
        if null_id || !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
            return Err(invalid(
                "invalid request: \"id\" must be a string or a number",
            ));
        }
        let Some(method) = wire.method else {
            // A response to a server request: to one of the edge's questions, or for the
            // transport (which refuses it: a stateless edge has no other).
            if let Value::String(id) = &id
                && id.starts_with(super::questions::ID_PREFIX)
            {
                let message = serde_json::from_slice(bytes).map_err(|e| parse_error(&e))?;
                return Ok(Read::Answer(id.clone(), message));
            }
            return Ok(Read::Response);
        };
        let Some(method) = string(method) else {
            return Err(invalid("invalid request: \"method\" must be a string"));
        };
        let (fields, params_not_an_object) = match wire.params {
            None => (None, false),
            Some(Params::Object(fields)) => (Some(fields), false),
            Some(Params::Other) => (None, true),
        };
        let meta = fields.as_ref().and_then(|fields| fields.object("_meta"));
        Ok(Read::Message(Envelope {
            id,
            method,
            params_not_an_object,
            fields,
            meta,
        }))
    }

    /// Whether the params are absent, `null` or an object (what every method takes).
    pub fn params_are_an_object(&self) -> bool {
        !self.params_not_an_object
    }
}

/// Why a body is not a JSON-RPC message: not JSON at all (`-32700`, the whole body checked),
/// a batch or another value than an object (`-32600`), or an object serde could not read as
/// an envelope (`error`: a repeated key, `-32600`).
fn not_a_message(bytes: &[u8], error: Option<&serde_json::Error>) -> Error {
    if let Some(error) = error
        && !error.is_data()
    {
        return parse_error(error);
    }
    if let Err(syntax) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        return parse_error(&syntax);
    }
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    let message = match first {
        Some(b'[') => "invalid request: JSON-RPC batches are not supported".to_owned(),
        Some(b'{') => match error {
            Some(error) => format!("invalid request: {error}"),
            None => "invalid request: not a JSON-RPC message".to_owned(),
        },
        _ => "invalid request: not a JSON-RPC message".to_owned(),
    };
    Error::invalid_request(message)
}

/// `-32700`, with serde's reason.
fn parse_error(error: &serde_json::Error) -> Error {
    Error::new(Fault::ParseError, format!("parse error: {error}"))
}

/// What a serde_json error says of a value read from text, without the position it appends
/// (a value read from a JSON tree has none; answers stay the same whichever way the params
/// were read).
pub fn reason(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&position) {
        Some(reason) => reason.to_owned(),
        None => text,
    }
}

/// A JSON string's text: borrowed when written without escapes, `None` for another value.
pub fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(text).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(inner))
    }
}

/// A JSON object one level deep: each key with its value as written. A repeated key keeps
/// its last value, as `serde_json::Map` does.
#[derive(Debug, Default)]
pub struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Fields<'a> {
    /// The object's fields; `None` for another value.
    pub fn of(raw: &'a RawValue) -> Option<Self> {
        if !raw.get().starts_with('{') {
            return None;
        }
        serde_json::from_str(raw.get()).ok()
    }

    /// `key`'s value as written.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// `key`'s value when it is a string.
    pub fn str(&self, key: &str) -> Option<Cow<'a, str>> {
        string(self.get(key)?)
    }

    /// `key`'s value when it is an object.
    pub fn object(&self, key: &str) -> Option<Fields<'a>> {
        Fields::of(self.get(key)?)
    }

    /// The keys, in the order written.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }

    /// The object read into `T` (a method's typed params), each value from its text.
    pub fn typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        let entries = self.0.iter().map(|(key, value)| (key.as_ref(), *value));
        T::deserialize(serde::de::value::MapDeserializer::new(entries))
    }

    /// The object as a JSON map (the methods off the hot path read their params so); a
    /// repeated key keeps its last value.
    pub fn to_map(&self) -> Result<serde_json::Map<String, Value>, serde_json::Error> {
        self.0
            .iter()
            .map(|(key, value)| Ok((key.clone().into_owned(), serde_json::from_str(value.get())?)))
            .collect()
    }

    fn from_map<A: MapAccess<'a>>(mut map: A) -> Result<Self, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(Key(key)) = map.next_key()? {
            fields.push((key, map.next_value::<&'a RawValue>()?));
        }
        Ok(Fields(fields))
    }

    /// Whether `key`'s value is absent or `null`.
    pub fn absent(&self, key: &str) -> bool {
        self.get(key).is_none_or(|v| v.get() == "null")
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Fields<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Fields::from_map(map)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// An object key, borrowed unless written with escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// What the rules read of a message's params (which must be an object: see
/// [`Envelope::fields`]).
impl super::rules::Params for Envelope<'_> {
    fn field(&self, key: &str) -> Option<Cow<'_, str>> {
        self.fields.as_ref()?.str(key)
    }

    fn meta_version(&self) -> Option<Cow<'_, str>> {
        self.meta.as_ref()?.str(super::rules::META_PROTOCOL_VERSION)
    }

    fn declares_capabilities(&self) -> bool {
        self.meta
            .as_ref()
            .and_then(|meta| meta.get(super::rules::META_CLIENT_CAPABILITIES))
            .is_some_and(|raw| {
                // `{}`, what most clients declare, needs no parse.
                raw.get() == "{}"
                    || serde_json::from_str::<rmcp::model::ClientCapabilities>(raw.get()).is_ok()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Result<Read<'_>, Error> {
        Envelope::read(body.as_bytes())
    }

    fn refused(body: &str) -> (Fault, String) {
        match read(body) {
            Err(error) => (error.fault(), error.message().to_owned()),
            Ok(_) => panic!("{body} was read"),
        }
    }

    #[test]
    fn a_request_is_read_with_its_params_as_written() {
        let Ok(Read::Message(envelope)) = read(
            r#" {"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"x","arguments":{"q":[1,2]},"name":"y"}} "#,
        ) else {
            panic!("not a message");
        };
        assert_eq!(envelope.id, Value::String("a\"b".into()));
        assert_eq!(envelope.method, "tools/call");
        let fields = envelope.fields.expect("an object");
        // The last of a repeated key, as serde_json's Map keeps it.
        assert_eq!(fields.str("name").as_deref(), Some("y"));
        assert_eq!(
            fields.get("arguments").map(RawValue::get),
            Some(r#"{"q":[1,2]}"#)
        );
        assert!(fields.str("arguments").is_none());
        assert_eq!(
            fields.keys().collect::<Vec<_>>(),
            ["name", "arguments", "name"]
        );
    }

    #[test]
    fn escaped_strings_are_read_as_their_text() {
        let Ok(Read::Message(envelope)) = read(
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"tools\/list","params":{"c\u0075rsor":"\u0041"}}"#,
        ) else {
            panic!("not a message");
        };
        assert_eq!(envelope.method, "tools/list");
        assert_eq!(envelope.fields.unwrap().str("cursor").as_deref(), Some("A"));
    }

    #[test]
    fn notifications_and_responses_are_told_apart() {
        let Ok(Read::Message(notification)) =
            read(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        else {
            panic!("not a notification");
        };
        assert!(notification.id.is_null());
        assert!(notification.fields.is_none() && notification.params_are_an_object());
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Ok(Read::Response)
        ));
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":"{}x","result":{{"a":1}}}}"#,
            crate::transport::questions::ID_PREFIX
        );
        let Ok(Read::Answer(id, message)) = Envelope::read(answer.as_bytes()) else {
            panic!("not an answer");
        };
        assert!(id.ends_with('x'));
        assert_eq!(message["result"]["a"], 1);
    }

    #[test]
    fn malformed_messages_get_the_codes_json_rpc_defines() {
        for body in [
            "",
            "{",
            "not json",
            r#"{"jsonrpc":"2.0","id":1,"method":"x"} trailing"#,
            "[1,",
        ] {
            assert_eq!(refused(body).0, Fault::ParseError, "{body:?}");
        }
        for (body, says) in [
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
                "batches are not supported",
            ),
            ("5", "not a JSON-RPC message"),
            (r#"["2.0", 1, "ping"]"#, "batches are not supported"),
            (r#""ping""#, "not a JSON-RPC message"),
            (r#"{"id":1,"method":"ping"}"#, "\"jsonrpc\" must be \"2.0\""),
            (
                r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
                "\"jsonrpc\" must be \"2.0\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                "\"id\" must be a string or a number",
            ),
            (
                r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
                "\"id\" must be a string or a number",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
                "\"method\" must be a string",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}"#,
                "duplicate field `method`",
            ),
        ] {
            let (fault, message) = refused(body);
            assert_eq!(fault, Fault::InvalidRequest, "{body}");
            assert!(message.contains(says), "{body}: {message}");
        }
    }

    #[test]
    fn params_that_are_not_an_object_have_no_fields() {
        for params in ["[1]", "5", "\"x\""] {
            let body =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{params}}}"#);
            let Ok(Read::Message(envelope)) = Envelope::read(body.as_bytes()) else {
                panic!("not a message");
            };
            assert!(!envelope.params_are_an_object(), "{params}");
        }
        let Ok(Read::Message(envelope)) =
            read(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}"#)
        else {
            panic!("not a message");
        };
        assert!(envelope.fields.is_none() && envelope.params_are_an_object());
    }
}
