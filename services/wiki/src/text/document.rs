//! A source as written, read for its structure before its sentences: HTML reduced to text
//! (paragraphs, headings, tables as rows), front matter, an e-mail's headers and quoted
//! history, a dateline. What comes out: the text to analyse, the date the document speaks as
//! of, the subjects it declares and its title.
//!
//! The as-of date, first found wins: the caller's `as_of`; front matter (`date`, `as_of`,
//! `published`, `updated`); an e-mail's `Date:` header; an HTML page's date `<meta>`; a
//! dateline among the first lines (`LISBON, 1 July 2025 —`, `Published 2025-03-01`,
//! `Date: 2026-04-06`, a line that is a date). Dates a document mentions elsewhere (a renewal,
//! a founding year) are values, never its date.

use super::dates;

/// A source read for its structure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prepared {
    /// The text to analyse: no markup, no front matter, no e-mail headers, no quoted mail.
    pub text: String,
    /// The date the document speaks as of (`YYYYMMDD`).
    pub as_of: Option<u32>,
    /// Where the as-of date came from (`argument`, `front matter`, `e-mail`, `html`, `dateline`).
    pub as_of_from: Option<&'static str>,
    /// The subjects it declares (the caller's, else its front matter's).
    pub subjects: Vec<String>,
    /// Its title (front matter, `<title>`, an e-mail's subject), if it has one.
    pub title: Option<String>,
}

/// Front matter keys that give the document's date.
const DATE_KEYS: &[&str] = &["as_of", "date", "published", "updated", "modified"];
/// Front matter keys that name what the document is about (the vocabulary adds its own,
/// such as `client`).
const SUBJECT_KEYS: &[&str] = &["subject", "subjects", "about", "entity"];
/// Labels of a dateline field.
const DATE_LABELS: &[&str] = &["date", "published", "updated", "posted", "as of", "dated"];
/// Lines a dateline may be among.
const DATELINE_LINES: usize = 5;
/// Most words of an unlabelled dateline, its date included.
const DATELINE_WORDS: usize = 9;

/// Reads `text` for its structure; `as_of` and `subjects` are the caller's, when given.
pub fn prepare(text: &str, as_of: Option<u32>, subjects: &[String]) -> Prepared {
    let mut out = Prepared {
        as_of,
        as_of_from: as_of.map(|_| "argument"),
        subjects: subjects.to_vec(),
        ..Prepared::default()
    };
    let mut body = text.replace("\r\n", "\n");
    if looks_like_html(&body) {
        let page = html_to_text(&body);
        out.title = page.title;
        set_date(&mut out, page.date, "html");
        body = page.text;
    }
    if let Some((fields, rest)) = front_matter(&body) {
        for (key, value) in &fields {
            let key = key.to_lowercase();
            if DATE_KEYS.contains(&key.as_str()) {
                set_date(&mut out, dates::find(value), "front matter");
            } else if (SUBJECT_KEYS.contains(&key.as_str())
                || crate::vocabulary::Vocabulary::has(
                    &crate::vocabulary::vocabulary().subject_fields,
                    &key,
                ))
                && out.subjects.is_empty()
            {
                out.subjects = list(value);
            } else if key == "title" && out.title.is_none() {
                out.title = Some(unquote(value).to_owned());
            }
        }
        body = rest;
    }
    let mut author: Option<String> = None;
    if let Some((headers, rest)) = mail_headers(&body) {
        for (name, value) in &headers {
            match name.to_lowercase().as_str() {
                "date" | "sent" => set_date(&mut out, dates::find(value), "e-mail"),
                "subject" if out.title.is_none() => out.title = Some(value.clone()),
                "from" => author = sender(value),
                _ => {}
            }
        }
        body = rest;
    }
    body = without_quoted_mail(&body);
    // In a message, "I am" is its author.
    if let Some(author) = author {
        body = first_person(&body, &author);
    }
    body = without_rules(&body);
    if out.as_of.is_none() {
        set_date(&mut out, dateline(&body), "dateline");
    }
    out.text = body.trim().to_owned();
    out
}

fn set_date(out: &mut Prepared, date: Option<u32>, from: &'static str) {
    if out.as_of.is_none()
        && let Some(date) = date
    {
        out.as_of = Some(date);
        out.as_of_from = Some(from);
    }
}

fn unquote(value: &str) -> &str {
    value.trim().trim_matches(|c| c == '"' || c == '\'')
}

