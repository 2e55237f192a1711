//! Signature verifications made on this thread, by algorithm.
//!
//! The lab reads this to learn which signatures an operation checked (`signet bench verify`
//! multiplies each count by that primitive's time for a bundle's crypto floor), rather than
//! guessing it from the bundle's shape: a trusted root with several keys may make one check
//! try more than one. Counting is a thread-local add, a few nanoseconds, so it stays on.

use std::cell::Cell;

use serde::Serialize;

/// Verifications by algorithm. A failed attempt costs what a good one does, so both count.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Verifications {
    pub p256: u32,
    pub p384: u32,
    pub rsa: u32,
    pub ed25519: u32,
}

/// The algorithm a verification used: the key's kind decides it, whatever the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    P256,
    P384,
    Rsa,
    Ed25519,
}

thread_local! {
    static MADE: Cell<Verifications> = const { Cell::new(Verifications { p256: 0, p384: 0, rsa: 0, ed25519: 0 }) };
}

/// Counts one verification on this thread.
pub(crate) fn count(a: Algorithm) {
    MADE.with(|m| {
        let mut v = m.get();
        let slot = match a {
            Algorithm::P256 => &mut v.p256,
            Algorithm::P384 => &mut v.p384,
            Algorithm::Rsa => &mut v.rsa,
            Algorithm::Ed25519 => &mut v.ed25519,
        };
        *slot = slot.saturating_add(1);
        m.set(v);
    });
}

impl Verifications {
    /// What this thread verified since the last `take`, and starts counting again from zero.
    pub fn take() -> Verifications {
        MADE.with(|m| m.take())
    }

    pub fn total(&self) -> u32 {
        self.p256 + self.p384 + self.rsa + self.ed25519
    }

    /// `2 P-384 + 2 P-256 + 1 Ed25519`, the larger counts first; `none` if nothing was checked.
    pub fn describe(&self) -> String {
        let mut parts = [(self.p384, "P-384"), (self.p256, "P-256"), (self.rsa, "RSA"), (self.ed25519, "Ed25519")];
        parts.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
        let named: Vec<String> = parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
        if named.is_empty() {
            "none".into()
        } else {
            named.join(" + ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_returns_this_threads_counts_and_resets_them() {
        Verifications::take();
        count(Algorithm::P384);
        count(Algorithm::P384);
        count(Algorithm::Ed25519);
        std::thread::spawn(|| count(Algorithm::Rsa)).join().unwrap();
        let v = Verifications::take();
        assert_eq!(v, Verifications { p256: 0, p384: 2, rsa: 0, ed25519: 1 });
        assert_eq!(v.describe(), "2 P-384 + 1 Ed25519");
        assert_eq!(Verifications::take(), Verifications::default());
        assert_eq!(Verifications::default().describe(), "none");
    }
}
