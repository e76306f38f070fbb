//! Tracing and metrics shared by every Toolplane binary. Tracing: an `EnvFilter` (from `RUST_LOG`
//! when set, else the configured level), text or JSON output on stderr, and OpenTelemetry
//! export over OTLP when the standard `OTEL_*` variables are set ([`trace`]).
//!
//! Text is coloured only on a terminal and never when `NO_COLOR` is set (<https://no-color.org>),
//! so log files hold no escape codes. `TOOLPLANE_LOG_FORMAT=json` turns JSON on for every
//! binary, including those without a `--log-format` flag of their own. rmcp's own line per
//! failed request is left out by default: the edge's access log carries each request once.

use std::io::IsTerminal as _;

mod flags;
mod lines;
pub mod metrics;
pub mod redact;
mod status;
pub mod trace;

pub use flags::{LogConfig, LogFlags, LogFormat};
pub use lines::flush as flush_lines;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Directives added to the configured level unless `RUST_LOG` is set.
// PostgreSQL's notices ("relation … already exists, skipping" on every start) are not news.
const QUIET: &str =
    "rmcp::service=error,tower_http=warn,h2=warn,hyper=warn,sqlx::postgres::notice=warn";

/// Whether text logs on stderr should be coloured: a terminal, and no `NO_COLOR`.
/// Read once: it asks the terminal (an `ioctl`), and the access log asks on every request.
pub fn colour() -> bool {
    static COLOUR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COLOUR.get_or_init(|| {
        std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
    })
}

static JSON_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`init`] set up JSON logs (callers that format a hot line themselves in text mode
/// keep structured fields for JSON).
pub fn json_logs() -> bool {
    JSON_LOGS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether `TOOLPLANE_LOG_FORMAT` asks for JSON.
pub fn json_from_env() -> bool {
    std::env::var("TOOLPLANE_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"))
}

/// What [`init`] set up that must live as long as the process: with OTLP export on, dropping
/// it flushes the spans still buffered.
/// Dropping it also writes out the lines [`write_info_line_with`] still holds.
#[derive(Debug, Default)]
#[must_use = "keep it until the process ends, or buffered spans and lines are lost"]
pub struct Telemetry {
    _exporting: Option<trace::Exporting>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        lines::flush();
    }
}

/// Installs the global subscriber: logs on stderr, and OpenTelemetry spans exported over OTLP
/// as `service` when the `OTEL_*` variables ask for it ([`trace`]). Safe to call more than
/// once (later calls do nothing), so one process can host several components
/// (`toolplane up`).
pub fn init(level: &str, json: bool, service: &str) -> Telemetry {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{QUIET},{level}")));
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(colour())
        // Every line with URLs cut to their host and path (no query, no credentials).
        .with_writer(redact::Stderr);
    let json = json || json_from_env();
    let logs = if json {
        logs.json().boxed()
    } else {
        logs.boxed()
    };
    let (otel, exporting) = match trace::otlp(service) {
        Some((layer, exporting)) => (Some(layer), Some(exporting)),
        None => (None, None),
    };
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(logs)
        .with(otel)
        .try_init()
        .is_ok();
    if installed {
        JSON_LOGS.store(json, std::sync::atomic::Ordering::Relaxed);
        trace::set_exporting(exporting.is_some());
    }
    Telemetry {
        // A second call exports nothing of its own: its provider is dropped (and shut down).
        _exporting: exporting.filter(|_| installed),
    }
}

