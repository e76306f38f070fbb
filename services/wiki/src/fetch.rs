//! Fetching a URL source, with limits and an SSRF guard.
//!
//! - `https` only (plain `http` when configured, for tests and private mirrors);
//! - every address a host name resolves to is checked at connection time (so DNS rebinding
//!   cannot slip past a check done earlier): loopback, private, link-local, unique-local,
//!   CGNAT, multicast, unspecified and documentation ranges are refused unless configured;
//! - at most `max_redirects` redirects, each re-checked; a total time limit; a body limit;
//! - HTML is reduced to text (scripts and styles dropped), the `<title>` kept as the label.

use std::sync::Arc;
use std::time::Duration;

pub use tp_net::egress::is_public;
use tp_net::egress::{GuardedResolver, literal_refusal};

/// Fetch settings.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// Allow loopback, private and link-local addresses (tests; never in production).
    pub allow_private: bool,
    /// Allow `http://` URLs.
    pub allow_http: bool,
    /// Largest body.
    pub max_bytes: usize,
    /// Whole-fetch time limit.
    pub timeout: Duration,
    /// Most redirects followed.
    pub max_redirects: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            allow_private: false,
            allow_http: false,
            max_bytes: 5 * 1024 * 1024,
            timeout: Duration::from_secs(20),
            max_redirects: 3,
        }
    }
}

/// A fetched document.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Text content.
    pub text: String,
    /// `<title>`, if HTML had one.
    pub title: Option<String>,
}

/// Why fetching a source URL failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Refused before connecting.
    #[error("refused: {0}")]
    Refused(String),
    /// The fetch failed.
    #[error("fetch failed: {0}")]
    Failed(String),
}

/// Fetches URL sources.
#[derive(Debug, Clone)]
pub struct Fetcher {
    config: FetchConfig,
    client: reqwest::Client,
}

