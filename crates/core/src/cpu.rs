//! CPU-heavy work (signatures, certificate issuance) and where it runs.
//!
//! Two sizes of work, two places:
//!
//! - [`run`]: **long jobs**, such as a log batch's preparation (up to 257 ECDSA signatures,
//!   milliseconds). Run on a runtime worker, such a job holds that worker away from every read
//!   queued behind it, so it moves to tokio's blocking threads, at most one job per core at a
//!   time: more would only queue inside the kernel's scheduler, and an unbounded pool lets a
//!   write burst take every core from reads.
//! - [`inline`]: **short jobs**, one request's signature or verification (20–150 µs). The
//!   hand-off to a blocking thread and back costs two context switches and a cold cache,
//!   as much as the job itself: at the TSA's ceiling it halved the stamps per second
//!   (issue 40). A read queued behind a short job waits no longer than behind another
//!   request's own parsing and encoding, so short jobs run where they are.
//!
//! Either way a panic inside a job is caught and returned as [`Panicked`], so a bug costs
//! that job, never the caller's task or the process.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

/// The job panicked; the message is the panic's payload when it was a string.
#[derive(Debug, Clone, thiserror::Error)]
#[error("a CPU task panicked: {0}")]
pub struct Panicked(pub String);

fn permits() -> &'static Semaphore {
    static POOL: OnceLock<Semaphore> = OnceLock::new();
    POOL.get_or_init(|| Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())))
}

/// Runs `job` on a blocking thread, at most one job per core at once, and returns its result.
pub async fn run<R, F>(job: F) -> Result<R, Panicked>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    // The semaphore is never closed, so acquire cannot fail; if it ever did, running
    // without a permit is the safe fallback.
    let _permit = permits().acquire().await.ok();
    match tokio::task::spawn_blocking(job).await {
        Ok(r) => Ok(r),
        Err(e) => Err(Panicked(panic_message(e))),
    }
}

/// Runs a short `job` (one request's signature or verification, well under a millisecond)
/// on the calling thread, and returns its result or its panic. See the module's note for
/// why short jobs are not handed to [`run`]'s pool.
pub fn inline<R, F>(job: F) -> Result<R, Panicked>
where
    F: FnOnce() -> R,
{
    // The job's captures are dropped with it on a panic and never seen again, so a broken
    // invariant inside them cannot leak out.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).map_err(|payload| Panicked(panic_text(&*payload)))
}

fn panic_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => panic_text(&*payload),
        Err(e) => e.to_string(),
    }
}

/// The message of a caught panic, when its payload is a string (as `panic!` makes it).
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_results_and_catches_panics() {
        assert_eq!(run(|| 6 * 7).await.unwrap(), 42);
        let err = run(|| -> u8 { panic!("boom") }).await.unwrap_err();
        assert!(err.0.contains("boom"), "{err}");
        // The pool still works after a panic.
        assert_eq!(run(|| 1).await.unwrap(), 1);
    }

    #[test]
    fn inline_runs_on_the_calling_thread_and_catches_panics() {
        let caller = std::thread::current().id();
        assert_eq!(inline(|| std::thread::current().id()).unwrap(), caller);
        let err = inline(|| -> u8 { panic!("bang {}", 7) }).unwrap_err();
        assert_eq!(err.0, "bang 7");
        assert_eq!(inline(|| 5).unwrap(), 5);
    }
}
