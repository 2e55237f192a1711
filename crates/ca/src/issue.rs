//! Issuing a code-signing certificate: Fulcio's `signingCert` flow.
//!
//! 1. Verify the identity token.
//! 2. Verify that the caller holds the key: a signature over the token's `email` claim
//!    (or `sub` when there is none), or a CSR whose self-signature verifies.
//! 3. Build the TBS, sign the precertificate, log the precert entry in the CT log (with the
//!    precertificate beside it, for `get-entries`), and get its SCT.
//! 4. Sign the final certificate, with the SCT embedded.
//!
//! Step 1 ([`Issuer::identify`]), steps 2–3's checks and signatures, and step 4 run on the
//! bounded CPU pool (`signet_core::cpu`), off the async runtime; only the wait for the CT
//! log is async. Between steps 1 and 2 the caller may refuse the identity (scopes, limits).

use std::sync::Arc;
use std::time::SystemTime;

use der::{Decode, Encode};
use serde_json::Value;
use signet_core::{hash::sha256, pem};
use signet_core::pubkey::{self as verifier, PublicKey};
use spki::SubjectPublicKeyInfoOwned;
use x509_cert::request::CertReq;

use crate::authority::{Authority, CaError};
use crate::ct::{self, CtError, CtLog};
use crate::handover::Handover;
use crate::oidc::{Identity, TokenError, TokenVerifier};
use crate::x509;

