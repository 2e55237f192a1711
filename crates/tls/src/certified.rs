//! A server's certificate chain and private key, parsed and checked once, before any backend
//! sees them.
//!
//! Checking here, in one place, means both backends refuse the same inputs with the same
//! words: a file that is not PEM, a PEM without the block we need, or a key that does not
//! belong to the certificate. An expired (or not yet valid) certificate is served anyway,
//! because refusing to start would turn a late renewal into an outage; it is reported by
//! [`CertifiedPair::validity_warning`] so that the operator sees it in the log.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use der::Decode;
use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// Why a certificate chain or key could not be used. Each names the file and says what was
/// expected instead.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot read {what} {path}: {source}")]
    Read { what: &'static str, path: String, source: std::io::Error },
    #[error("{what} {path} is not PEM: {why}; expected {expected}")]
    NotPem { what: &'static str, path: String, why: String, expected: &'static str },
    #[error("certificate {path} holds no CERTIFICATE block; expected the server certificate, then its intermediates")]
    NoCertificate { path: String },
    #[error("key {path} holds no private key; expected one PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY block")]
    NoKey { path: String },
    #[error("certificate {path}: the first certificate is not valid X.509 DER: {why}")]
    BadCertificate { path: String, why: String },
    #[error("key {key} does not match certificate {cert}: {why}; expected the private key of the first certificate")]
    KeyMismatch { cert: String, key: String, why: String },
    #[error("client CA bundle {path} holds no CERTIFICATE block; expected the certificates of the CAs that issue client certificates")]
    NoClientCa { path: String },
    #[error("the {backend} backend refused the certificate or key: {why}")]
    Backend { backend: &'static str, why: String },
}

/// A checked certificate chain (leaf first) and its private key.
pub struct CertifiedPair {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// The rustls form, built while checking that the key matches; reused by that backend.
    rustls: Arc<CertifiedKey>,
    not_before: SystemTime,
    not_after: SystemTime,
    /// Where the pair came from, for log lines: `cert.pem + key.pem`.
    origin: String,
}

impl CertifiedPair {
    /// Reads and checks a PEM certificate chain and a PEM private key.
    pub fn from_files(cert: &Path, key: &Path) -> Result<CertifiedPair, CertError> {
        let read = |what, path: &Path| {
            std::fs::read(path).map_err(|source| CertError::Read { what, path: path.display().to_string(), source })
        };
        let (cert_pem, key_pem) = (read("certificate", cert)?, read("key", key)?);
        Self::from_pem(&cert_pem, &key_pem, &cert.display().to_string(), &key.display().to_string())
    }

    /// Checks PEM bytes; `cert_name` and `key_name` only label errors.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8], cert_name: &str, key_name: &str) -> Result<CertifiedPair, CertError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>().map_err(|e| CertError::NotPem {
            what: "certificate",
            path: cert_name.into(),
            why: e.to_string(),
            expected: "-----BEGIN CERTIFICATE----- blocks",
        })?;
        if chain.is_empty() {
            return Err(CertError::NoCertificate { path: cert_name.into() });
        }
        let key = private_key(key_pem, key_name)?;
        let leaf = x509_cert::Certificate::from_der(&chain[0])
            .map_err(|e| CertError::BadCertificate { path: cert_name.into(), why: e.to_string() })?;
        let validity = &leaf.tbs_certificate.validity;
        let rustls = CertifiedKey::from_der(chain.clone(), key.clone_key(), &crate::client::provider()).map_err(|e| {
            CertError::KeyMismatch { cert: cert_name.into(), key: key_name.into(), why: e.to_string() }
        })?;
        Ok(CertifiedPair {
            chain,
            key,
            rustls: Arc::new(rustls),
            not_before: validity.not_before.to_system_time(),
            not_after: validity.not_after.to_system_time(),
            origin: format!("{cert_name} + {key_name}"),
        })
    }

    /// The chain, leaf first, in DER.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The private key in DER (PKCS#8, SEC1 or PKCS#1, as the file had it).
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }

    pub(crate) fn rustls_key(&self) -> Arc<CertifiedKey> {
        self.rustls.clone()
    }

    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// `cert.pem + key.pem`: where the pair was read from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// A sentence for the log when the certificate is outside its validity period at `now`.
    pub fn validity_warning(&self, now: SystemTime) -> Option<String> {
        let ago = |t: SystemTime| now.duration_since(t).map(|d| d.as_secs()).unwrap_or(0);
        if now > self.not_after {
            Some(format!(
                "TLS certificate {} expired {} s ago; clients will refuse it until it is renewed",
                self.origin,
                ago(self.not_after)
            ))
        } else if now < self.not_before {
            Some(format!("TLS certificate {} is not valid yet (check the clock); clients will refuse it", self.origin))
        } else {
            None
        }
    }
}

/// The first private key block of `pem`, of whichever of the three usual encodings.
fn private_key(pem: &[u8], name: &str) -> Result<PrivateKeyDer<'static>, CertError> {
    let not_pem = |why: String| CertError::NotPem {
        what: "key",
        path: name.into(),
        why,
        expected: "a -----BEGIN PRIVATE KEY----- block",
    };
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem) {
        let (kind, der) = section.map_err(|e| not_pem(e.to_string()))?;
        let key = match kind {
            SectionKind::PrivateKey => PrivateKeyDer::Pkcs8(der.into()),
            SectionKind::EcPrivateKey => PrivateKeyDer::Sec1(der.into()),
            SectionKind::RsaPrivateKey => PrivateKeyDer::Pkcs1(der.into()),
            _ => continue,
        };
        return Ok(key);
    }
    Err(CertError::NoKey { path: name.into() })
}