/// `a, b` or `[a, "b"]` as names.
fn list(value: &str) -> Vec<String> {
    value
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(unquote)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `---` / `key: value` lines / `---` at the very start.
fn front_matter(text: &str) -> Option<(Vec<(String, String)>, String)> {
    let rest = text.trim_start().strip_prefix("---\n")?;
    let end = rest.find("\n---")?;
    let mut fields = Vec::new();
    for line in rest[..end].lines() {
        let (key, value) = line.split_once(':')?;
        fields.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    let after = &rest[end + 4..];
    let after = after.split_once('\n').map_or("", |(_, tail)| tail);
    Some((fields, after.to_owned()))
}

/// An e-mail's header block: two or more `Name: value` lines at the top, `From` or `Date`
/// among them, ended by a blank line.
fn mail_headers(text: &str) -> Option<(Vec<(String, String)>, String)> {
    const NAMES: &[&str] = &["from", "to", "cc", "date", "sent", "subject", "reply-to"];
    let trimmed = text.trim_start();
    let mut headers = Vec::new();
    let mut consumed = 0;
    for line in trimmed.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare.is_empty() {
            consumed += line.len();
            break;
        }
        let (name, value) = bare.split_once(':')?;
        if !NAMES.contains(&name.trim().to_lowercase().as_str()) {
            return None;
        }
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
        consumed += line.len();
    }
    let named = |n: &str| headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(n));
    (headers.len() >= 2 && (named("from") || named("date")))
        .then(|| (headers, trimmed[consumed..].to_owned()))
}

/// The display name of a `From:` value (`Ann Lee <ann@example.com>` → `Ann Lee`).
fn sender(value: &str) -> Option<String> {
    let name = value
        .split('<')
        .next()
        .unwrap_or_default()
        .trim()
        .trim_matches('"')
        .trim();
    (name.split_whitespace().count() >= 2 && !name.contains('@')).then(|| name.to_owned())
}

/// "I am" and "I'm" as the author's name ("Ann Lee is").
fn first_person(text: &str, author: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut line = line.to_owned();
        for (from, to) in [("I am ", "is "), ("I'm ", "is "), ("I’m ", "is ")] {
            let mut rebuilt = String::with_capacity(line.len());
            let mut rest = line.as_str();
            while let Some(at) = rest.find(from) {
                let starts_word = rest[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric());
                rebuilt.push_str(&rest[..at]);
                if starts_word {
                    rebuilt.push_str(author);
                    rebuilt.push(' ');
                    rebuilt.push_str(to);
                } else {
                    rebuilt.push_str(from);
                }
                rest = &rest[at + from.len()..];
            }
            rebuilt.push_str(rest);
            line = rebuilt;
        }
        out.push_str(&line);
    }
    out
}

/// Quoted history (`> …` lines and the `On …, X wrote:` line before them) is older text:
/// it is not what this message says.
fn without_quoted_mail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let quoted = line.trim_start().starts_with('>');
        let introduces_quote = line.trim_end().ends_with("wrote:")
            && lines[i + 1..]
                .iter()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.trim_start().starts_with('>'));
        if !quoted && !introduces_quote {
            kept.push(*line);
        }
    }
    kept.join("\n")
}

