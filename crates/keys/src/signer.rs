//! [`Signer`]: one signing key, wherever it is kept. Every signature signet makes goes
//! through one, so that any key can move into an HSM by changing one line of config.

use std::path::Path;

use signet_core::{hash, pem};

use crate::file::{self, Pair};
use crate::source::{KeySource, Pkcs11Settings};
use crate::{awskms, pkcs11, Algorithm, KeyError};

/// How a batch of signatures with one key is best spread over threads: up to `threads` at
/// once, each taking at least `per_thread` (see [`Signer::spread`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub threads: usize,
    pub per_thread: usize,
}

impl Spread {
    /// For signatures made in this process (~20 µs each): one thread per core, and enough
    /// signatures a thread (32, ~0.7 ms) to pay for handing them over.
    pub fn on_cores() -> Spread {
        Spread { threads: signet_core::cpu::cores(), per_thread: 32 }
    }
}

/// KMS signatures in flight at once per batch: each is a round trip, not this process's CPU.
const KMS_IN_FLIGHT: usize = 16;

/// A private key that signs, and its public half.
pub struct Signer {
    backend: Backend,
    algorithm: Algorithm,
    spki_der: Vec<u8>,
    key_id: hash::Hash,
}

enum Backend {
    /// In this process's memory, from a file or generated.
    Memory(Pair),
    /// On a PKCS#11 token.
    Pkcs11(pkcs11::Key),
    /// In AWS KMS.
    AwsKms(awskms::Key),
    /// Nowhere: only the public half is here ([`Signer::public_only`]), and `sign` says why.
    PublicOnly(String),
}

impl std::fmt::Debug for Signer {
    // Never print key material, only the public identity.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({}, {})", self.algorithm, hex::encode(self.key_id))
    }
}

impl Signer {
    /// A new key of `algorithm`, held in memory only (tests, benches, ephemeral keys).
    pub fn generate(algorithm: Algorithm) -> Result<Self, KeyError> {
        Self::from_pkcs8(&file::generate_pkcs8(algorithm)?, "<generated>", &[algorithm])
    }

    /// The PKCS#8 DER `der` (read from `origin`), which must be one of `wanted`.
    pub fn from_pkcs8(der: &[u8], origin: &str, wanted: &[Algorithm]) -> Result<Self, KeyError> {
        let (pair, algorithm) = Pair::from_pkcs8(der, wanted, origin)?;
        let spki_der = pair.spki_der()?;
        Ok(Signer { key_id: hash::sha256(&spki_der), spki_der, algorithm, backend: Backend::Memory(pair) })
    }

    /// Loads the key at `path`, or generates one of `algorithm` there (0600) if the file does
    /// not exist; a file that holds another kind of key is refused.
    pub fn load_or_generate(path: &Path, algorithm: Algorithm) -> Result<Self, KeyError> {
        let der = file::load_or_generate_pkcs8(path, algorithm)?;
        Self::from_pkcs8(&der, &path.display().to_string(), &[algorithm])
    }

    /// The key `source` names, of one of `wanted`. A file is read (or, when `generate` is set,
    /// made 0600 with the first of `wanted` where it is missing); a token's key is looked up,
    /// never made (that is `signet init --keys`), and checked to sign what its public half
    /// verifies.
    pub fn open(source: &KeySource, settings: &Pkcs11Settings, wanted: &[Algorithm], generate: bool) -> Result<Self, KeyError> {
        let first = *wanted.first().ok_or(KeyError::Sign)?;
        match source {
            KeySource::File(path) => {
                let der = match generate {
                    true => file::load_or_generate_pkcs8(path, first)?,
                    false => file::read_pkcs8(path)?,
                };
                Self::from_pkcs8(&der, &path.display().to_string(), wanted)
            }
            KeySource::Pkcs11(uri) => {
                let (key, algorithm, spki_der) = pkcs11::Key::open(uri, settings)?;
                Self::remote(source, Backend::Pkcs11(key), algorithm, spki_der, wanted)
            }
            KeySource::AwsKms(uri) => {
                let (key, algorithm, spki_der) = awskms::Key::open(uri)?;
                Self::remote(source, Backend::AwsKms(key), algorithm, spki_der, wanted)
            }
        }
    }

