//! Server CPU time, from `/proc`: what a handshake costs the server rather than the client.
//!
//! On two cores the measuring client saturates before the server does, so handshakes per
//! second would measure the client. The server's own CPU per handshake does not: it is read
//! from the scheduler's nanosecond accounting (`schedstat`) of the in-process server's
//! thread, or of an external server's process (nginx with `master_process off` is one
//! process, one thread).

use std::path::PathBuf;

/// Whose CPU time to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// A thread of this process, by its kernel thread id ([`current_tid`]). Not by name: two
    /// runs in one process (tests in parallel) have threads of the same name.
    Thread(u32),
    /// Every thread of another process.
    Process(u32),
}

/// The kernel's id of the calling thread.
pub fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

impl CpuSource {
    /// The nanoseconds it has run on a CPU so far; None when `/proc` does not say.
    pub fn ns(&self) -> Option<u64> {
        match self {
            CpuSource::Thread(tid) => schedstat(PathBuf::from(format!("/proc/self/task/{tid}/schedstat"))),
            CpuSource::Process(pid) => {
                let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
                // A thread that ends between the listing and its read has left the
                // process; it adds nothing rather than hiding the others' time.
                Some(tasks.flatten().filter_map(|task| schedstat(task.path().join("schedstat"))).sum())
            }
        }
    }
}

/// The first field of a `schedstat` file: time spent on a CPU, in ns.
fn schedstat(path: PathBuf) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_is_seen_busy_and_an_unknown_one_is_none() {
        let (ready, started) = std::sync::mpsc::channel::<u32>();
        let (spun, spinning_done) = std::sync::mpsc::channel::<()>();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("cpu-test-spin".into())
            .spawn(move || {
                let me = current_tid().unwrap();
                ready.send(me).unwrap();
                // Until the kernel has counted 30 ms on a CPU for this thread, however long a
                // loaded machine makes that take (a wall-clock spin came short under load).
                let (mut x, give_up) = (0u64, std::time::Instant::now() + std::time::Duration::from_secs(20));
                while CpuSource::Thread(me).ns().unwrap_or(0) < 30_000_000 && std::time::Instant::now() < give_up {
                    for _ in 0..100_000 {
                        x = x.wrapping_mul(31).wrapping_add(7);
                    }
                }
                std::hint::black_box(x);
                spun.send(()).unwrap();
                finished.recv().unwrap();
            })
            .unwrap();
        let tid = started.recv().unwrap();
        assert_ne!(Some(tid), current_tid());
        spinning_done.recv().unwrap();
        let spent = CpuSource::Thread(tid).ns().unwrap();
        assert!(spent >= 20_000_000, "{spent} ns");
        // The process's sum counts its live threads, the spinning one among them.
        assert!(CpuSource::Process(std::process::id()).ns().unwrap() >= spent);
        finish.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(CpuSource::Thread(tid).ns(), None, "a thread that ended");
        assert_eq!(CpuSource::Process(u32::MAX).ns(), None);
    }

    #[test]
    fn a_process_whose_threads_come_and_go_is_still_summed() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let churn = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let short: Vec<_> = (0..8).map(|_| std::thread::spawn(|| std::hint::black_box(1))).collect();
                    for t in short {
                        t.join().unwrap();
                    }
                }
            })
        };
        for _ in 0..300 {
            assert!(CpuSource::Process(std::process::id()).ns().is_some());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        churn.join().unwrap();
    }
}
