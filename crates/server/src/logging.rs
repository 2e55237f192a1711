//! Log output that can never take signet down.
//!
//! `eprintln!` panics when stderr cannot be written (a full disk under `signet serve 2>>
//! log`, a closed pipe), and tracing-subscriber reports its own write failures with
//! `eprintln!`. A log line is worth less than the request that caused it: a failed write is
//! dropped and counted (`signet_log_lines_dropped_total`), and the next line tries again.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Log lines that could not be written since the process started.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// stderr, where a failed write is counted instead of reported.
#[derive(Clone, Copy, Default)]
pub struct Stderr;

pub struct Line(io::Stderr);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Claim the whole line either way: a short or failed write is dropped, never retried
        // in a loop and never reported through stderr itself.
        if self.0.write_all(buf).is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line(io::stderr())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(format!("log format {other:?} is not supported; expected text or json")),
        }
    }
}

/// Installs the global subscriber: `SIGNET_LOG` filters (default `warn,signet=info`), in
/// `format`, to stderr.
pub fn init(format: Format) {
    let filter = EnvFilter::try_from_env("SIGNET_LOG").unwrap_or_else(|_| "warn,signet=info,signet_server=info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(Stderr).log_internal_errors(false);
    let _ = match format {
        Format::Text => builder.try_init(),
        Format::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// One line on stdout (the ready line), dropped and counted if stdout cannot take it.
pub fn stdout_line(line: &str) {
    let mut out = io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}
