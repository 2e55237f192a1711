//! The cases: which operation, at which size, and how one operation is prepared on a backend.
//!
//! Preparing a case builds everything an operation needs once (keys, contexts, sessions,
//! inputs), checks that the backend does real work (a signature verifies, a tampered one does
//! not), and returns a closure that performs exactly one operation.

use std::hint::black_box;

use serde::Serialize;

use super::backend::{AeadAlg, Backend, BackendError, Keys, SigAlg};

/// Bytes of the message that sign and verify cases sign (hashing it is part of the operation).
pub const MESSAGE_BYTES: usize = 64;
/// Input sizes of the throughput cases.
pub const SIZES: [usize; 3] = [16, 1024, 16 * 1024];
/// AAD of each sealed record: a TLS 1.3 record header's length.
pub const AAD_BYTES: usize = 5;

/// A figure from report 002 to print beside ours.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Reference {
    pub ops_per_s: f64,
    pub source: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Sign(SigAlg),
    Verify(SigAlg),
    Sha256,
    HmacSha256,
    Seal(AeadAlg),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// Unique and filterable, e.g. `ecdsa-p256-verify` or `aes-128-gcm-seal/1KB`.
    pub id: String,
    /// For the table, e.g. `ECDSA P-256 SHA-256 verify`.
    pub op: String,
    /// Input bytes per operation for throughput cases (MB/s is derived from it).
    pub size: Option<usize>,
    pub kind: Kind,
    pub reference: Option<Reference>,
}

/// `16B`, `1KB`, `16KB`.
pub fn size_label(size: usize) -> String {
    if size >= 1024 && size % 1024 == 0 {
        format!("{}KB", size / 1024)
    } else {
        format!("{size}B")
    }
}

/// Report 002's Python (`cryptography`, i.e. OpenSSL) figures, where it has one for a case.
fn reference(kind: Kind) -> Option<Reference> {
    let source = "report 002, Python/OpenSSL";
    match kind {
        Kind::Verify(SigAlg::Rsa2048Sha256) => Some(Reference { ops_per_s: 64_695.07, source }),
        Kind::Verify(SigAlg::EcdsaP384Sha384) => Some(Reference { ops_per_s: 4_657.50, source }),
        _ => None,
    }
}

/// Every case, in the order of the table.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut push = |id: String, op: String, size: Option<usize>, kind: Kind| {
        cases.push(Case { id, op, size, kind, reference: reference(kind) });
    };
    for alg in SigAlg::ALL {
        // RSA signing is not part of the brief (signet verifies RSA, it never signs with it).
        if alg != SigAlg::Rsa2048Sha256 {
            push(format!("{}-sign", alg.id()), format!("{} sign", alg.label()), None, Kind::Sign(alg));
        }
        push(format!("{}-verify", alg.id()), format!("{} verify", alg.label()), None, Kind::Verify(alg));
    }
    for size in SIZES {
        push(format!("sha256/{}", size_label(size)), "SHA-256".into(), Some(size), Kind::Sha256);
    }
    for alg in AeadAlg::ALL {
        for size in SIZES {
            push(format!("{}-seal/{}", alg.id(), size_label(size)), format!("{} seal", alg.label()), Some(size), Kind::Seal(alg));
        }
    }
    for size in SIZES {
        push(format!("hmac-sha256/{}", size_label(size)), "HMAC-SHA256".into(), Some(size), Kind::HmacSha256);
    }
    cases
}

/// The cases whose id contains `filter` (case-insensitive); all of them without a filter.
pub fn select(cases: Vec<Case>, filter: Option<&str>) -> Vec<Case> {
    match filter.map(str::to_ascii_lowercase) {
        None => cases,
        Some(f) => cases.into_iter().filter(|c| c.id.to_ascii_lowercase().contains(&f)).collect(),
    }
}

/// The inputs of one run, shared by both backends.
pub struct Fixture {
    pub keys: Keys,
    pub message: Vec<u8>,
    pub aes128_key: [u8; 16],
    pub aes256_key: [u8; 32],
    pub iv: [u8; 12],
    pub hmac_key: [u8; 32],
}

impl Fixture {
    pub fn generate() -> Result<Fixture, BackendError> {
        Ok(Fixture {
            keys: Keys::generate()?,
            message: (0..MESSAGE_BYTES).map(|_| rand::random()).collect(),
            aes128_key: rand::random(),
            aes256_key: rand::random(),
            iv: rand::random(),
            hmac_key: rand::random(),
        })
    }

    fn aead_key(&self, alg: AeadAlg) -> &[u8] {
        match alg {
            AeadAlg::Aes128Gcm => &self.aes128_key,
            AeadAlg::Aes256Gcm => &self.aes256_key,
        }
    }
}

