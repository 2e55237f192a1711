//! A batch's fate, and who waits on it: requests holding their answer as a future
//! ([`Receipt`]), and connections holding their answers' bytes ([`HeldOutput`]: the server's
//! connections are, and hand themselves to the audit layer as a [`HoldsOutput`] request
//! extension). The writer tells each batch once ([`BatchDone`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

/// Answers' bytes held back until a batch is told.
pub trait HeldOutput: Send + Sync {
    /// Holds what is written from now on until `signal`'s batch is told. Called with the
    /// batch's waiter list locked, so that it cannot be told in between.
    fn hold(&self, signal: Arc<BatchSignal>);
    /// The batch of `signal` is told: its bytes go, or the connection ends.
    fn release(&self, signal: &BatchSignal, durable: bool);
}

/// A request's connection, able to hold what it writes next until a batch is told: put in
/// each HTTP/1 request's extensions by the server when the audit log is on. Holding the bytes
/// rather than the answer's future spares the connection task a second poll when the batch
/// commits (docs/performance.md, "The measurements behind the code's shape").
#[derive(Clone)]
pub struct HoldsOutput(pub Arc<dyn HeldOutput>);

/// The fate of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Outcome {
    Pending = 0,
    Durable = 1,
    Failed = 2,
}

/// What the requests of one batch wait on: its outcome, and their wakers. Lighter than a
/// `watch` channel, which this replaced: a request registers its waker with one push under a
/// lock, and polls one atomic; nothing is allocated per request.
pub struct BatchSignal {
    outcome: AtomicU8,
    waiters: Mutex<Waiters>,
}

/// Who waits for a batch: answers held as futures, and connections holding answers' bytes.
#[derive(Default)]
struct Waiters {
    wakers: Vec<Waker>,
    gates: Vec<Arc<dyn HeldOutput>>,
}

impl BatchSignal {
    fn outcome(&self) -> Outcome {
        match self.outcome.load(Ordering::Acquire) {
            0 => Outcome::Pending,
            1 => Outcome::Durable,
            _ => Outcome::Failed,
        }
    }

    /// Tells the batch's fate once, and wakes its requests.
    /// Returns how many connections' held answers it refused.
    fn finish(&self, outcome: Outcome) -> u64 {
        let waiters = {
            let mut waiters = self.waiters.lock();
            if self.outcome() != Outcome::Pending {
                return 0;
            }
            self.outcome.store(outcome as u8, Ordering::Release);
            std::mem::take(&mut *waiters)
        };
        let refused = if outcome == Outcome::Durable { 0 } else { waiters.gates.len() as u64 };
        for w in waiters.wakers {
            w.wake();
        }
        for g in waiters.gates {
            g.release(self, outcome == Outcome::Durable);
        }
        refused
    }
}

/// The writer's side of a batch's signal: dropped untold (the writer gone), it fails the batch.
pub(super) struct BatchDone(pub(super) Arc<BatchSignal>);

impl BatchDone {
    pub(super) fn new() -> BatchDone {
        BatchDone(Arc::new(BatchSignal { outcome: AtomicU8::new(Outcome::Pending as u8), waiters: Mutex::new(Waiters::default()) }))
    }

    pub(super) fn tell(self, outcome: Outcome) -> u64 {
        self.0.finish(outcome)
    }
}

impl Drop for BatchDone {
    fn drop(&mut self) {
        // Told already (then a no-op), or the writer is gone.
        let _ = self.0.finish(Outcome::Failed);
    }
}

/// For the tests of a [`HeldOutput`] (the server's connections) and of this module.
#[doc(hidden)]
pub mod testing {
    use super::{BatchDone, Outcome, Receipt};

    /// A batch of one's receipt, and the writer's word on it (true: durable); returns what the
    /// writer's side returns (the held answers it refused).
    pub fn batch() -> (Receipt, impl FnOnce(bool) -> u64) {
        let done = BatchDone::new();
        (Receipt(done.0.clone()), move |durable| done.tell(if durable { Outcome::Durable } else { Outcome::Failed }))
    }
}

/// A queued record's claim on its batch (closed mode): a future of whether it is durable.
pub struct Receipt(pub(super) Arc<BatchSignal>);

impl Receipt {
    /// True once the record is on disk; false when its batch failed, or the writer is gone.
    pub async fn durable(self) -> bool {
        self.await
    }

    /// Over HTTP/1: holds whatever `holder`'s connection writes from now on until the batch
    /// is told, rather than the answer's future. None when held; else whether the record is
    /// already durable.
    pub fn hold_output(&self, holder: &HoldsOutput) -> Option<bool> {
        let signal = &self.0;
        if signal.outcome() == Outcome::Pending {
            let mut waiters = signal.waiters.lock();
            if signal.outcome() == Outcome::Pending {
                holder.0.hold(signal.clone());
                waiters.gates.push(holder.0.clone());
                return None;
            }
        }
        Some(signal.outcome() == Outcome::Durable)
    }
}

impl Future for Receipt {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let signal = &self.0;
        if signal.outcome() == Outcome::Pending {
            let mut waiters = signal.waiters.lock();
            // Told between the check and the lock: it is not pending any more.
            if signal.outcome() == Outcome::Pending {
                waiters.wakers.push(cx.waker().clone());
                return Poll::Pending;
            }
        }
        Poll::Ready(signal.outcome() == Outcome::Durable)
    }
}
