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
/// (this one and helpers), each taking a contiguous run of at least `min_per_thread` items.
/// The items come back with the results, in their order, whatever happened.
///
/// Inside a tokio runtime the helpers are the runtime's blocking threads, which live on
/// between batches: with a thread made for each batch, v1 appends cost 8–12 % more CPU at the
/// ceiling on two cores, with reused ones about 4 % (issue 46). Outside one (tests, benches)
/// they are threads of their own. The first error (in item order) is
/// returned; a panic in a helper is resumed here, as if this thread had panicked, so [`run`]
/// still catches it (the helper's items are lost with it). Not for a runtime worker: this
/// thread waits for its helpers.
pub fn fan_out<T, R, E, F>(mut items: Vec<T>, threads: usize, min_per_thread: usize, f: F) -> (Vec<T>, Result<Vec<R>, E>)
where
    T: Send + 'static,
    R: Send + 'static,
    E: Send + 'static,
    F: Fn(usize, &T) -> Result<R, E> + Send + Sync + 'static,
{
    let n = items.len();
    let threads = threads.min(n / min_per_thread.max(1)).max(1);
    let run = |f: &F, start: usize, part: &[T]| part.iter().enumerate().map(|(i, t)| f(start + i, t)).collect::<Result<Vec<R>, E>>();
    if threads == 1 {
        let out = run(&f, 0, &items);
        return (items, out);
    }
    let per = n.div_ceil(threads);
    // The runs after the first, split off the end so that `items` keeps the first.
    let mut rest = Vec::with_capacity(threads - 1);
    while items.len() > per {
        let start = (items.len() - 1) / per * per;
        rest.push((start, items.split_off(start)));
    }
    rest.reverse();
    let f = std::sync::Arc::new(f);
    let runtime = tokio::runtime::Handle::try_current().ok();
    let helpers: Vec<_> = rest
        .into_iter()
        .map(|(start, part)| {
            let f = f.clone();
            let job = move || {
                let out = run(&f, start, &part);
                (part, out)
            };
            match &runtime {
                Some(rt) => Helper::Pooled(rt.spawn_blocking(job)),
                None => Helper::Thread(std::thread::spawn(job)),
            }
        })
        .collect();
    let mut out = run(&f, 0, &items);
    for helper in helpers {
        let joined = match helper {
            Helper::Pooled(handle) => match runtime.as_ref().map(|rt| rt.block_on(handle)) {
                Some(Ok(done)) => done,
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled, as the runtime shuts down: its items are gone, so this job fails as a
                // panic would, and `run` turns it into an error.
                _ => panic!("a helper of fan_out was cancelled: the runtime is shutting down"),
            },
            Helper::Thread(handle) => handle.join().unwrap_or_else(|payload| std::panic::resume_unwind(payload)),
        };
        let (part, result) = joined;
        items.extend(part);
        match (&mut out, result) {
            (Ok(all), Ok(more)) => all.extend(more),
            (Ok(_), Err(e)) => out = Err(e),
            (Err(_), _) => {}
        }
    }
    (items, out)
}

/// A helper of [`fan_out`]: on the runtime's blocking pool, or a thread of its own.
enum Helper<T> {
    Pooled(tokio::task::JoinHandle<T>),
    Thread(std::thread::JoinHandle<T>),
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

    /// Which threads ran which items, for the fan-out tests.
    fn spread_of(items: Vec<u64>, threads: usize, per: usize) -> (Vec<u64>, Vec<(u64, std::thread::ThreadId)>) {
        let (items, out) = fan_out(items, threads, per, |i, &x| {
            assert_eq!(i as u64, x, "the index passed is the item's own");
            Ok::<_, ()>((x * 2, std::thread::current().id()))
        });
        (items, out.unwrap())
    }

    #[test]
    fn fan_out_keeps_order_and_spreads_only_large_batches() {
        let (items, out) = spread_of((0..1000).collect(), 4, 100);
        assert_eq!(items, (0..1000).collect::<Vec<_>>(), "the items come back in order");
        assert_eq!(out.iter().map(|r| r.0).collect::<Vec<_>>(), (0..1000).map(|x| x * 2).collect::<Vec<_>>());
        let threads: std::collections::HashSet<_> = out.iter().map(|r| r.1).collect();
        assert_eq!(threads.len(), 4, "1,000 items at 100 per thread use all 4 threads");

        // Below the minimum per thread, everything stays on the calling thread.
        let caller = std::thread::current().id();
        let (_, out) = spread_of((0..150).collect(), 4, 100);
        assert!(out.iter().all(|(_, t)| *t == caller) && out.len() == 150);
        let (items, out) = fan_out(Vec::<u8>::new(), 4, 1, |_, _| Ok::<u8, ()>(0));
        assert!(items.is_empty() && out.unwrap().is_empty());
    }

    #[test]
    fn fan_out_in_a_runtime_reuses_its_blocking_threads() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).max_blocking_threads(8).build().unwrap();
        let mut helpers = std::collections::HashSet::new();
        for _ in 0..5 {
            let (items, out) = rt.block_on(run(|| spread_of((0..64).collect(), 2, 8))).unwrap();
            assert_eq!(items, (0..64).collect::<Vec<_>>());
            let caller = out[0].1;
            helpers.extend(out.iter().map(|r| r.1).filter(|t| *t != caller));
        }
        // Five batches, each with a helper, and the helpers are the pool's few threads, not five new ones.
        assert!(!helpers.is_empty() && helpers.len() < 5, "{} helper threads for 5 batches", helpers.len());
    }

    #[test]
    fn fan_out_returns_the_first_error_and_resumes_a_helpers_panic() {
        let (items, out) = fan_out((0..400u32).collect(), 4, 10, |_, &x| if x == 250 || x == 390 { Err(x) } else { Ok(x) });
        assert_eq!(out.unwrap_err(), 250, "the error of the earliest failing item");
        assert_eq!(items.len(), 400, "every item comes back with an error");
        let panicked = std::panic::catch_unwind(|| fan_out((0..400u32).collect(), 4, 10, |_, &x| if x == 350 { panic!("item {x}") } else { Ok::<_, ()>(x) }));
        assert_eq!(panic_text(&*panicked.unwrap_err()), "item 350");
        // The same from the runtime's pool: the panic reaches `run`'s caller as its error.
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
        let err = rt.block_on(run(|| fan_out((0..400u32).collect(), 4, 10, |_, &x| if x == 399 { panic!("item {x}") } else { Ok::<_, ()>(x) }))).unwrap_err();
        assert_eq!(err.0, "item 399");
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
