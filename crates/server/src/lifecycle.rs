//! Where the instance is in its life: starting, ready, or shutting down. `/readyz` reads it,
//! so that a load balancer sends traffic only to an instance that can commit, and stops
//! before the listener closes.

use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Storage, keys or the logs are still opening.
    Starting,
    Ready,
    /// SIGTERM or SIGINT arrived: in-flight requests finish, nothing new should come.
    ShuttingDown,
}

#[derive(Default)]
pub struct Lifecycle {
    phase: AtomicU8,
}

impl Lifecycle {
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Ready,
            _ => Phase::ShuttingDown,
        }
    }

    pub fn ready(&self) {
        // Never back from shutting down to ready.
        let _ = self.phase.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
    }

    pub fn shutting_down(&self) {
        self.phase.store(2, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_ready_again_once_shutting_down() {
        let l = Lifecycle::default();
        assert_eq!(l.phase(), Phase::Starting);
        l.ready();
        assert_eq!(l.phase(), Phase::Ready);
        l.shutting_down();
        l.ready();
        assert_eq!(l.phase(), Phase::ShuttingDown);
    }
}
