//! Lines for stderr, written in batches: a caller appends its line to a buffer and goes on;
//! the buffer goes out in one `write(2)` when it holds [`BATCH`] bytes (written by the caller
//! that filled it) or every [`INTERVAL`] (by a thread of its own that otherwise sleeps: no
//! wake-up per line). A line is never split or interleaved with another, and batches go out
//! in order. Under load a line per request (the edge's access log) no longer costs each
//! request a system call; a line waits at most [`INTERVAL`] when the process is idle.
//!
//! Nothing is dropped: when stderr blocks (a pipe nobody reads), callers that fill the
//! buffer wait for the write like the line writer does, so memory stays bounded and the
//! slowness is felt where it comes from. [`flush`] writes what is buffered (the process's
//! `Telemetry` guard calls it when it is dropped at exit).

use std::io::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Bytes buffered past which the caller writes the batch.
const BATCH: usize = 64 << 10;
/// How long a line may wait when few arrive.
const INTERVAL: Duration = Duration::from_millis(20);

struct Lines {
    /// Lines not yet taken for writing.
    pending: Mutex<Vec<u8>>,
    /// The batch being written (held while it is: batches go out in order).
    out: Mutex<Vec<u8>>,
}

fn lines() -> &'static Lines {
    static LINES: OnceLock<&'static Lines> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines: &'static Lines = Box::leak(Box::new(Lines {
            pending: Mutex::default(),
            out: Mutex::default(),
        }));
        // Without the thread, lines still go out when a batch fills and at exit.
        let _ = std::thread::Builder::new()
            .name("tp-log-lines".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(INTERVAL);
                    drain(lines);
                }
            });
        lines
    })
}

/// Writes everything buffered, after any batch being written.
fn drain(lines: &Lines) {
    let mut out = lines.out.lock().unwrap_or_else(|e| e.into_inner());
    {
        let mut pending = lines.pending.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::swap(&mut *pending, &mut *out);
    }
    if !out.is_empty() {
        let _ = std::io::stderr().write_all(&out);
        out.clear();
    }
}

/// Queues `line` (whole lines, newline included) for stderr.
pub(crate) fn write(line: &[u8]) {
    let lines = lines();
    let full = {
        let mut pending = lines.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.extend_from_slice(line);
        pending.len() >= BATCH
    };
    if full {
        drain(lines);
    }
}

/// Writes every queued line now.
pub fn flush() {
    drain(lines());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_wait_for_a_batch_or_a_flush_and_none_is_lost() {
        let lines = lines();
        // A line waits (the thread writes at most every INTERVAL).
        write(b"lines test: one\n");
        // A full batch goes out by the caller that filled it.
        let line = [b'x'; 1023];
        for _ in 0..(BATCH / 1024 + 1) {
            write(&line);
            write(b"\n");
        }
        assert!(
            lines.pending.lock().unwrap().len() < BATCH,
            "a full batch is written at once"
        );
        write(b"lines test: last\n");
        flush();
        assert!(lines.pending.lock().unwrap().is_empty());
        assert!(lines.out.lock().unwrap().is_empty());
    }
}
