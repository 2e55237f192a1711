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
    type Err = LoggingError;
    fn from_str(s: &str) -> Result<Format, LoggingError> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(LoggingError::UnknownFormat { given: other.to_string() }),
        }
    }
}

/// What setting up the log output fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    #[error("log format {given:?} is not supported; expected text or json")]
    UnknownFormat { given: String },
    #[error(transparent)]
    Tracing(#[from] crate::otel::OtelError),
}

/// Installs the global subscriber: `SIGNET_LOG` filters (default `warn,signet=info`), in
/// `format`, to stderr.
pub fn init(format: Format) {
    install(format, None);
}

/// As [`init`], and, for `signet serve` with `[tracing] otlp_endpoint`, exports spans too.
pub fn init_serving(format: Format, tracing: &crate::config::TracingSettings) -> Result<(), LoggingError> {
    let provider = crate::otel::provider(tracing)?;
    install(format, provider);
    Ok(())
}

fn install(format: Format, otel: Option<opentelemetry_sdk::trace::SdkTracerProvider>) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let filter = EnvFilter::try_from_env("SIGNET_LOG").unwrap_or_else(|_| "warn,signet=info,signet_server=info".into());
    // Exported spans are for the collector: the log lines never show them, whatever SIGNET_LOG says.
    let filter = match format!("{}=off", crate::otel::TARGET).parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    // Colours only for a person at a terminal: escape codes in a log file or journal get in
    // the way of every grep.
    let colour = std::io::IsTerminal::is_terminal(&io::stderr());
    let lines = tracing_subscriber::fmt::layer().with_writer(Stderr).with_ansi(colour).log_internal_errors(false);
    let lines = match format {
        Format::Text => lines.with_filter(filter).boxed(),
        Format::Json => lines.json().flatten_event(true).with_filter(filter).boxed(),
    };
    let _ = tracing_subscriber::registry().with(lines).with(otel.map(crate::otel::layer)).try_init();
}

/// One line on stdout (the ready line), dropped and counted if stdout cannot take it.
pub fn stdout_line(line: &str) {
    let mut out = io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}
