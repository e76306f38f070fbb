//! Values in text: numbers with their scale and unit, and the date a sentence states.

use super::*;
use crate::text::dates::MONTHS;

/// Multipliers written after a number.
pub(super) const SCALES: &[(&str, f64)] = &[
    ("thousand", 1e3),
    ("million", 1e6),
    ("millions", 1e6),
    ("billion", 1e9),
    ("billions", 1e9),
    ("trillion", 1e12),
    ("mn", 1e6),
    ("bn", 1e9),
];

/// A numeric value at the start of `text`: (value as written, number, unit, rest).
pub fn number(text: &str) -> Option<(String, f64, String, &str)> {
    let trimmed = text.trim_start();
    let mut chars = trimmed.char_indices().peekable();
    let mut currency = "";
    let mut start = 0;
    if let Some(&(_, c)) = chars.peek()
        && matches!(c, '$' | '€' | '£')
    {
        currency = match c {
            '$' => "USD",
            '€' => "EUR",
            _ => "GBP",
        };
        chars.next();
        start = c.len_utf8();
    }
    let (digits, end) = digits(trimmed, start, currency.is_empty())?;
    let mut value: f64 = digits.parse().ok()?;
    let mut rest = &trimmed[end..];
    let mut written = trimmed[..end].to_owned();
    // A suffix glued to the number: 4.2M, 3bn, 12%.
    let glued: String = rest
        .chars()
        .take_while(|c| c.is_alphabetic() || *c == '%')
        .collect();
    let mut unit = currency.to_owned();
    let glued_lower = glued.to_lowercase();
    // `M` is a million (4.2M); a lower-case `m` is a million after a currency ($4.2m) and
    // metres otherwise (1,200m).
    let million = glued == "M" || (glued_lower == "m" && !currency.is_empty());
    match glued_lower.as_str() {
        "k" => value *= 1e3,
        _ if million => value *= 1e6,
        "mn" => value *= 1e6,
        "b" | "bn" => value *= 1e9,
        "%" => unit = "%".into(),
        _ => {}
    }
    if matches!(glued_lower.as_str(), "k" | "mn" | "b" | "bn" | "%") || million {
        written.push_str(&glued);
        rest = &rest[glued.len()..];
    }
    // A scale word: 10.5 million.
    let lower = rest.trim_start().to_lowercase();
    if let Some((word, scale)) = SCALES
        .iter()
        .find(|(word, _)| starts_with_word(&lower, word))
    {
        value *= scale;
        rest = take_word(rest, word, &mut written);
    }
    let lower = rest.trim_start().to_lowercase();
    let units = &vocabulary().units;
    if let Some((word, normal)) = units
        .iter()
        .find(|(word, _)| starts_with_word(&lower, word))
    {
        if !normal.is_empty() {
            unit = normal.clone();
        }
        rest = take_word(rest, word, &mut written);
    }
    Some((written.trim().to_owned(), value, unit, rest))
}

/// The digits of the number that starts at byte `start` of `trimmed` (thousands separators
/// dropped; a minus sign only without a currency; scientific notation kept), and where they
/// end.
fn digits(trimmed: &str, start: usize, no_currency: bool) -> Option<(String, usize)> {
    let mut end = start;
    let mut digits = String::new();
    let mut seen_digit = false;
    for (i, c) in trimmed[start..].char_indices() {
        if c.is_ascii_digit() {
            digits.push(c);
            seen_digit = true;
            end = start + i + 1;
        } else if c == ',' && seen_digit {
            // Thousands separator only when three digits follow.
            let after: String = trimmed[start + i + 1..].chars().take(4).collect();
            let three = after.chars().take(3).all(|c| c.is_ascii_digit())
                && after.chars().nth(3).is_none_or(|c| !c.is_ascii_digit());
            if !three {
                break;
            }
        } else if c == '.' && seen_digit {
            let next = trimmed[start + i + 1..].chars().next();
            if next.is_some_and(|c| c.is_ascii_digit()) {
                digits.push('.');
            } else {
                break;
            }
        } else if c == '-' && !seen_digit && digits.is_empty() && no_currency {
            digits.push('-');
        } else {
            break;
        }
    }
    if !seen_digit {
        return None;
    }
    // Scientific notation: "8.2e-05", "6.02E23".
    let tail = &trimmed[end..];
    if let Some(exponent) = tail.strip_prefix(['e', 'E']) {
        let sign = usize::from(exponent.starts_with(['-', '+']));
        let count = exponent[sign..]
            .chars()
            .take_while(char::is_ascii_digit)
            .count();
        let after = exponent[sign + count..].chars().next();
        if count > 0 && after.is_none_or(|c| !c.is_alphanumeric()) {
            digits.push('e');
            digits.push_str(&exponent[..sign + count]);
            end += 1 + sign + count;
        }
    }
    Some((digits, end))
}

/// Whether `lower` (text after its spaces, lower-cased) starts with the whole word `word`.
fn starts_with_word(lower: &str, word: &str) -> bool {
    lower.starts_with(word)
        && lower[word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric())
}

/// `rest` after its spaces and `word` (which it starts with), those added to `written`.
fn take_word<'a>(rest: &'a str, word: &str, written: &mut String) -> &'a str {
    let skip = rest.len() - rest.trim_start().len() + word.len();
    written.push_str(&rest[..skip]);
    &rest[skip..]
}

/// A year 1800–2100 as a word.
fn year(word: &str) -> Option<u32> {
    let digits: String = word.chars().filter(char::is_ascii_digit).collect();
    if digits.len() != 4 || word.chars().filter(|c| c.is_alphabetic()).count() > 0 {
        return None;
    }
    let year: u32 = digits.parse().ok()?;
    (1800..=2100).contains(&year).then_some(year)
}

/// The vintage a sentence states for its figures: `(2024 est.)`, `in 2024`, `as of July 2023`,
/// `2021 census`, `(2019)`; the latest when several. `YYYYMMDD`, 0 when none.
pub fn stated_date(sentence: &str) -> u32 {
    let lower = sentence.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';' | '[' | ']'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut best = 0u32;
    for (i, word) in words.iter().enumerate() {
        let Some(y) = year(word.trim_end_matches('.')) else {
            continue;
        };
        let before = i.checked_sub(1).map(|j| words[j]).unwrap_or_default();
        let after = words.get(i + 1).copied().unwrap_or_default();
        // "founded in 1999", "born in 1950": the year of an event, not of the figures.
        let event =
            i.checked_sub(2).map(|j| words[j]).is_some_and(|w| {
                Vocabulary::has(&vocabulary().event_verbs, w) || before == "since"
            }) || Vocabulary::has(&vocabulary().event_verbs, before);
        if event {
            continue;
        }
        let dated = matches!(
            before,
            "in" | "of" | "since" | "during" | "for" | "by" | "year"
        ) || matches!(
            after.trim_end_matches('.'),
            "est" | "estimate" | "census" | "data" | "figures" | "survey"
        ) || sentence.contains(&format!("({y})"))
            || sentence.contains(&format!("({y} est"))
            || MONTHS.contains(&before);
        if !dated {
            continue;
        }
        let month = MONTHS
            .iter()
            .position(|m| *m == before)
            .map_or(0, |m| u32::try_from(m).unwrap_or(0) + 1);
        let date = y * 10_000 + month * 100;
        best = best.max(date);
    }
    best
}
