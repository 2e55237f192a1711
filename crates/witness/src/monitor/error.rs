//! What a poll of a log fails with (and is retried for at the next one). What the log did
//! wrong is not an error here: it comes back as alerts.

use super::source::SourceError;
use super::state::StateError;

/// Why one poll of a log stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    State(#[from] StateError),
    /// A worker reading it panicked.
    #[error("a page was not read")]
    PageNotRead,
    #[error("page at {start} read out of order (at {at})")]
    OutOfOrder { start: u64, at: u64 },
}
