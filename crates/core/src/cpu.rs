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
//!
//! A long job whose items are independent (a batch's SETs) may spread them over the cores with
//! [`fan_out`], so that one job is not bounded by one core.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

/// The job panicked; the message is the panic's payload when it was a string.
#[derive(Debug, Clone, thiserror::Error)]
#[error("a CPU task panicked: {0}")]
pub struct Panicked(pub String);

/// The cores this process may use, read once.
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

fn permits() -> &'static Semaphore {
    static POOL: OnceLock<Semaphore> = OnceLock::new();
    POOL.get_or_init(|| Semaphore::new(cores()))
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

/// `f` applied to each of `items`, results in the items' order, on up to `threads` threads
/// (this one and scoped helpers), each taking a contiguous run of at least `min_per_thread`
/// items: a thread costs about as much to start as a few signatures, so small batches stay on
/// one. The first error (in item order) is returned; a panic in a helper is resumed here, as
/// if this thread had panicked, so [`run`] still catches it. A helper that cannot be started
/// leaves its run to this thread.
pub fn fan_out<T, R, E, F>(items: &[T], threads: usize, min_per_thread: usize, f: F) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
    F: Fn(usize, &T) -> Result<R, E> + Sync,
{
    let n = items.len();
    let threads = threads.min(n / min_per_thread.max(1)).max(1);
    let run = |start: usize, part: &[T]| part.iter().enumerate().map(|(i, t)| f(start + i, t)).collect::<Result<Vec<R>, E>>();
    if threads == 1 {
        return run(0, items);
    }
    let per = n.div_ceil(threads);
    std::thread::scope(|scope| {
        let mut helpers = Vec::with_capacity(threads - 1);
        for start in (per..n).step_by(per) {
            let part = &items[start..(start + per).min(n)];
            let spawned = std::thread::Builder::new().name("signet-fan-out".into()).spawn_scoped(scope, move || run(start, part));
            helpers.push(spawned.map_err(|_| (start, part)));
        }
        let mut out = run(0, &items[..per.min(n)])?;
        out.reserve(n - out.len());
        for helper in helpers {
            let part = match helper {
                Ok(handle) => handle.join().unwrap_or_else(|payload| std::panic::resume_unwind(payload)),
                Err((start, part)) => run(start, part),
            };
            out.extend(part?);
        }
        Ok(out)
    })
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
    fn fan_out_keeps_order_and_spreads_only_large_batches() {
        let items: Vec<u64> = (0..1000).collect();
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        let out = fan_out(&items, 4, 100, |i, &x| {
            threads.lock().unwrap().insert(std::thread::current().id());
            assert_eq!(i as u64, x, "the index passed is the item's own");
            Ok::<_, ()>(x * 2)
        })
        .unwrap();
        assert_eq!(out, (0..1000).map(|x| x * 2).collect::<Vec<_>>());
        assert_eq!(threads.lock().unwrap().len(), 4, "1,000 items at 100 per thread use all 4 threads");

        // Below the minimum per thread, everything stays on the calling thread.
        let caller = std::thread::current().id();
        let out = fan_out(&items[..150], 4, 100, |_, &x| Ok::<_, ()>((x, std::thread::current().id()))).unwrap();
        assert!(out.iter().all(|(_, t)| *t == caller));
        assert_eq!(out.len(), 150);
        assert!(fan_out(&[] as &[u8], 4, 1, |_, _| Ok::<u8, ()>(0)).unwrap().is_empty());
    }

    #[test]
    fn fan_out_returns_the_first_error_and_resumes_a_helpers_panic() {
        let items: Vec<u32> = (0..400).collect();
        let err = fan_out(&items, 4, 10, |_, &x| if x == 250 || x == 390 { Err(x) } else { Ok(x) }).unwrap_err();
        assert_eq!(err, 250, "the error of the earliest failing item");
        let panicked = std::panic::catch_unwind(|| fan_out(&items, 4, 10, |_, &x| if x == 350 { panic!("item {x}") } else { Ok::<_, ()>(x) }));
        let payload = panicked.unwrap_err();
        assert_eq!(panic_text(&*payload), "item 350");
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