/// How the caller proves it holds the key to certify.
pub enum KeyProof {
    /// `publicKeyRequest`: a PEM public key and a signature over the token's subject claim.
    PublicKey { pem: String, proof_of_possession: Vec<u8> },
    /// `certificateSigningRequest`: a PEM CSR, self-signed.
    Csr { pem: String },
}

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("public key: {0}")]
    Key(String),
    #[error("proof of possession: {0}")]
    Proof(String),
    #[error("certificate signing request: {0}")]
    Csr(String),
    #[error("the token's identity cannot be certified: {0}")]
    Identity(#[source] crate::identity::Uncertifiable),
    /// The caller's own limits refuse this identity (an API token's scope).
    #[error("{0}")]
    NotPermitted(String),
    #[error(transparent)]
    Ct(#[from] CtError),
    #[error(transparent)]
    Ca(#[from] CaError),
    #[error("issuing failed unexpectedly (a bug, logged): {0}")]
    Internal(String),
}

impl From<signet_core::cpu::Panicked> for IssueError {
    fn from(p: signet_core::cpu::Panicked) -> Self {
        IssueError::Internal(p.0)
    }
}

pub struct Issued {
    pub leaf_der: Vec<u8>,
    pub identity: Identity,
    /// The certificate's serial number, big-endian.
    pub serial: Vec<u8>,
}

#[derive(Clone)]
pub struct Issuer {
    /// The intermediate that signs leaves, and its successor once a rotation is scheduled.
    signing: Arc<Handover<Signing>>,
    /// The CT log the SCTs come from; a rotation of the CT log swaps a new one in.
    ct: Arc<arc_swap::ArcSwap<CtLog>>,
    pub tokens: Arc<TokenVerifier>,
    /// Certificates issued since start, for `/metrics`.
    issued: Arc<std::sync::atomic::AtomicU64>,
}

/// An intermediate and the hash of its key, which every SCT it asks for names.
struct Signing {
    authority: Arc<Authority>,
    issuer_key_hash: [u8; 32],
}

impl Signing {
    fn of(authority: Arc<Authority>) -> Signing {
        Signing { issuer_key_hash: sha256(authority.issuer_spki_der()), authority }
    }
}

impl Issuer {
    pub fn new(authority: Arc<Authority>, ct: CtLog, tokens: Arc<TokenVerifier>) -> Issuer {
        Issuer {
            signing: Arc::new(Handover::new(Signing::of(authority))),
            ct: Arc::new(arc_swap::ArcSwap::from_pointee(ct)),
            tokens,
            issued: Default::default(),
        }
    }

    /// The intermediate that signs now: its chain is what the CA serves.
    pub fn authority(&self) -> Arc<Authority> {
        self.signing.now().authority.clone()
    }

    /// A scheduled rotation: `next` signs every certificate dated from `from` (Unix seconds)
    /// on, the current intermediate none.
    pub fn hand_over_at(&self, from: i64, next: Arc<Authority>) {
        self.signing.hand_over_at(from, Signing::of(next));
    }

    /// A scheduled rotation whose successor could not be loaded: the current intermediate
    /// still stops at `until`, when its window in the trusted root ends.
    pub fn end_at(&self, until: i64) {
        self.signing.end_at(until);
    }

    /// Whether the successor from `from` is loaded.
    pub fn hands_over_at(&self, from: i64) -> bool {
        self.signing.has_next_from(from)
    }

    /// After the hand-over: the successor is the current intermediate.
    pub fn settle(&self, unix: i64) {
        self.signing.settle(unix);
    }

    /// The CT log that signs SCTs now.
    pub fn ct(&self) -> Arc<CtLog> {
        self.ct.load_full()
    }

    /// From now on, SCTs come from `ct` (a rotated CT log). A certificate under way keeps the
    /// log it started with.
    pub fn replace_ct(&self, ct: CtLog) {
        self.ct.store(Arc::new(ct));
    }

    /// Certificates issued since start.
    pub fn issued(&self) -> u64 {
        self.issued.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn issue(&self, token: &str, proof: KeyProof) -> Result<Issued, IssueError> {
        let identity = self.identify(token).await?;
        self.issue_for(identity, proof).await
    }

    /// Step 1 alone: the token's identity, verified and certifiable, so that the caller can
    /// apply its own limits to it (an API token's scope, the guard's per-identity limits)
    /// before anything is signed.
    pub async fn identify(&self, token: &str) -> Result<Identity, IssueError> {
        // A token's signature check (or a cache hit): a short job (signet_core::cpu).
        signet_core::cpu::inline(|| {
            let identity = self.tokens.verify(token)?;
            crate::identity::certifiable(&identity).map_err(IssueError::Identity)?;
            Ok(identity)
        })?
    }

    /// Steps 2 to 4, for an identity from [`Issuer::identify`].
    pub async fn issue_for(&self, identity: Identity, proof: KeyProof) -> Result<Issued, IssueError> {
        // One verification and one signature on each side of the CT log: short jobs, run
        // where they are (signet_core::cpu); the CT log's batch goes to the pool.
        // The certificate's notBefore chooses the intermediate (crate::handover), once for
        // both its signatures and its SCT.
        let now = SystemTime::now();
        let unix = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let signing = self.signing.at(unix).map_err(CaError::from)?;
        let prepared = signet_core::cpu::inline(|| self.prepare(&signing.authority, identity, proof, now))??;
        let sct = self.ct.load_full().submit(&signing.issuer_key_hash, &prepared.core_der, prepared.precertificate).await?;
        signet_core::cpu::inline(|| -> Result<Issued, IssueError> {
            let Prepared { identity, mut tbs } = prepared.rest;
            // The final certificate is the precertificate's TBS with the SCT list where the
            // poison was (RFC 6962 §3.1): both are the same TBS plus one last extension.
            tbs.extensions.get_or_insert_with(Vec::new).push(ct::sct_list_extension(&[sct]).map_err(CaError::from)?);
            let serial_bytes = tbs.serial_number.as_bytes().to_vec();
            let leaf_der = signing.authority.sign(tbs)?;
            self.issued.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Issued { leaf_der, identity, serial: serial_bytes })
        })?
    }

    /// Steps 2 and 3 up to the CT log: the key's proof, the TBS, and the signed precertificate.
    fn prepare(&self, authority: &Authority, identity: Identity, proof: KeyProof, now: SystemTime) -> Result<ForCt, IssueError> {
        let spki_der = match proof {
            KeyProof::PublicKey { pem: key_pem, proof_of_possession } => {
                let block = pem::decode_first(key_pem.as_bytes()).map_err(|e| IssueError::Key(e.to_string()))?;
                if block.label != "PUBLIC KEY" {
                    return Err(IssueError::Key(format!("PEM block {:?}; expected PUBLIC KEY", block.label)));
                }
                let key = PublicKey::from_spki(&block.der).map_err(|e| IssueError::Key(e.to_string()))?;
                // Fulcio: the challenge is the email claim when present, otherwise `sub`.
                let challenge = identity
                    .claims
                    .get("email")
                    .or_else(|| identity.claims.get("sub"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if proof_of_possession.is_empty() {
                    return Err(IssueError::Proof("missing; sign the token's email (or sub) claim with the key".into()));
                }
                key.verify_message(challenge.as_bytes(), &proof_of_possession).map_err(|_| {
                    IssueError::Proof(format!("the signature over {challenge:?} does not verify with the public key"))
                })?;
                block.der
            }
            KeyProof::Csr { pem: csr_pem } => verify_csr(&csr_pem)?,
        };
        let spki = SubjectPublicKeyInfoOwned::from_der(&spki_der).map_err(|e| IssueError::Key(e.to_string()))?;

        let serial = x509::random_serial().map_err(CaError::from)?;
        let core = authority.leaf_tbs(&identity, spki, serial, now, None)?;
        let core_der = core.to_der().map_err(CaError::from)?;
        let precertificate = authority.precertificate_of(core.clone())?;
        Ok(ForCt { core_der, precertificate, rest: Prepared { identity, tbs: core } })
    }
}

/// What issuance has made by the time it asks the CT log for an SCT.
struct ForCt {
    /// The TBS the SCT signs: the precertificate's, without the poison.
    core_der: Vec<u8>,
    precertificate: Vec<u8>,
    rest: Prepared,
}

struct Prepared {
    identity: Identity,
    /// The TBS without a last extension: the poison or the SCT list goes there.
    tbs: x509_cert::TbsCertificate,
}

/// Parses a PEM CSR, checks its self-signature, and returns its SPKI DER (public for the
/// fuzz target).
pub fn verify_csr(csr_pem: &str) -> Result<Vec<u8>, IssueError> {
    let block = pem::decode_first(csr_pem.as_bytes()).map_err(|e| IssueError::Csr(e.to_string()))?;
    if block.label != "CERTIFICATE REQUEST" && block.label != "NEW CERTIFICATE REQUEST" {
        return Err(IssueError::Csr(format!("PEM block {:?}; expected CERTIFICATE REQUEST", block.label)));
    }
    let csr = CertReq::from_der(&block.der).map_err(|e| IssueError::Csr(format!("does not parse: {e}")))?;
    let spki_der = csr.info.public_key.to_der().map_err(|e| IssueError::Csr(e.to_string()))?;
    let key = PublicKey::from_spki(&spki_der).map_err(|e| IssueError::Key(e.to_string()))?;
    let info = csr.info.to_der().map_err(|e| IssueError::Csr(e.to_string()))?;
    let sig = csr.signature.as_bytes().ok_or_else(|| IssueError::Csr("signature has unused bits".into()))?;
    let hash = match csr.algorithm.oid.to_string().as_str() {
        "1.2.840.10045.4.3.2" | "1.2.840.113549.1.1.11" => Some(verifier::HashAlg::Sha256),
        "1.2.840.10045.4.3.3" | "1.2.840.113549.1.1.12" => Some(verifier::HashAlg::Sha384),
        "1.2.840.10045.4.3.4" | "1.2.840.113549.1.1.13" => Some(verifier::HashAlg::Sha512),
        "1.3.101.112" => None,
        other => return Err(IssueError::Csr(format!("signature algorithm {other} is not supported"))),
    };
    let verified = match hash {
        Some(h) => {
            let digest = match h {
                verifier::HashAlg::Sha256 => sha256(&info).to_vec(),
                verifier::HashAlg::Sha384 => aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA384, &info).as_ref().to_vec(),
                verifier::HashAlg::Sha512 => aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA512, &info).as_ref().to_vec(),
            };
            key.verify_digest(h, &digest, sig)
        }
        None => key.verify_message(&info, sig),
    };
    verified.map_err(|_| IssueError::Csr("its signature does not verify with its own public key".into()))?;
    Ok(spki_der)
}
