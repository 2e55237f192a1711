//! The order of the checks. Cheap, self-contained checks come first, and each later check
//! relies on the earlier ones: the signature binds the artifact to the key, the log entry
//! binds the signature to a time, and the time decides whether the certificate was valid.

use signet_core::pubkey::PublicKey;

use crate::body::{self, Expected};
use crate::bundle::{Bundle, Content, Material};
use crate::cert::Cert;
use crate::error::{Result, VerifyError};
use crate::policy::{self, Policy};
use crate::signature::{self, Artifact};
use crate::time::{format_unix, SigningTime, TimeSource};
use crate::trust_root::{LogKey, TrustedRoot};
use crate::{chain, dsse, sct, timestamp, tlog};

/// Verifies bundles against one trusted root, parsed once and shared by every call.
#[derive(Debug, Clone)]
pub struct Verifier {
    root: TrustedRoot,
}

/// What a successful verification established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Trusted times at which the signature existed: SET-backed integrated times and
    /// RFC 3161 timestamps.
    pub times: Vec<SigningTime>,
    /// The certificate identity and OIDC issuer, for certificate bundles.
    pub identity: Option<String>,
    pub issuer: Option<String>,
}

impl Verifier {
    /// Parses a trusted root (protobuf-specs TrustedRoot JSON).
    pub fn new(trusted_root_json: &[u8]) -> Result<Verifier> {
        Ok(Verifier { root: TrustedRoot::from_json(trusted_root_json)? })
    }

    pub fn from_root(root: TrustedRoot) -> Verifier {
        Verifier { root }
    }

    pub fn trusted_root(&self) -> &TrustedRoot {
        &self.root
    }

    /// Parses and verifies a bundle in its JSON form.
    pub fn verify_json(&self, bundle_json: &[u8], artifact: Artifact<'_>, policy: &Policy) -> Result<Verified> {
        self.verify(&Bundle::from_json(bundle_json)?, artifact, policy)
    }

    pub fn verify(&self, bundle: &Bundle, artifact: Artifact<'_>, policy: &Policy) -> Result<Verified> {
        // 1. The signer: a certificate for an identity, or the managed key the caller gave.
        let (leaf, key): (Option<&Cert>, &PublicKey) = match (&bundle.material, policy) {
            (Material::Certificate(c), Policy::Identity { .. }) => (Some(c), &c.key),
            (Material::PublicKey { .. }, Policy::Key(k)) => (None, k),
            (Material::PublicKey { .. }, Policy::Identity { .. }) => {
                return Err(VerifyError::Policy(
                    "the bundle is signed with a managed key, but no key was given to verify it with".into(),
                ))
            }
            (Material::Certificate(_), Policy::Key(_)) => {
                return Err(VerifyError::Policy(
                    "a managed key was given, but the bundle is signed with a certificate".into(),
                ))
            }
        };

        // 2. The artifact signature: over the artifact (or digest), or over the DSSE PAE.
        let signed = match &bundle.content {
            Content::Message(m) => signature::verify_message(m, artifact, key)?,
            Content::Dsse(e) => dsse::verify(e, artifact, key)?,
        };

        // 3. The log entries: trusted log, same content as the bundle, then proofs and SET.
        if bundle.tlog_entries.is_empty() {
            return Err(VerifyError::Tlog("the bundle has no transparency log entry".into()));
        }
        let expected = Expected {
            content: &bundle.content,
            signed: &signed,
            cert_der: leaf.map(|c| c.der.as_slice()),
            spki_der: &key.spki_der,
        };
        let mut times = Vec::with_capacity(bundle.tlog_entries.len() + bundle.timestamps.len());
        let mut untimed_logs: Vec<&LogKey> = Vec::new();
        for entry in &bundle.tlog_entries {
            tlog::log_of(&self.root, entry)?;
            body::check(entry, &expected)?;
            let checked = tlog::verify_entry(&self.root, entry, bundle.version)?;
            match checked.integrated_time {
                Some(unix) => times.push(SigningTime { unix, source: TimeSource::IntegratedTime }),
                None => untimed_logs.push(checked.log),
            }
        }

        // 4. RFC 3161 timestamps over the signature.
        let mut tsa_times = Vec::with_capacity(bundle.timestamps.len());
        for ts in &bundle.timestamps {
            tsa_times.push(timestamp::verify(&self.root, ts, bundle.signature_bytes())?.time);
        }
        // Rekor v2 entries carry no integrated time: a timestamp must date them, and their
        // log must have been trusted then.
        if !untimed_logs.is_empty() && tsa_times.is_empty() {
            return Err(VerifyError::SigningTime(
                "the log entry has no SET-backed integrated time (Rekor v2), so an RFC 3161 timestamp is required, and the bundle has none"
                    .into(),
            ));
        }
        for log in &untimed_logs {
            if let Some(t) = tsa_times.iter().find(|t| !log.valid.contains(**t)) {
                return Err(VerifyError::Tlog(format!(
                    "timestamp {} is outside the validity of log {} ({})",
                    format_unix(*t),
                    log.base_url,
                    log.valid
                )));
            }
        }
        times.extend(tsa_times.iter().map(|&unix| SigningTime { unix, source: TimeSource::Rfc3161 }));
        if times.is_empty() {
            return Err(VerifyError::SigningTime(
                "no trusted time: no verified RFC 3161 timestamp and no SET-backed integrated time".into(),
            ));
        }

        // 5. The certificate, at those times: chain, SCT, usage, identity.
        let (mut identity, mut issuer) = (None, None);
        if let (Some(leaf), Policy::Identity { identity: want_id, issuer: want_iss }) = (leaf, policy) {
            let ca = chain::verify(&self.root, leaf, &bundle.extra_chain, &times)?;
            sct::verify(&self.root, leaf, &ca.chain[0])?;
            policy::check_usage(leaf)?;
            let (id, iss) = policy::check_identity(leaf, want_id, want_iss)?;
            identity = Some(id);
            issuer = Some(iss);
        }
        Ok(Verified { times, identity, issuer })
    }
}
