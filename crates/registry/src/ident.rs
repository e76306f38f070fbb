//! Validators for the identifiers and bounded strings that appear in requests.

/// Longest tool name.
pub const MAX_TOOL_NAME: usize = 128;
/// Longest tool title.
pub const MAX_TITLE: usize = 200;
/// Longest tool, action or ADR description.
pub const MAX_DESCRIPTION: usize = 4_000;
/// Longest category name.
pub const MAX_CATEGORY: usize = 64;
/// Longest slug (tenant, provider, role, executor ids).
pub const MAX_SLUG: usize = 63;
/// Most examples per tool.
pub const MAX_EXAMPLES: usize = 10;
/// Longest example.
pub const MAX_EXAMPLE: usize = 500;
/// Most actions of a polymorphic tool.
pub const MAX_ACTIONS: usize = 64;
/// Most roles on one tool or action.
pub const MAX_ROLES: usize = 32;
/// Largest serialised JSON schema (bytes).
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most links on an ADR.
pub const MAX_LINKS: usize = 20;
/// Longest link.
pub const MAX_LINK: usize = 500;
/// Longest owner / scope string.
pub const MAX_OWNER: usize = 200;

/// Tool names: 1–128 characters of `[A-Za-z0-9_.-]`.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > MAX_TOOL_NAME {
        return Err(format!(
            "must be at most {MAX_TOOL_NAME} characters (got {})",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "may contain only A-Z, a-z, 0-9, '_', '.', '-' (found {bad:?})"
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().next_back()) {
        return Err("must start and end with a letter or a digit".into());
    }
    if name.contains("..") {
        return Err("must not contain \"..\"".into());
    }
    Ok(())
}

/// The form under which two tool names collide: what a model, a client or a reader cannot
/// tell apart is one name. ASCII lower case (`GMAIL` is `gmail`), and `-`, `.` and `_` one
/// separator, a run of them one (`google-ads`, `google.ads` and `google__ads` are
/// `google_ads`). Names are ASCII only, so no other Unicode look-alike can be registered.
pub fn tool_name_key(name: &str) -> String {
    let mut key = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '.' | '_') {
            if !key.ends_with('_') {
                key.push('_');
            }
        } else {
            key.push(c.to_ascii_lowercase());
        }
    }
    key
}