    /// The public key `spki_der` alone, for what it names but never signs again: a log copied
    /// from another service (`signet import rekor`), frozen, served under that log's key.
    /// `sign` fails, saying `why`.
    pub fn public_only(spki_der: &[u8], why: impl Into<String>) -> Result<Self, KeyError> {
        use signet_core::pubkey::{KeyKind, PublicKey};
        let invalid = |why: String| KeyError::Invalid { path: "<public key>".into(), why };
        let key = PublicKey::from_spki(spki_der).map_err(|e| invalid(e.to_string()))?;
        let algorithm = match key.kind {
            KeyKind::EcdsaP256 => Algorithm::EcdsaP256Sha256,
            KeyKind::EcdsaP384 => Algorithm::EcdsaP384Sha384,
            KeyKind::Ed25519 => Algorithm::Ed25519,
            KeyKind::Rsa { bits } => return Err(invalid(format!("an RSA key ({bits} bits); a log key here is ECDSA P-256 or P-384, or Ed25519"))),
        };
        Ok(Signer { key_id: hash::sha256(spki_der), spki_der: spki_der.to_vec(), algorithm, backend: Backend::PublicOnly(why.into()) })
    }

    /// A key held elsewhere, checked to be of a `wanted` kind and to sign what its public
    /// half verifies: one that does not would sign what nobody verifies.
    fn remote(source: &KeySource, backend: Backend, algorithm: Algorithm, spki_der: Vec<u8>, wanted: &[Algorithm]) -> Result<Self, KeyError> {
        if !wanted.contains(&algorithm) {
            return Err(KeyError::wrong(source, wanted, algorithm));
        }
        let signer = Signer { key_id: hash::sha256(&spki_der), spki_der, algorithm, backend };
        const PROBE: &[u8] = b"signet: does this key pair match?";
        let probe = signer.sign(PROBE)?;
        if !algorithm.verify(&signer.spki_der, PROBE, &probe) {
            return Err(KeyError::Mismatch { key: source.to_string() });
        }
        Ok(signer)
    }

    /// A signature over `message`: ASN.1 DER ECDSA over its digest, or raw Ed25519.
    ///
    /// A key in memory signs on the calling thread (~20 µs; a hand-off to another thread
    /// costs more than that, docs/performance.md). A token or a KMS may take milliseconds,
    /// or wait for a free session: on a runtime worker that wait is announced to tokio
    /// (`block_in_place`), which moves the worker's other tasks to another thread.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        if let Backend::PublicOnly(why) = &self.backend {
            return Err(KeyError::Invalid { path: format!("key {}", hex::encode(self.key_id)), why: why.clone() });
        }
        count_signature();
        match &self.backend {
            Backend::Memory(pair) => pair.sign(message),
            Backend::Pkcs11(key) => off_runtime(|| key.sign(self.algorithm, message)),
            Backend::AwsKms(key) => off_runtime(|| key.sign(self.algorithm, message)),
            Backend::PublicOnly(_) => Err(KeyError::Sign),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// How to spread a batch of signatures (a log batch's SETs). A key in memory costs this
    /// process's CPU ([`Spread::on_cores`]). A token's or a KMS's signature is a wait
    /// (milliseconds): as many at once as the token has sessions or KMS takes requests, from
    /// the first signature on.
    pub fn spread(&self) -> Spread {
        match &self.backend {
            Backend::Memory(_) => Spread::on_cores(),
            Backend::Pkcs11(key) => Spread { threads: key.sessions().max(1), per_thread: 1 },
            Backend::AwsKms(_) => Spread { threads: KMS_IN_FLIGHT, per_thread: 1 },
            Backend::PublicOnly(_) => Spread { threads: 1, per_thread: 1 },
        }
    }

    /// Whether the private key is held outside this process, on a token or in a KMS (it
    /// cannot be copied).
    pub fn on_token(&self) -> bool {
        matches!(self.backend, Backend::Pkcs11(_) | Backend::AwsKms(_))
    }

    /// SubjectPublicKeyInfo DER of the public key.
    pub fn spki_der(&self) -> &[u8] {
        &self.spki_der
    }

    /// SHA-256 of the SPKI DER: Rekor's `logID` and the trusted root's `logId.keyId`.
    pub fn key_id(&self) -> &hash::Hash {
        &self.key_id
    }

    pub fn public_pem(&self) -> String {
        pem::encode("PUBLIC KEY", &self.spki_der)
    }

    /// The raw 32-byte public key of an Ed25519 signer (how TUF and signed notes name it).
    pub fn ed25519_public(&self) -> Option<[u8; 32]> {
        crate::algorithm::ed25519_raw(&self.spki_der).and_then(|raw| raw.try_into().ok())
    }
}

