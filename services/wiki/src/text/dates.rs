//! Calendar dates written the ways documents write them: `2026-03-12`, `12 March 2026`,
//! `March 12, 2026`, `Tue, 14 Apr 2026 09:12:00 +0000` (an e-mail's `Date:`). Dates are
//! `YYYYMMDD` numbers, as everywhere in the wiki.

/// Month names, lower case, January first.
pub(crate) const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The month a word names (`March`, `Mar`, `mar.`), 1 to 12.
pub fn month_number(word: &str) -> Option<u32> {
    month(word)
}

fn month(word: &str) -> Option<u32> {
    let word = word.trim_end_matches('.').to_lowercase();
    if word.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| *m == word || (word.len() == 3 && m.starts_with(word.as_str())))
        .and_then(|i| u32::try_from(i + 1).ok())
}

fn valid(year: u32, month: u32, day: u32) -> Option<u32> {
    let m = time::Month::try_from(u8::try_from(month).ok()?).ok()?;
    time::Date::from_calendar_date(i32::try_from(year).ok()?, m, u8::try_from(day).ok()?).ok()?;
    (1800..=2200)
        .contains(&year)
        .then_some(year * 10_000 + month * 100 + day)
}

/// `YYYY-MM-DD` exactly (the `as_of` argument, front matter).
pub fn parse_iso(text: &str) -> Option<u32> {
    let text = text.trim();
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    valid(number(0..4)?, number(5..7)?, number(8..10)?)
}

/// The first full calendar date written in `text` (day, month and year), in any of the
/// forms above; a timestamp's time of day is ignored.
pub fn find(text: &str) -> Option<u32> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | '*' | '|' | ';'))
        .filter(|w| !w.is_empty())
        .collect();
    for (i, word) in words.iter().enumerate() {
        let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-');
        if let Some(head) = word.get(..10)
            && let Some(date) = parse_iso(head)
        {
            return Some(date);
        }
        let number = |w: Option<&&str>| -> Option<u32> {
            let w = w?.trim_end_matches(['.', ',']);
            let w = w
                .strip_suffix("st")
                .or_else(|| w.strip_suffix("nd"))
                .or_else(|| w.strip_suffix("rd"))
                .or_else(|| w.strip_suffix("th"))
                .unwrap_or(w);
            w.parse().ok()
        };
        let Some(m) = month(word) else {
            continue;
        };
        // "12 March 2026"
        if let (Some(day), Some(year)) = (
            i.checked_sub(1).and_then(|j| number(words.get(j))),
            number(words.get(i + 1)),
        ) && let Some(date) = valid(year, m, day)
        {
            return Some(date);
        }
        // "March 12, 2026"
        if let (Some(day), Some(year)) = (number(words.get(i + 1)), number(words.get(i + 2)))
            && let Some(date) = valid(year, m, day)
        {
            return Some(date);
        }
    }
    None
}

/// A date as `YYYY-MM-DD`.
pub fn show(date: u32) -> String {
    format!(
        "{:04}-{:02}-{:02}",
        date / 10_000,
        (date / 100) % 100,
        date % 100
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_read_in_the_forms_documents_write_them() {
        assert_eq!(parse_iso("2026-03-12"), Some(20_260_312));
        assert_eq!(parse_iso("2026-02-30"), None);
        assert_eq!(parse_iso("2026-3-12"), None);
        assert_eq!(find("Planning call, 12 March 2026"), Some(20_260_312));
        assert_eq!(find("*July 3, 2023*"), Some(20_230_703));
        assert_eq!(
            find("Date: Tue, 14 Apr 2026 09:12:00 +0000"),
            Some(20_260_414)
        );
        assert_eq!(find("LISBON, 1 July 2025 — text"), Some(20_250_701));
        assert_eq!(find("Published 2025-03-01"), Some(20_250_301));
        assert_eq!(find("from June we bring it down"), None);
        assert_eq!(find("founded in 1999"), None);
        assert_eq!(show(20_250_301), "2025-03-01");
    }
}
