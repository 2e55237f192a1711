//! A bundle's crypto floor: the signature checks its verification made, as
//! `signet_core::verifications` counted them, each at the time one such check takes on this
//! machine, timed in the same run. The checks go through aws-lc-rs with the key parsed once,
//! as the verifier holds the trusted root's keys; parsing the leaf certificate's key is not
//! in the floor.

use std::hint::black_box;
use std::time::Duration;

use serde::Serialize;
use signet_core::verifications::Verifications;

use crate::crypto::awslc::AwsLc;
use crate::crypto::backend::{Backend, BackendError, Keys, SigAlg};
use crate::crypto::stats::{self, Timing};

/// Bytes each timed check covers: about a Fulcio certificate's TBS, which is the largest
/// message a bundle's checks hash.
const SIGNED_BYTES: usize = 768;

/// One check's median time, in µs.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct CheckTime {
    pub us: f64,
    /// (max - min) / median of the repeats.
    pub spread: f64,
}

/// The time of one check of each algorithm a bundle may use.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CheckTimes {
    pub p256: CheckTime,
    pub p384: CheckTime,
    pub rsa2048: CheckTime,
    pub ed25519: CheckTime,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FloorError {
    #[error(transparent)]
    Key(#[from] BackendError),
    #[error("aws-lc's {0} signature of the floor's message does not verify")]
    OwnSignatureRejected(&'static str),
}

impl CheckTimes {
    /// Times each algorithm's check `repeats` times for `budget` each, in turns.
    pub fn measure(budget: Duration, repeats: usize) -> Result<CheckTimes, FloorError> {
        let keys = Keys::generate()?;
        let message = vec![0x5au8; SIGNED_BYTES];
        let order = [SigAlg::EcdsaP256Sha256, SigAlg::EcdsaP384Sha384, SigAlg::Rsa2048Sha256, SigAlg::Ed25519];
        let mut ops: Vec<Box<dyn FnMut()>> = Vec::new();
        for alg in order {
            let key = AwsLc.signature(alg, &keys)?;
            let mut sig = vec![0u8; 512];
            let n = key.sign(&message, &mut sig);
            sig.truncate(n);
            if !key.verify(&message, &sig) {
                return Err(FloorError::OwnSignatureRejected(alg.label()));
            }
            let message = message.clone();
            ops.push(Box::new(move || {
                assert!(key.verify(black_box(&message), black_box(&sig)), "a signature that verified once stopped verifying");
            }));
        }
        let mut stats = stats::run_interleaved(&mut ops, Timing { budget, repeats }).into_iter();
        let mut next = || {
            let s = stats.next().unwrap_or_else(|| unreachable!("one result per algorithm"));
            CheckTime { us: 1e6 / s.median, spread: s.spread() }
        };
        Ok(CheckTimes { p256: next(), p384: next(), rsa2048: next(), ed25519: next() })
    }

    /// The floor of a verification that made `v`'s checks, in ns.
    pub fn floor_ns(&self, v: &Verifications) -> u64 {
        let us = v.p256 as f64 * self.p256.us + v.p384 as f64 * self.p384.us + v.rsa as f64 * self.rsa2048.us + v.ed25519 as f64 * self.ed25519.us;
        (us * 1e3).round() as u64
    }

    /// `P-256 62.1 µs, P-384 231.0 µs, RSA-2048 20.3 µs, Ed25519 45.2 µs`.
    pub fn describe(&self) -> String {
        let t = |name: &str, c: CheckTime| format!("{name} {:.1} µs", c.us);
        [t("P-256", self.p256), t("P-384", self.p384), t("RSA-2048", self.rsa2048), t("Ed25519", self.ed25519)].join(", ")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn round() -> CheckTimes {
        let c = |us| CheckTime { us, spread: 0.0 };
        CheckTimes { p256: c(50.0), p384: c(200.0), rsa2048: c(20.0), ed25519: c(40.0) }
    }

    #[test]
    fn the_floor_is_each_check_at_its_own_algorithms_time() {
        let v = Verifications { p256: 2, p384: 2, rsa: 0, ed25519: 1 };
        assert_eq!(round().floor_ns(&v), 540_000);
        assert_eq!(round().floor_ns(&Verifications::default()), 0);
        assert_eq!(round().describe(), "P-256 50.0 µs, P-384 200.0 µs, RSA-2048 20.0 µs, Ed25519 40.0 µs");
    }

    #[test]
    fn a_measured_p384_check_costs_more_than_a_p256_one() {
        let t = CheckTimes::measure(Duration::from_millis(20), 1).unwrap();
        assert!(t.p384.us > t.p256.us, "{t:?}");
        assert!(t.p256.us > 0.0 && t.rsa2048.us > 0.0 && t.ed25519.us > 0.0, "{t:?}");
    }
}