/// Why a case could not be prepared on a backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The backend's signature over the fixture's message did not verify under its own key.
    #[error("{case} on {backend}: its own signature does not verify")]
    OwnSignatureRejected { case: String, backend: &'static str },
    /// A tampered message or signature verified: the backend does no real work.
    #[error("{case} on {backend}: a tampered message or signature verifies")]
    TamperedAccepted { case: String, backend: &'static str },
}

/// A copy of `msg` with one bit flipped.
pub fn tampered(msg: &[u8]) -> Vec<u8> {
    let mut t = msg.to_vec();
    t[0] ^= 1;
    t
}

impl Case {
    /// Sets the case up on `backend` and returns one operation, ready to be timed.
    pub fn prepare(&self, backend: &dyn Backend, fx: &Fixture) -> Result<Box<dyn FnMut()>, PrepareError> {
        let input = vec![0xa5u8; self.size.unwrap_or(0)];
        Ok(match self.kind {
            Kind::Sign(alg) | Kind::Verify(alg) => {
                let s = backend.signature(alg, &fx.keys)?;
                let mut buf = vec![0u8; 512];
                let n = s.sign(&fx.message, &mut buf);
                let sig = buf[..n].to_vec();
                if !s.verify(&fx.message, &sig) {
                    return Err(PrepareError::OwnSignatureRejected { case: self.id.clone(), backend: backend.name() });
                }
                if s.verify(&tampered(&fx.message), &sig) || s.verify(&fx.message, &tampered(&sig)) {
                    return Err(PrepareError::TamperedAccepted { case: self.id.clone(), backend: backend.name() });
                }
                let msg = fx.message.clone();
                if let Kind::Sign(_) = self.kind {
                    Box::new(move || {
                        let n = s.sign(black_box(&msg), &mut buf);
                        black_box(&buf[..n]);
                    })
                } else {
                    Box::new(move || {
                        let ok = s.verify(black_box(&msg), black_box(&sig));
                        assert!(black_box(ok), "a signature that verified once stopped verifying");
                    })
                }
            }
            Kind::Sha256 => {
                let d = backend.digest();
                Box::new(move || {
                    black_box(d.sha256(black_box(&input)));
                })
            }
            Kind::HmacSha256 => {
                let m = backend.mac(&fx.hmac_key)?;
                Box::new(move || {
                    black_box(m.hmac_sha256(black_box(&input)));
                })
            }
            Kind::Seal(alg) => {
                let mut session = backend.aead_session(alg, fx.aead_key(alg), fx.iv)?;
                let (aad, mut record) = ([0x17u8; AAD_BYTES], input);
                Box::new(move || {
                    black_box(session.seal(black_box(&aad), black_box(&mut record)));
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(cases: &[Case]) -> Vec<&str> {
        cases.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn all_cases_are_unique_and_cover_the_brief() {
        let cases = all();
        let mut seen = std::collections::HashSet::new();
        assert!(cases.iter().all(|c| seen.insert(c.id.clone())), "duplicate ids");
        for id in [
            "rsa2048-verify",
            "ecdsa-p256-sign",
            "ecdsa-p256-verify",
            "ecdsa-p384-sign",
            "ecdsa-p384-verify",
            "ed25519-sign",
            "ed25519-verify",
            "sha256/16B",
            "sha256/1KB",
            "sha256/16KB",
            "aes-128-gcm-seal/16B",
            "aes-256-gcm-seal/16KB",
            "hmac-sha256/1KB",
        ] {
            assert!(seen.contains(id), "missing case {id}");
        }
        assert_eq!(cases.iter().filter(|c| c.reference.is_some()).count(), 2);
    }

    #[test]
    fn filter_selects_by_substring() {
        assert_eq!(ids(&select(all(), Some("verify"))), vec![
            "rsa2048-verify",
            "ecdsa-p256-verify",
            "ecdsa-p384-verify",
            "ed25519-verify"
        ]);
        assert_eq!(ids(&select(all(), Some("SHA256/1k"))), vec!["sha256/1KB", "hmac-sha256/1KB"]);
        assert_eq!(ids(&select(all(), Some("aes-128"))).len(), 3);
        assert!(select(all(), Some("no-such-case")).is_empty());
        assert_eq!(select(all(), None).len(), all().len());
    }

    #[test]
    fn references_are_report_002_figures() {
        let r = |id: &str| all().into_iter().find(|c| c.id == id).and_then(|c| c.reference).map(|r| r.ops_per_s);
        assert_eq!(r("rsa2048-verify"), Some(64_695.07));
        assert_eq!(r("ecdsa-p384-verify"), Some(4_657.50));
        assert_eq!(r("ecdsa-p256-verify"), None);
    }

    #[test]
    fn size_labels() {
        assert_eq!(SIZES.map(size_label), ["16B".to_string(), "1KB".into(), "16KB".into()]);
        assert_eq!(size_label(100), "100B");
    }
}
