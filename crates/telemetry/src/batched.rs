//! Log lines written to stderr in batches: lines below WARN go into a buffer that a thread of
//! its own writes out every [`FLUSH_EVERY`] (or at once when it passes [`HIGH_WATER`]); a WARN
//! or ERROR line writes the buffer and itself at once, in order, so nothing that explains a
//! failure waits. A busy edge logs one access line per request: one `write(2)` per line cost
//! about as much as the rest of a warm `tools/list`. Dropping [`crate::Telemetry`] (the end of
//! `main`) writes what is left; a process killed outright loses at most the last
//! [`FLUSH_EVERY`] of INFO lines.

use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How long an INFO line may wait in the buffer.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(20);

/// A buffer this full is written at once, by the request that filled it.
const HIGH_WATER: usize = 64 * 1024;

/// The shared buffer (a `MakeWriter` for the fmt layer).
#[derive(Debug, Clone)]
pub(crate) struct Batched {
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl Batched {
    /// A buffer in front of stderr and the thread that empties it (which ends with the
    /// buffer).
    pub(crate) fn stderr() -> Batched {
        let buffer = Arc::new(Mutex::new(Vec::with_capacity(HIGH_WATER)));
        let weak: Weak<Mutex<Vec<u8>>> = Arc::downgrade(&buffer);
        let _ = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    let Some(buffer) = weak.upgrade() else {
                        return;
                    };
                    write_out(&buffer, &[]);
                }
            });
        Batched { buffer }
    }

    /// Writes out what is buffered.
    pub(crate) fn flush(&self) {
        write_out(&self.buffer, &[]);
    }
}

/// Writes the buffer, then `line`, to stderr. The buffer is swapped out under the lock and
/// written without it, so requests logging meanwhile do not wait for the write.
fn write_out(buffer: &Mutex<Vec<u8>>, line: &[u8]) {
    let mut stderr = std::io::stderr().lock();
    let pending = {
        let mut buffer = buffer.lock().unwrap_or_else(PoisonError::into_inner);
        if buffer.is_empty() {
            Vec::new()
        } else {
            std::mem::replace(&mut *buffer, Vec::with_capacity(HIGH_WATER))
        }
    };
    if !pending.is_empty() {
        let _ = stderr.write_all(&pending);
    }
    if !line.is_empty() {
        let _ = stderr.write_all(line);
    }
}

/// The writer of one line.
#[derive(Debug)]
pub(crate) struct Line<'a> {
    buffer: &'a Mutex<Vec<u8>>,
    /// WARN and ERROR: written at once.
    urgent: bool,
}

impl std::io::Write for Line<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.urgent {
            write_out(self.buffer, bytes);
            return Ok(bytes.len());
        }
        let full = {
            let mut buffer = self.buffer.lock().unwrap_or_else(PoisonError::into_inner);
            buffer.extend_from_slice(bytes);
            buffer.len() >= HIGH_WATER
        };
        if full {
            write_out(self.buffer, &[]);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Batched {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line {
            buffer: &self.buffer,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line<'a> {
        Line {
            buffer: &self.buffer,
            urgent: *meta.level() <= tracing::Level::WARN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lines_wait_and_a_warning_takes_them_along_in_order() {
        // A buffer without its thread: nothing is written until asked.
        let batched = Batched {
            buffer: Arc::new(Mutex::new(Vec::new())),
        };
        let info = tracing::Level::INFO;
        let mut line = Line {
            buffer: &batched.buffer,
            urgent: info <= tracing::Level::WARN,
        };
        line.write_all(b"first\n").unwrap_or_default();
        line.write_all(b"second\n").unwrap_or_default();
        assert_eq!(
            batched.buffer.lock().map(|b| b.clone()).unwrap_or_default(),
            b"first\nsecond\n"
        );
        let mut warning = Line {
            buffer: &batched.buffer,
            urgent: tracing::Level::WARN <= tracing::Level::WARN,
        };
        warning.write_all(b"warned\n").unwrap_or_default();
        // The warning wrote the buffered lines before itself and left nothing behind.
        assert!(batched.buffer.lock().map(|b| b.is_empty()).unwrap_or(false));
        // A full buffer is written by the line that fills it.
        let mut big = Line {
            buffer: &batched.buffer,
            urgent: false,
        };
        big.write_all(&vec![b'x'; HIGH_WATER]).unwrap_or_default();
        assert!(batched.buffer.lock().map(|b| b.is_empty()).unwrap_or(false));
    }
}