/// Runs `f`, which may block for long, without stalling a tokio worker's other tasks.
fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        // On a blocking-pool thread this runs `f` as is; on a worker it hands the worker's
        // queue to another thread first. A current-thread runtime has no other thread.
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Signatures made by this process with any of signet's keys (logs, CA, TSA, TUF, notes),
/// for `/metrics`: what an unauthenticated request can make signet sign is a cost to bound,
/// and this counter is how a test or an operator sees it. One relaxed add per signature.
static SIGNATURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn count_signature() {
    SIGNATURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

pub fn signatures_made() -> u64 {
    SIGNATURES.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_file_key_persists_with_0600_and_signs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.key");
        let k1 = Signer::load_or_generate(&path, Algorithm::EcdsaP256Sha256).unwrap();
        let k2 = Signer::load_or_generate(&path, Algorithm::EcdsaP256Sha256).unwrap();
        assert_eq!(k1.key_id(), k2.key_id(), "second start loads the same key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let sig = k1.sign(b"note").unwrap();
        assert!(Algorithm::EcdsaP256Sha256.verify(k2.spki_der(), b"note", &sig));
        assert!(!Algorithm::EcdsaP256Sha256.verify(k2.spki_der(), b"other", &sig));
        assert!(!format!("{k1:?}").contains("PRIVATE"));
    }

    #[test]
    fn every_algorithm_signs_what_its_public_key_verifies() {
        for alg in Algorithm::ALL {
            let key = Signer::generate(alg).unwrap();
            assert_eq!(key.algorithm(), alg);
            let sig = key.sign(b"message").unwrap();
            assert!(alg.verify(key.spki_der(), b"message", &sig), "{alg}");
            assert!(!alg.verify(key.spki_der(), b"massage", &sig), "{alg}");
            // The project's general verifier agrees: the SPKI is well formed.
            let public = signet_core::pubkey::PublicKey::from_spki(key.spki_der()).unwrap();
            assert!(public.verify_message(b"message", &sig).is_ok(), "{alg}");
            assert_eq!(key.ed25519_public().is_some(), alg == Algorithm::Ed25519);
        }
    }

    #[test]
    fn a_file_of_another_kind_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tuf.pem");
        Signer::load_or_generate(&path, Algorithm::Ed25519).unwrap();
        let err = Signer::load_or_generate(&path, Algorithm::EcdsaP256Sha256).unwrap_err().to_string();
        assert!(err.contains("is Ed25519, but this key must be ECDSA P-256"), "{err}");
        let source = KeySource::File(path.clone());
        let either = [Algorithm::EcdsaP384Sha384, Algorithm::Ed25519];
        assert_eq!(Signer::open(&source, &Pkcs11Settings::default(), &either, false).unwrap().algorithm(), Algorithm::Ed25519);
        let err = Signer::open(&KeySource::File(dir.path().join("missing")), &Pkcs11Settings::default(), &either, false).unwrap_err();
        assert!(matches!(err, KeyError::Read { .. }), "{err}");
    }

    #[test]
    fn rejects_wrong_pem_label() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, pem::encode("PUBLIC KEY", b"xx")).unwrap();
        let err = Signer::load_or_generate(&path, Algorithm::EcdsaP256Sha256).unwrap_err().to_string();
        assert!(err.contains("expected a PRIVATE KEY"), "{err}");
    }

    #[test]
    fn a_slow_signature_may_block_on_any_runtime_thread() {
        // block_in_place panics on a current-thread runtime; off_runtime must not.
        let current = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert_eq!(current.block_on(async { off_runtime(|| 1) }), 1);
        let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        assert_eq!(multi.block_on(async { tokio::spawn(async { off_runtime(|| 2) }).await.unwrap() }), 2);
        assert_eq!(multi.block_on(async { tokio::task::spawn_blocking(|| off_runtime(|| 3)).await.unwrap() }), 3);
        assert_eq!(off_runtime(|| 4), 4);
    }
}
