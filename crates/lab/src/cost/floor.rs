//! The crypto floor: the primitives an operation cannot skip, timed on this machine in the
//! same run as the load, through aws-lc-rs as the server calls it, with the crypto
//! micro-benchmarks' timing (warm-up, batches under a time budget, the median of repeats).

use std::hint::black_box;
use std::time::Duration;

use aws_lc_rs::digest;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
use serde::Serialize;

use super::op::Recipe;
use crate::crypto::stats::{self, Stats, Timing};

/// Bytes each timed signature signs: about a SET's canonical JSON or a certificate's TBS
/// (hashing it is part of the signature).
pub const SIGNED_BYTES: usize = 512;
/// Bytes each timed hash covers: about a v1 entry's body.
pub const HASHED_BYTES: usize = 768;

/// One primitive's median time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Primitive {
    pub id: &'static str,
    pub label: &'static str,
    pub us: f64,
    /// (max - min) / median of the repeats.
    pub spread: f64,
}

/// The primitives' times, in the order [`Primitives::measure`] lists them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Primitives {
    pub sign: Primitive,
    pub verify: Primitive,
    pub hash: Primitive,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FloorError {
    #[error("aws-lc could not make a P-256 key: {0}")]
    Key(String),
    #[error("aws-lc's P-256 signature of the floor's message does not verify")]
    OwnSignatureRejected,
}

impl Primitives {
    /// Times each primitive `repeats` times for `budget` each, one after another in turns.
    pub fn measure(budget: Duration, repeats: usize) -> Result<Primitives, FloorError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|e| FloorError::Key(e.to_string()))?;
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref())
            .map_err(|e| FloorError::Key(e.to_string()))?;
        let public = key.public_key().as_ref().to_vec();
        let message = vec![0x5au8; SIGNED_BYTES];
        let digest_message = [0xa5u8; 32];
        let sig = key.sign(&rng, &digest_message).map_err(|e| FloorError::Key(e.to_string()))?;
        let sig = sig.as_ref().to_vec();
        let verify_once = move |public: &[u8], sig: &[u8]| {
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, public).verify(&digest_message, sig).is_ok()
        };
        if !verify_once(&public, &sig) {
            return Err(FloorError::OwnSignatureRejected);
        }
        let hashed = vec![0x3cu8; HASHED_BYTES];
        let mut ops: Vec<Box<dyn FnMut()>> = vec![
            Box::new(move || {
                black_box(key.sign(&rng, black_box(&message)).ok());
            }),
            // The key arrives with the request, so it is parsed (the point checked on the
            // curve) on every verification, as `UnparsedPublicKey` does.
            Box::new(move || {
                assert!(verify_once(black_box(&public), black_box(&sig)), "a signature that verified once stopped verifying");
            }),
            Box::new(move || {
                black_box(digest::digest(&digest::SHA256, black_box(&hashed)));
            }),
        ];
        let timing = Timing { budget, repeats };
        let mut stats = stats::run_interleaved(&mut ops, timing).into_iter();
        let mut next = |id: &'static str, label: &'static str| {
            let s: Stats = stats.next().unwrap_or_else(|| unreachable!("one result per primitive"));
            Primitive { id, label, us: 1e6 / s.median, spread: s.spread() }
        };
        Ok(Primitives {
            sign: next("p256-sign", "ECDSA P-256 sign (512 B)"),
            verify: next("p256-verify", "ECDSA P-256 verify, key parsed"),
            hash: next("sha256", "SHA-256 (768 B)"),
        })
    }

    /// The floor of one operation: its recipe, plus `batch_signs` checkpoint signatures
    /// shared among its operations (batches per operation).
    pub fn floor(&self, recipe: Recipe, batch_signs_per_op: f64) -> Floor {
        let own = recipe.signs as f64 * self.sign.us + recipe.verifies as f64 * self.verify.us + recipe.hashes as f64 * self.hash.us;
        let shared = batch_signs_per_op * self.sign.us;
        Floor { us: own + shared, recipe, batch_signs_per_op }
    }
}

/// An operation's crypto floor.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Floor {
    pub us: f64,
    pub recipe: Recipe,
    /// Checkpoint signatures per operation: batches signed in the window over operations
    /// answered (1 / entries per batch, for an append).
    pub batch_signs_per_op: f64,
}

impl Floor {
    /// `1 verify + 1 sign + 2 SHA-256 + 1/38 checkpoint` as the table prints it.
    pub fn describe(&self) -> String {
        let r = self.recipe;
        let mut parts = Vec::new();
        let mut push = |n: u32, what: &str| {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        };
        push(r.verifies, "verify");
        push(r.signs, if r.signs == 1 { "sign" } else { "signs" });
        push(r.hashes, "SHA-256");
        if self.batch_signs_per_op > 0.0 {
            parts.push(format!("1/{:.0} checkpoint", 1.0 / self.batch_signs_per_op));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(" + ")
        }
    }
}

/// Round figures for the tests: a signature 20 µs, a verification 50 µs, a hash 1 µs.
#[cfg(test)]
pub(crate) fn example_primitives() -> Primitives {
    let p = |id, us| Primitive { id, label: id, us, spread: 0.0 };
    Primitives { sign: p("p256-sign", 20.0), verify: p("p256-verify", 50.0), hash: p("sha256", 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primitives() -> Primitives {
        example_primitives()
    }

    #[test]
    fn the_floor_adds_the_recipe_and_the_batch_share() {
        let f = primitives().floor(Recipe { verifies: 1, signs: 1, hashes: 2 }, 0.025);
        assert_eq!(f.us, 50.0 + 20.0 + 2.0 + 0.5);
        assert_eq!(f.describe(), "1 verify + 1 sign + 2 SHA-256 + 1/40 checkpoint");
        let read = primitives().floor(Recipe { verifies: 0, signs: 0, hashes: 0 }, 0.0);
        assert_eq!((read.us, read.describe().as_str()), (0.0, "none"));
        assert_eq!(primitives().floor(Recipe { verifies: 0, signs: 3, hashes: 0 }, 0.0).describe(), "3 signs");
    }

    #[test]
    fn the_primitives_are_timed_and_a_verification_costs_more_than_a_hash() {
        let p = Primitives::measure(Duration::from_millis(20), 1).unwrap();
        for prim in [&p.sign, &p.verify, &p.hash] {
            assert!(prim.us > 0.0 && prim.us.is_finite(), "{prim:?}");
        }
        // P-256 verification is tens of µs on any machine, a 768-byte SHA-256 about one.
        assert!(p.verify.us > 3.0 * p.hash.us, "{p:?}");
    }
}
