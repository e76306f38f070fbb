//! Opaque, deterministic `tools/list` cursors: the name of the last tool of the previous page
//! (keyset pagination, stable across revisions), base64url-encoded behind a version tag.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const TAG: &str = "c1.";

/// The cursor that continues after `name`.
pub fn encode_cursor(name: &str) -> String {
    format!("{TAG}{}", URL_SAFE_NO_PAD.encode(name))
}

/// The tool name a cursor continues after; `None` for anything this edge did not produce.
pub fn decode_cursor(cursor: &str) -> Option<String> {
    let encoded = cursor.strip_prefix(TAG)?;
    if encoded.len() > 256 {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(encoded).ok()?;
    let name = String::from_utf8(bytes).ok()?;
    tp_registry::ident::check_tool_name(&name).ok()?;
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        assert_eq!(
            decode_cursor(&encode_cursor("google_ads")).as_deref(),
            Some("google_ads")
        );
        for bad in [
            "",
            "c1.",
            "c1.!!!",
            "google_ads",
            "c1.Li4vZXRj",
            &format!("c1.{}", "A".repeat(300)),
        ] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        /// Any string a client sends as a cursor decodes to a valid tool name or to nothing;
        /// it never panics, and every name the edge encodes comes back unchanged.
        #[test]
        fn any_cursor_decodes_to_a_valid_name_or_nothing(cursor in ".{0,400}") {
            if let Some(name) = decode_cursor(&cursor) {
                proptest::prop_assert!(tp_registry::ident::check_tool_name(&name).is_ok());
                proptest::prop_assert_eq!(encode_cursor(&name), cursor);
            }
        }

        #[test]
        fn tagged_base64_garbage_is_refused_or_valid(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let cursor = format!("{TAG}{}", URL_SAFE_NO_PAD.encode(&bytes));
            let decoded = decode_cursor(&cursor);
            let valid = std::str::from_utf8(&bytes)
                .ok()
                .filter(|s| tp_registry::ident::check_tool_name(s).is_ok() && cursor.len() - TAG.len() <= 256);
            proptest::prop_assert_eq!(decoded.as_deref(), valid);
        }

        #[test]
        fn every_valid_name_round_trips(name in "[A-Za-z0-9_.-]{1,128}") {
            proptest::prop_assume!(tp_registry::ident::check_tool_name(&name).is_ok());
            proptest::prop_assert_eq!(decode_cursor(&encode_cursor(&name)), Some(name));
        }
    }
}
