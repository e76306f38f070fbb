//! Plain tables for people, JSON for scripts. Nothing reaches the terminal raw: text from the
//! control plane (tool names a client sent, labels, error messages) has its control
//! characters escaped, so it can neither move the cursor, retitle the window nor forge a row.

use std::borrow::Cow;

use serde_json::Value;

/// `text` with every control character escaped as `\u{…}`, except line feeds and tabs
/// (which lay out the command's own output).
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// One table cell or value on one line: every control character escaped, line feeds too.
pub fn cell(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| (c.is_control() || is_invisible_format(c)) && !keep(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Bidirectional overrides and isolates: they reorder what a terminal shows.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// Renders rows under headers with aligned columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|c| cell(c).into_owned()).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                format!(
                    "{cell:<width$}",
                    width = widths.get(i).copied().unwrap_or(0)
                )
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(headers.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.clone()));
    }
    out
}

/// Pretty JSON.
pub fn json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// `—` for empty cells.
pub fn or_dash(value: &str) -> String {
    if value.is_empty() {
        "—".to_owned()
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned() {
        let out = table(
            &["NAME", "N"],
            &[
                vec!["a".into(), "1".into()],
                vec!["long".into(), "22".into()],
            ],
        );
        assert_eq!(out, "NAME  N\na     1\nlong  22");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let name = "gmail\u{1b}[2J\u{1b}]0;pwned\u{7}\nFAKE RECORD";
        let out = table(&["TOOL", "N"], &[vec![name.into(), "1".into()]]);
        assert_eq!(out.lines().count(), 2, "no forged row: {out}");
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert!(out.contains("gmail\\u{1b}[2J"), "{out}");
        assert_eq!(printable("a\nb\tc"), "a\nb\tc");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
    }
}

pub use tp_proto::clock::now_ms;

/// `2026-11-25 08:49 UTC (3 days ago)` for a Unix-milliseconds instant seen at `now_ms`;
/// `never` for 0.
pub fn when(at_ms: u64, now_ms: u64) -> String {
    if at_ms == 0 {
        return "never".into();
    }
    let at = i64::try_from(at_ms / 1000)
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok());
    let stamp = match at {
        Some(at) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02} UTC",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute()
        ),
        None => format!("{at_ms} ms after 1970"),
    };
    format!("{stamp} ({})", ago(at_ms, now_ms))
}

/// "just now", "5 minutes ago", "3 hours ago", "2 days ago", or "in 4 days" for the future.
pub fn ago(at_ms: u64, now_ms: u64) -> String {
    let (delta, future) = if at_ms > now_ms {
        ((at_ms - now_ms) / 1000, true)
    } else {
        ((now_ms - at_ms) / 1000, false)
    };
    let (n, unit) = match delta {
        0..60 => return "just now".into(),
        60..3600 => (delta / 60, "minute"),
        3600..86_400 => (delta / 3600, "hour"),
        _ => (delta / 86_400, "day"),
    };
    let plural = if n == 1 { "" } else { "s" };
    if future {
        format!("in {n} {unit}{plural}")
    } else {
        format!("{n} {unit}{plural} ago")
    }
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn instants_read_as_dates_and_ages() {
        // 2026-11-22T10:30:00Z, seen three days and a bit later.
        let at = 1_795_343_400_000;
        let now = at + 3 * 86_400_000 + 5_000;
        assert_eq!(when(at, now), "2026-11-22 10:30 UTC (3 days ago)");
        assert_eq!(when(0, now), "never");
        assert_eq!(ago(now - 30_000, now), "just now");
        assert_eq!(ago(now - 60_000, now), "1 minute ago");
        assert_eq!(ago(now - 7_200_000, now), "2 hours ago");
        assert_eq!(ago(now + 86_400_000 * 4, now), "in 4 days");
        assert!(when(951_782_400_000, now).starts_with("2000-02-29 00:00 UTC"));
        assert!(when(1, now).starts_with("1970-01-01 00:00 UTC"));
    }
}
