//! Progress of long admin operations on stderr: a bar redrawn in place on a terminal, and
//! plain lines elsewhere (at the start, at most one a second, and at the end), so a log file
//! or a CI job shows that something is happening without filling up.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

/// One operation's progress.
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: usize,
    done: usize,
    tty: bool,
    started: Instant,
    printed: Option<Instant>,
}

const WIDTH: usize = 24;

impl Progress {
    /// Starts reporting `label` over `total` steps.
    pub fn new(label: &str, total: usize) -> Progress {
        let mut progress = Progress {
            label: label.to_owned(),
            total,
            done: 0,
            tty: std::io::stderr().is_terminal(),
            started: Instant::now(),
            printed: None,
        };
        progress.draw("");
        progress
    }

    /// One step done; `item` names it.
    pub fn step(&mut self, item: &str) {
        self.done = (self.done + 1).min(self.total);
        self.draw(item);
    }

    /// The line for the current state (what non-terminals get).
    pub fn line(&self, item: &str) -> String {
        let mut line = format!("{}: {}/{}", self.label, self.done, self.total);
        if !item.is_empty() {
            line.push_str(&format!(" ({item})"));
        }
        line
    }

    fn draw(&mut self, item: &str) {
        let last = self.done == self.total;
        let mut err = std::io::stderr().lock();
        if self.tty {
            let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(WIDTH);
            let bar = format!("{}{}", "#".repeat(filled), "-".repeat(WIDTH - filled));
            let _ = write!(err, "\r\x1b[2K[{bar}] {}", self.line(item));
            if last {
                let _ = writeln!(err);
            }
            let _ = err.flush();
            return;
        }
        let due = self
            .printed
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
        if due || last {
            let _ = writeln!(err, "{}", self.line(item));
            self.printed = Some(Instant::now());
        }
    }

    /// Ends the operation with a summary line.
    pub fn finish(self, summary: &str) {
        let _ = writeln!(
            std::io::stderr().lock(),
            "{summary} in {:.1} s",
            self.started.elapsed().as_secs_f64()
        );
    }
}