/// Slugs (tenants, providers, roles, executors): `[a-z0-9][a-z0-9_-]{0,62}`.
pub fn check_slug(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.len() > MAX_SLUG {
        return Err(format!(
            "must be at most {MAX_SLUG} characters (got {})",
            value.len()
        ));
    }
    let mut chars = value.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_ok {
        return Err("must start with a lowercase letter or a digit".into());
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-')))
    {
        return Err(format!(
            "may contain only a-z, 0-9, '_', '-' (found {bad:?})"
        ));
    }
    Ok(())
}

/// ADR ids: an upper-case prefix, a dash and digits, e.g. `ADR-037`.
pub fn check_adr_id(value: &str) -> Result<(), String> {
    let Some((prefix, number)) = value.split_once('-') else {
        return Err(format!("must look like ADR-037 (got {value:?})"));
    };
    let prefix_ok =
        (2..=10).contains(&prefix.len()) && prefix.chars().all(|c| c.is_ascii_uppercase());
    let number_ok = (1..=6).contains(&number.len()) && number.chars().all(|c| c.is_ascii_digit());
    if prefix_ok && number_ok {
        Ok(())
    } else {
        Err(format!("must look like ADR-037 (got {value:?})"))
    }
}

/// Calendar dates as `YYYY-MM-DD` (checked for a real day of a real month).
pub fn check_date(value: &str) -> Result<(), String> {
    let bad = || format!("must be a date YYYY-MM-DD (got {value:?})");
    let parts: Vec<&str> = value.split('-').collect();
    let [year, month, day] = parts.as_slice() else {
        return Err(bad());
    };
    if year.len() != 4 || month.len() != 2 || day.len() != 2 {
        return Err(bad());
    }
    let (Ok(year), Ok(month), Ok(day)) = (
        year.parse::<u32>(),
        month.parse::<u32>(),
        day.parse::<u32>(),
    ) else {
        return Err(bad());
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if year < 1970 || day == 0 || day > days_in_month {
        return Err(bad());
    }
    Ok(())
}

/// `text` made safe to store and show wherever it came from (a tool name a client sent, a
/// label): control characters and bidirectional overrides escaped as `\u{…}`, then cut to at
/// most `max_bytes` bytes on a character boundary, with `…` when cut.
pub fn sanitized(text: &str, max_bytes: usize) -> String {
    use std::fmt::Write as _;
    let risky = |c: char| {
        c.is_control()
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
    };
    // Nearly every text is safe and short already: copied as it is (printable ASCII is
    // checked a byte at a time, without decoding characters).
    if text.len() <= max_bytes
        && (text.bytes().all(|b| (0x20..0x7f).contains(&b)) || !text.chars().any(risky))
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len().min(max_bytes));
    let mut piece = String::new();
    for c in text.chars() {
        piece.clear();
        if risky(c) {
            let _ = write!(piece, "\\u{{{:x}}}", u32::from(c));
        } else {
            piece.push(c);
        }
        if out.len() + piece.len() > max_bytes {
            let ellipsis = '…';
            while out.len() + ellipsis.len_utf8() > max_bytes {
                if out.pop().is_none() {
                    break;
                }
            }
            if out.len() + ellipsis.len_utf8() <= max_bytes {
                out.push(ellipsis);
            }
            return out;
        }
        out.push_str(&piece);
    }
    out
}

/// A required single-line text of bounded length.
pub fn check_text(value: &str, max: usize, required: bool) -> Result<(), String> {
    if required && value.trim().is_empty() {
        return Err("must not be empty".into());
    }
    let chars = value.chars().count();
    if chars > max {
        return Err(format!("must be at most {max} characters (got {chars})"));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// `http://` or `https://` URLs with a host, at most 500 characters.
pub fn check_http_url(url: &str) -> Result<(), String> {
    check_text(url, MAX_LINK, true)?;
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("must start with http:// or https:// (got {url:?})"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("must name a host (got {url:?})"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names() {
        assert!(check_tool_name("google_ads.search-v2").is_ok());
        assert!(check_tool_name(&"a".repeat(128)).is_ok());
        assert!(check_tool_name(&"a".repeat(129)).is_err());
        assert!(check_tool_name("").is_err());
        assert!(check_tool_name("has space").is_err());
        assert!(check_tool_name("slash/name").is_err());
        assert!(check_tool_name("ünïcode").is_err());
        for bad in ["..", ".hidden", "trailing.", "a..b", "-x", "x_"] {
            assert!(check_tool_name(bad).is_err(), "{bad}");
        }
        assert_eq!(tool_name_key("GMAIL"), tool_name_key("gmail"));
        for lookalike in [
            "google-ads",
            "google.ads",
            "Google_Ads",
            "google__ads",
            "google-.ads",
        ] {
            assert_eq!(tool_name_key(lookalike), "google_ads", "{lookalike}");
        }
        assert_ne!(tool_name_key("googleads"), tool_name_key("google_ads"));
    }

    #[test]
    fn sanitized_text_holds_no_control_characters_and_fits() {
        let name = "gmail\u{1b}[2J\u{1b}]0;pwned\u{7}\nFAKE RECORD";
        let safe = sanitized(name, 1024);
        assert!(!safe.chars().any(char::is_control), "{safe:?}");
        assert_eq!(
            safe,
            "gmail\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\u{a}FAKE RECORD"
        );
        assert_eq!(sanitized("plain", 1024), "plain");
        // The ASCII fast path still escapes DEL and the C0 controls at its edges.
        assert_eq!(sanitized("a\u{7f}b\u{1f}c ~", 1024), "a\\u{7f}b\\u{1f}c ~");
        let long = sanitized(&"é".repeat(100), 21);
        assert!(long.len() <= 21 && long.ends_with('…'), "{long}");
        assert!(sanitized("\u{202e}abc", 5).len() <= 5);
    }

    #[test]
    fn slugs() {
        assert!(check_slug("acme-corp_1").is_ok());
        assert!(check_slug("9lives").is_ok());
        assert!(check_slug("Acme").is_err());
        assert!(check_slug("-acme").is_err());
        assert!(check_slug("").is_err());
        assert!(check_slug(&"a".repeat(64)).is_err());
    }

    #[test]
    fn adr_ids() {
        assert!(check_adr_id("ADR-037").is_ok());
        assert!(check_adr_id("INV-7").is_ok());
        assert!(check_adr_id("adr-037").is_err());
        assert!(check_adr_id("ADR037").is_err());
        assert!(check_adr_id("ADR-").is_err());
        assert!(check_adr_id("ADR-1234567").is_err());
    }

    #[test]
    fn dates() {
        assert!(check_date("2026-05-02").is_ok());
        assert!(check_date("2024-02-29").is_ok());
        assert!(check_date("2025-02-29").is_err());
        assert!(check_date("2026-13-01").is_err());
        assert!(check_date("2026-5-2").is_err());
        assert!(check_date("tomorrow").is_err());
    }

    #[test]
    fn texts() {
        assert!(check_text("hello", 10, true).is_ok());
        assert!(check_text("  ", 10, true).is_err());
        assert!(check_text("", 10, false).is_ok());
        assert!(check_text("hello world", 5, true).is_err());
        assert!(check_text("bell\u{7}", 10, true).is_err());
    }
}
