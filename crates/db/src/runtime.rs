//! The one runtime that drives every PostgreSQL connection of the process.
//!
//! tokio-postgres is async, and most of the stores' callers are not: the sequencer's blocking
//! calls, the guard's store thread, the audit writer's thread, `signet admin`. Each store used
//! to start a runtime of its own for that (three on one append: the log's, the guard's, the
//! audit's). They now share this one, started at first use and kept for the life of the
//! process, so that every connection's driver, every query and every timeout has one home.
//!
//! It is not the server's runtime: a blocking caller waits for a query here, and a blocked
//! server worker cannot drive the query it waits for. Callers that are async (the server's
//! reads) spawn their query here and await its handle, which costs no thread.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::error::DbError;

/// Two workers: the log's commits and reads keep one busy under load, and the audit chain's
/// and the guard's queries must not wait behind them.
const WORKERS: usize = 2;

static RUNTIME: OnceLock<Result<Runtime, DbError>> = OnceLock::new();

/// The runtime's handle, starting it on first use.
pub fn handle() -> Result<Handle, DbError> {
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("signet-db")
            .enable_all()
            .build()
            .map_err(|e| DbError::Runtime(e.to_string()))
    });
    runtime.as_ref().map(|r| r.handle().clone()).map_err(Clone::clone)
}

/// Runs `fut` on the runtime and waits for its output, from any thread: a plain channel,
/// which blocks safely inside or outside another runtime. A caller on a worker of a
/// multi-threaded runtime (a proof that reads a cold tile, say) hands that worker's other
/// tasks to another thread while it waits. Err: the runtime could not start, or the task
/// panicked.
pub fn block<T, F>(fut: F) -> Result<T, DbError>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let handle = handle()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    let wait = || rx.recv().map_err(|_| DbError::TaskLost);
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_from_plain_threads_and_from_runtime_workers_alike() {
        assert_eq!(block(async { 7 }).unwrap(), 7);
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let got = rt.block_on(async { tokio::spawn(async { block(async { tokio::task::yield_now().await; 8 }) }).await.unwrap() });
        assert_eq!(got.unwrap(), 8);
        // A panicking query is an error for its caller, and the runtime carries on.
        assert!(block(async {
            if std::hint::black_box(true) {
                panic!("a query that panics")
            }
        })
        .unwrap_err()
        .to_string()
        .contains("panicked"));
        assert_eq!(block(async { 9 }).unwrap(), 9);
    }
}
