//! Secrets out of logs: URLs inside a message (an error from an HTTP client names the URL it
//! failed on) lose their user information, query and fragment, where credentials travel
//! (`https://host/mcp?token=…`, `https://user:pass@host/`).

use std::borrow::Cow;

/// `text` with every `http://` or `https://` URL in it cut to its scheme, host, port and path;
/// what was removed is marked `…`.
pub fn urls(text: &str) -> Cow<'_, str> {
    if !text.contains("http://") && !text.contains("https://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_scheme(rest) {
        out.push_str(&rest[..start]);
        let url_text = &rest[start..];
        let end = url_text
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '>' | ',' | ';' | '\\')
            })
            .unwrap_or(url_text.len());
        out.push_str(&clean(&url_text[..end]));
        rest = &url_text[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn find_scheme(text: &str) -> Option<usize> {
    match (text.find("http://"), text.find("https://")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One URL without user information, query or fragment.
fn clean(url: &str) -> String {
    let (scheme, after) = url.split_once("://").unwrap_or(("", url));
    let (authority, path) = match after.find(['/', '?', '#']) {
        Some(i) => after.split_at(i),
        None => (after, ""),
    };
    let (authority, had_user) = match authority.rsplit_once('@') {
        Some((_, host)) => (host, true),
        None => (authority, false),
    };
    let cut = path.find(['?', '#']);
    let path = cut.map_or(path, |i| &path[..i]);
    let mut out = format!("{scheme}://");
    if had_user {
        out.push_str("…@");
    }
    out.push_str(authority);
    out.push_str(path);
    if cut.is_some() {
        out.push_str("?…");
    }
    out
}

/// Where the log formatter writes: standard error, with [`urls`] applied to every line (a
/// library's error may name the URL it failed on, query and all).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

/// One write of a formatted line ([`Stderr`]).
#[derive(Debug)]
pub struct RedactingWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = RedactingWriter;

    fn make_writer(&'a self) -> RedactingWriter {
        RedactingWriter
    }
}

impl std::io::Write for RedactingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut stderr = std::io::stderr().lock();
        if memchr::memmem::find(buf, b"://").is_none() {
            stderr.write_all(buf)?;
        } else {
            let text = String::from_utf8_lossy(buf);
            stderr.write_all(urls(&text).as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_urls_never_reach_a_log() {
        let message = "error sending request for url (http://127.0.0.1:9/mcp?token=s3cret&x=1): connection refused; retry https://user:pw@host.example/a#frag";
        let clean = urls(message);
        assert!(
            !clean.contains("s3cret") && !clean.contains("pw") && !clean.contains("frag"),
            "{clean}"
        );
        assert_eq!(
            clean,
            "error sending request for url (http://127.0.0.1:9/mcp?…): connection refused; retry https://…@host.example/a?…"
        );
        assert_eq!(urls("no url here"), "no url here");
        // Inside a JSON string the escaped quote stays.
        assert_eq!(
            urls(r#"{"error":"url: \"http://h/p?token=x\" refused"}"#),
            r#"{"error":"url: \"http://h/p?…\" refused"}"#
        );
        assert_eq!(urls("http://h/p"), "http://h/p");
    }
}