/// Lines that only draw (a heading's underline `=====`, a rule `---`, `***`) are not text.
fn without_rules(text: &str) -> String {
    text.lines()
        .filter(|line| {
            let t = line.trim();
            !(t.len() >= 3
                && t.chars()
                    .all(|c| matches!(c, '=' | '-' | '~' | '^' | '*' | '_' | '#' | '+')))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A date among the first lines that dates the document: a line that is a date, a
/// `Date:`-like field, or a dateline (`PLACE, date —`, `Note, 20 May 2026.`).
fn dateline(text: &str) -> Option<u32> {
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(DATELINE_LINES)
    {
        if line.chars().count() > 200 && !line.contains(" — ") {
            continue;
        }
        let head = line.split(" — ").next().unwrap_or(line);
        let labelled = match head.split_once(':') {
            Some((label, _)) if DATE_LABELS.contains(&label.trim().to_lowercase().as_str()) => true,
            Some(_) => continue,
            None => false,
        };
        // Unlabelled, the line must be little more than the date ("Note, 20 May 2026.",
        // "Planning call with Acme, 12 March 2026"), not a sentence that mentions one.
        if !labelled && head.split_whitespace().count() > DATELINE_WORDS {
            continue;
        }
        if let Some(date) = dates::find(head) {
            return Some(date);
        }
    }
    None
}

fn looks_like_html(text: &str) -> bool {
    let start = text.trim_start();
    start.starts_with('<')
        && [
            "<html",
            "<body",
            "<p>",
            "<p ",
            "<div",
            "<table",
            "<h1",
            "<!doctype",
        ]
        .iter()
        .any(|tag| start.to_lowercase().contains(tag))
}

/// An HTML page as text.
#[derive(Debug, Default)]
struct Page {
    text: String,
    title: Option<String>,
    date: Option<u32>,
}

/// The value of attribute `name` in a tag's text.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    // ASCII lowering keeps byte offsets, so `at` indexes `tag` too.
    let lower = tag.to_ascii_lowercase();
    let at = lower.find(&format!("{name}="))? + name.len() + 1;
    let rest = &tag[at..];
    let quote = rest.chars().next()?;
    if quote == '"' || quote == '\'' {
        let value = &rest[1..];
        value.find(quote).map(|end| &value[..end])
    } else {
        rest.split(|c: char| c.is_whitespace() || c == '>').next()
    }
}

/// Metadata names that carry a page's publication date.
const DATE_META: &[&str] = &[
    "date",
    "dc.date",
    "dcterms.date",
    "dcterms.modified",
    "article:published_time",
    "article:modified_time",
    "datepublished",
    "last-modified",
];

/// The text an HTML page reads as, laid out: whitespace collapsed per line, a separator row
/// under a table's header row (a first row of header cells), at most one blank line.
fn layout(text: &str) -> String {
    // Tables: a first row of header cells is followed by a separator row, so Markdown
    // readers see a table with a header; a table whose first row holds data has none.
    let mut lines: Vec<String> = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let header = line.contains(HEADER_ROW);
        let line = line
            .replace(HEADER_ROW, "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let row = line.starts_with('|');
        if row && !in_table && header {
            let cells = line.matches('|').count().saturating_sub(1);
            lines.push(line);
            lines.push(format!("|{}", "---|".repeat(cells.max(1))));
        } else {
            lines.push(line);
        }
        in_table = row;
    }
    let mut text = lines.join("\n");
    while text.contains("\n\n\n") {
        text = text.replace("\n\n\n", "\n\n");
    }
    text.trim().to_owned()
}

/// The date a `<meta>` of [`DATE_META`] or a `<time datetime>` gives.
fn tag_date(name: &str, tag: &str, closing: bool) -> Option<u32> {
    match name {
        "meta" => {
            let key = attribute(tag, "name")
                .or_else(|| attribute(tag, "property"))
                .or_else(|| attribute(tag, "itemprop"))
                .unwrap_or_default()
                .to_lowercase();
            if !DATE_META.contains(&key.as_str()) {
                return None;
            }
            attribute(tag, "content").and_then(dates::find)
        }
        "time" if !closing => attribute(tag, "datetime").and_then(dates::find),
        _ => None,
    }
}

fn html_to_text(source: &str) -> Page {
    let mut page = Page::default();
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    let mut skipping: Option<String> = None;
    let mut in_title = false;
    let mut title = String::new();
    // Whether the row being read has a data cell (a row of header cells heads its table).
    let mut row_has_data = false;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        if skipping.is_none() {
            if in_title {
                title.push_str(text);
            } else {
                out.push_str(text);
            }
        }
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .collect::<String>()
            .to_lowercase();
        let closing = tag.starts_with('/');
        if let Some(skipped) = &skipping {
            if closing && &name == skipped {
                skipping = None;
            }
            continue;
        }
        match name.as_str() {
            "script" | "style" | "noscript" | "template" if !closing => skipping = Some(name),
            "title" => in_title = !closing,
            "meta" | "time" if page.date.is_none() => page.date = tag_date(&name, tag, closing),
            "tr" if !closing => {
                out.push_str("\n|");
                row_has_data = false;
            }
            "tr" if !row_has_data => out.push(HEADER_ROW),
            "td" | "th" if closing => out.push_str(" |"),
            "td" => {
                row_has_data = true;
                out.push(' ');
            }
            "th" => out.push(' '),
            "table" => out.push('\n'),
            "br" => out.push('\n'),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if !closing => {
                let level = name[1..].parse::<usize>().unwrap_or(1);
                out.push_str("\n\n");
                out.push_str(&"#".repeat(level));
                out.push(' ');
            }
            "li" if !closing => out.push_str("\n- "),
            "p" | "div" | "section" | "article" | "header" | "footer" | "ul" | "ol" | "h1"
            | "h2" | "h3" | "h4" | "h5" | "h6" | "blockquote" | "main" | "aside" | "nav" => {
                out.push_str("\n\n");
            }
            _ => {}
        }
    }
    if skipping.is_none() {
        out.push_str(rest);
    }
    let title = unescape(title.trim());
    page.title = (!title.is_empty()).then_some(title);
    page.text = layout(&unescape(&out));
    page
}

/// Marks a table row made of header cells while the page is read.
const HEADER_ROW: char = '\u{1}';

/// HTML character references.
fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest
            .char_indices()
            .take(12)
            .find(|(_, c)| *c == ';')
            .map(|(i, _)| i)
        else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" | "#39" | "rsquo" | "lsquo" => Some('\''),
            "nbsp" => Some(' '),
            "ldquo" | "rdquo" => Some('"'),
            "mdash" => Some('—'),
            "ndash" => Some('–'),
            _ => entity
                .strip_prefix("#x")
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_text_with_its_title_date_and_tables() {
        let page = prepare(
            "<html><head><title>About X &amp; Co</title><meta name=\"date\" content=\"2026-05-02\"><style>p{}</style></head>\
             <body><h1>About</h1><p>X is no longer in Seattle.</p><table><tr><th>Channel</th><th>Spend</th></tr>\
             <tr><td>Meta</td><td>$86,000</td></tr></table><script>var a = '<p>';</script></body></html>",
            None,
            &[],
        );
        assert_eq!(page.title.as_deref(), Some("About X & Co"));
        assert_eq!(page.as_of, Some(20_260_502));
        assert_eq!(page.as_of_from, Some("html"));
        assert!(
            page.text.contains("# About\n\nX is no longer in Seattle."),
            "{}",
            page.text
        );
        assert!(
            page.text
                .contains("| Channel | Spend |\n|---|---|\n| Meta | $86,000 |"),
            "{}",
            page.text
        );
        assert!(
            !page.text.contains('<') && !page.text.contains("var a"),
            "{}",
            page.text
        );
    }

    #[test]
    fn front_matter_and_mail_headers_date_the_document_and_quotes_are_dropped() {
        let brief = prepare(
            "---\ntitle: Acme brief\ndate: 2026-01-15\nclient: Acme Corp\n---\n\n# Acme\n\n- Contract renewal: 2026-09-30\n",
            None,
            &[],
        );
        assert_eq!(brief.as_of, Some(20_260_115));
        assert_eq!(brief.subjects, ["Acme Corp"]);
        assert_eq!(brief.title.as_deref(), Some("Acme brief"));
        assert!(brief.text.starts_with("# Acme"), "{}", brief.text);
        let mail = prepare(
            "From: Ann Lee <ann@example.com>\nTo: Tom\nDate: Tue, 14 Apr 2026 09:12:00 +0000\nSubject: Re: contact\n\n\
             I am now the primary contact.\n\nOn Mon, 2 Mar 2026, Bob wrote:\n> I remain the primary contact.\n",
            None,
            &[],
        );
        assert_eq!(mail.as_of, Some(20_260_414));
        assert_eq!(mail.as_of_from, Some("e-mail"));
        assert_eq!(mail.text, "Ann Lee is now the primary contact.");
        // The caller's date wins; a renewal date in a field is never the document's.
        let given = prepare("- Contract renewal: 2026-09-30\n", Some(20_260_101), &[]);
        assert_eq!(given.as_of, Some(20_260_101));
        assert_eq!(
            prepare("- Contract renewal: 2026-09-30\n", None, &[]).as_of,
            None
        );
    }

    #[test]
    fn a_dateline_dates_the_document_but_a_mentioned_date_does_not() {
        assert_eq!(
            prepare("LISBON, 1 July 2025 — The economy grew.", None, &[]).as_of,
            Some(20_250_701)
        );
        assert_eq!(
            prepare("Title\n=====\n\n*July 3, 2023*\n\nFixes.", None, &[]).as_of,
            Some(20_230_703)
        );
        assert_eq!(
            prepare(
                "The company was founded on 3 May 1999 in Cleveland, Ohio.",
                None,
                &[]
            )
            .as_of,
            None
        );
        assert_eq!(
            prepare(
                "Planning call with Acme Corp, 12 March 2026\n\nTom: hi",
                None,
                &[]
            )
            .as_of,
            Some(20_260_312)
        );
        assert_eq!(prepare("Renewal: 2026-09-30", None, &[]).as_of, None);
    }
}