/// Resolves on Ctrl-C or SIGTERM (what orchestrators send to stop a process), for every
/// binary's graceful shutdown.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Writes one INFO line for `target` to stderr, laid out as the text log writes its lines
/// (`2026-11-26T03:04:16.008198Z  INFO target: message`), whole, in batches (lines that arrive
/// together go out in one `write(2)`, a lone line within 20 ms: see `lines`). For a line written on
/// every request (the edge's access log), where the general formatter — a visitor per field,
/// escaping per character — cost a sixth of a warm `tools/list`, and a `write(2)` of its own
/// another tenth. `message` lays the message out straight into the line, which is built in a
/// buffer this thread keeps (no allocation per line); the timestamp's date and time of day are
/// laid out once a second. The caller checks that INFO is enabled for `target`
/// (`tracing::enabled!`) and escapes what it puts in the message; JSON output keeps going
/// through `tracing` (see [`json_logs`]).
pub fn write_info_line_with(target: &str, message: impl FnOnce(&mut String)) {
    thread_local! {
        static LINE: std::cell::RefCell<LineBuffer> = std::cell::RefCell::default();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    LINE.with(|buffer| {
        // Re-entered (a `message` that logs through here): a buffer of its own.
        let Ok(mut buffer) = buffer.try_borrow_mut() else {
            let mut line = LineBuffer::default();
            line.lay_out(target, now, message);
            lines::write(line.line.as_bytes());
            return;
        };
        buffer.lay_out(target, now, message);
        lines::write(buffer.line.as_bytes());
        // A line far longer than usual does not keep its memory.
        if buffer.line.capacity() > 16 << 10 {
            buffer.line = String::new();
        }
    });
}

/// A thread's line under construction, and the second its timestamp prefix was laid out for.
#[derive(Default)]
struct LineBuffer {
    line: String,
    /// `YYYY-MM-DDTHH:MM:SS.` of `second`.
    prefix: String,
    second: Option<u64>,
}

impl LineBuffer {
    fn lay_out(
        &mut self,
        target: &str,
        now: std::time::Duration,
        message: impl FnOnce(&mut String),
    ) {
        let second = now.as_secs();
        if self.second != Some(second) {
            self.prefix.clear();
            rfc3339_micros(&mut self.prefix, std::time::Duration::from_secs(second));
            self.prefix.truncate(self.prefix.len() - "000000Z".len());
            self.second = Some(second);
        }
        let line = &mut self.line;
        line.clear();
        let colour = colour();
        if colour {
            line.push_str("\x1b[2m");
        }
        line.push_str(&self.prefix);
        push_padded(line, now.subsec_micros(), 6);
        line.push('Z');
        if colour {
            line.push_str("\x1b[0m \x1b[32m INFO\x1b[0m \x1b[2m");
            line.push_str(target);
            line.push_str("\x1b[0m\x1b[2m:\x1b[0m ");
        } else {
            line.push_str("  INFO ");
            line.push_str(target);
            line.push_str(": ");
        }
        message(line);
        line.push('\n');
    }
}

/// `value` in decimal, zero-padded to `width` digits, without the formatter.
pub fn push_padded(out: &mut String, value: u32, width: usize) {
    let mut digits = [b'0'; 10];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = at.min(digits.len().saturating_sub(width));
    // ASCII digits: pushed as one string, not a character at a time.
    out.push_str(std::str::from_utf8(&digits[start..]).unwrap_or_default());
}

/// `since_epoch` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC, microseconds).
fn rfc3339_micros(out: &mut String, since_epoch: std::time::Duration) {
    use std::fmt::Write as _;
    let secs = since_epoch.as_secs();
    // The Julian day of 1970-01-01; `time` does the calendar.
    const UNIX_EPOCH_JULIAN_DAY: i32 = 2_440_588;
    let days = i32::try_from(secs / 86_400).unwrap_or(0);
    let of_day = secs % 86_400;
    let date = time::Date::from_julian_day(UNIX_EPOCH_JULIAN_DAY.saturating_add(days))
        .unwrap_or(time::Date::MAX);
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        date.year(),
        u8::from(date.month()),
        date.day(),
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60,
        since_epoch.subsec_micros()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_microseconds() {
        let at = |secs: u64, micros: u32| {
            let mut out = String::new();
            rfc3339_micros(&mut out, std::time::Duration::new(secs, micros * 1_000));
            out
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        // 2026-11-26T03:04:16.008198Z
        assert_eq!(at(1_795_662_256, 8_198), "2026-11-26T03:04:16.008198Z");
        // A leap day and the last second of a year.
        assert_eq!(at(951_782_400, 1), "2000-02-29T00:00:00.000001Z");
        assert_eq!(at(1_735_689_599, 999_999), "2024-12-31T23:59:59.999999Z");
    }

    #[test]
    fn numbers_are_padded_without_the_formatter() {
        let padded = |value: u32, width: usize| {
            let mut out = String::new();
            push_padded(&mut out, value, width);
            out
        };
        assert_eq!(padded(8_198, 6), "008198");
        assert_eq!(padded(0, 6), "000000");
        assert_eq!(padded(999_999, 6), "999999");
        assert_eq!(padded(0, 0), "0");
        assert_eq!(padded(503, 0), "503");
        assert_eq!(padded(u32::MAX, 3), "4294967295");
    }

    #[test]
    fn a_line_reuses_the_second_it_laid_out_and_lays_out_the_next() {
        let mut buffer = LineBuffer::default();
        let at = |secs: u64, micros: u32| std::time::Duration::new(secs, micros * 1_000);
        buffer.lay_out("edge", at(1_795_662_256, 8_198), |l| l.push_str("one"));
        let first = buffer.line.clone();
        buffer.lay_out("edge", at(1_795_662_256, 999_999), |l| l.push_str("two"));
        let second = buffer.line.clone();
        buffer.lay_out("edge", at(1_795_662_257, 1), |l| l.push_str("three"));
        let third = buffer.line.clone();
        // Colour depends on the terminal the tests run on: compare what follows the codes.
        let plain = |line: &str| {
            line.replace("\x1b[2m", "")
                .replace("\x1b[0m", "")
                .replace("\x1b[32m", "")
        };
        assert!(
            plain(&first).starts_with("2026-11-26T03:04:16.008198Z  INFO edge"),
            "{first}"
        );
        assert!(plain(&first).ends_with(": one\n"), "{first}");
        assert!(
            plain(&second).starts_with("2026-11-26T03:04:16.999999Z"),
            "{second}"
        );
        assert!(
            plain(&third).starts_with("2026-11-26T03:04:17.000001Z"),
            "{third}"
        );
        assert!(plain(&third).ends_with(": three\n"), "{third}");
    }
}