impl Fetcher {
    /// A fetcher with `config`.
    pub fn new(config: FetchConfig) -> Result<Fetcher, FetchError> {
        let max_redirects = config.max_redirects;
        let allow_private = config.allow_private;
        let allow_http = config.allow_http;
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver { allow_private }))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= max_redirects {
                    return attempt.error(format!("more than {max_redirects} redirects"));
                }
                let url = attempt.url();
                if url.scheme() != "https" && !(allow_http && url.scheme() == "http") {
                    return attempt.error("redirect to a non-https URL");
                }
                if let Some(reason) = literal_refusal(url, allow_private) {
                    return attempt.error(reason);
                }
                attempt.follow()
            }))
            .timeout(config.timeout)
            .user_agent("toolplane-wiki/0.1")
            .build()
            .map_err(|e| FetchError::Failed(e.to_string()))?;
        Ok(Fetcher { config, client })
    }

    /// Fetches `url` as text.
    pub async fn fetch(&self, url: &str) -> Result<Fetched, FetchError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| FetchError::Refused(format!("{url:?} is not a URL: {e}")))?;
        if parsed.scheme() != "https" && !(self.config.allow_http && parsed.scheme() == "http") {
            return Err(FetchError::Refused(format!(
                "only https URLs are fetched (got {})",
                parsed.scheme()
            )));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(FetchError::Refused(
                "URLs with credentials are not fetched".into(),
            ));
        }
        if let Some(reason) = literal_refusal(&parsed, self.config.allow_private) {
            return Err(FetchError::Refused(reason));
        }
        let mut response = self
            .client
            .get(parsed)
            .send()
            .await
            .map_err(|e| FetchError::Failed(error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(FetchError::Failed(format!("HTTP {}", response.status())));
        }
        let html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("html"));
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| FetchError::Failed(error_chain(&e)))?
        {
            if body.len() + chunk.len() > self.config.max_bytes {
                return Err(FetchError::Failed(format!(
                    "the document is over {} bytes",
                    self.config.max_bytes
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        Ok(if html {
            from_html(&text)
        } else {
            Fetched { text, title: None }
        })
    }
}

impl Fetcher {
    /// POSTs `body` as JSON to `url` under the same rules as fetching (scheme, addresses,
    /// redirects, time); returns the HTTP status.
    pub async fn post_json(&self, url: &str, body: &serde_json::Value) -> Result<u16, FetchError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| FetchError::Refused(format!("{url:?} is not a URL: {e}")))?;
        if parsed.scheme() != "https" && !(self.config.allow_http && parsed.scheme() == "http") {
            return Err(FetchError::Refused(format!(
                "only https webhooks are called (got {})",
                parsed.scheme()
            )));
        }
        if let Some(reason) = literal_refusal(&parsed, self.config.allow_private) {
            return Err(FetchError::Refused(reason));
        }
        let response = self
            .client
            .post(parsed)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default())
            .send()
            .await
            .map_err(|e| FetchError::Failed(error_chain(&e)))?;
        Ok(response.status().as_u16())
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    message
}

/// Text and title of an HTML page.
pub fn from_html(html: &str) -> Fetched {
    // ASCII lower case keeps every byte where it was, so offsets found in `lower` slice `html`
    // on the same boundaries (full Unicode lower case changes lengths: `İ`, `K`).
    let lower = html.to_ascii_lowercase();
    let title = lower.find("<title").and_then(|start| {
        let open_end = lower[start..].find('>')? + start + 1;
        let close = lower[open_end..].find("</title>")? + open_end;
        Some(decode_entities(html[open_end..close].trim()))
    });
    let mut text = String::new();
    let mut i = 0;
    let bytes = html.as_bytes();
    while i < html.len() {
        if bytes[i] == b'<' {
            let rest = &lower[i..];
            let skip_to = ["<script", "<style", "<head"]
                .iter()
                .find(|t| rest.starts_with(**t))
                .map(|t| format!("</{}>", &t[1..]));
            let end = match skip_to {
                Some(close) => rest.find(&close).map(|e| i + e + close.len()),
                None => rest.find('>').map(|e| i + e + 1),
            };
            let tag = &rest[..rest.find('>').unwrap_or(0).min(rest.len())];
            if [
                "<p", "<br", "<div", "<h1", "<h2", "<h3", "<li", "</p", "</div", "</h",
            ]
            .iter()
            .any(|t| tag.starts_with(t))
            {
                text.push_str("\n\n");
            }
            i = end.unwrap_or(html.len());
        } else {
            let next = html[i..].find('<').map_or(html.len(), |n| i + n);
            text.push_str(&html[i..next]);
            i = next;
        }
    }
    let text = decode_entities(&text);
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    Fetched {
        text: paragraphs.join("\n\n"),
        title,
    }
}

fn decode_entities(text: &str) -> String {
    text.replace("&nbsp;", " ")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

impl tp_registry::HasErrorCode for FetchError {
    fn code(&self) -> tp_registry::ErrorCode {
        match self {
            // A URL the wiki will not fetch (private address, bad scheme): the caller's input.
            FetchError::Refused(_) => tp_registry::ErrorCode::InvalidArgument,
            FetchError::Failed(_) => tp_registry::ErrorCode::FailedPrecondition,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_that_changes_length_when_lowercased_does_not_panic() {
        for html in [
            "<html><head><title>İstanbul İİİ</title></head><body><p>İzmir</p><p>K Kelvin</p></body></html>",
            "İ<TITLE>K</TITLE><p>x</p>",
            "<p>\u{212A}\u{130}<script>ſ</script>İ</p>",
            "<title>İ",
        ] {
            let page = from_html(html);
            assert!(!page.text.contains('<'), "{html}: {}", page.text);
        }
        let page = from_html("<head><title>İstanbul</title></head><p>İzmir Kelvin</p>");
        assert_eq!(page.title.as_deref(), Some("İstanbul"));
        assert_eq!(page.text, "İzmir Kelvin");
    }

    #[test]
    fn html_becomes_text() {
        let page = from_html(
            "<html><head><title>Q3 &amp; more</title><style>x{}</style></head><body><h1>Memo</h1><p>The board met.</p><script>evil()</script><p>It agreed.</p></body></html>",
        );
        assert_eq!(page.title.as_deref(), Some("Q3 & more"));
        assert_eq!(page.text, "Memo\n\nThe board met.\n\nIt agreed.");
    }

    #[tokio::test]
    async fn refused_before_connecting() {
        let fetcher = Fetcher::new(FetchConfig::default()).unwrap();
        for url in [
            "http://example.com/",
            "https://127.0.0.1/",
            "https://[::1]/",
            "https://169.254.169.254/latest",
            "https://user:pw@example.com/",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(
                matches!(fetcher.fetch(url).await, Err(FetchError::Refused(_))),
                "{url}"
            );
        }
        // A name that resolves to loopback is refused at connection time.
        let error = fetcher.fetch("https://localhost:1/").await.unwrap_err();
        assert!(error.to_string().contains("non-public"), "{error}");
    }
}
