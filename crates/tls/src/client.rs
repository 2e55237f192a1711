//! Which servers a client trusts, as a rustls `ClientConfig`.
//!
//! The crypto provider is always aws-lc-rs, handed to rustls explicitly: nothing depends
//! on a process-wide default provider, and ring is never linked.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// The roots a client verifies server certificates against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The operating system's store (`/etc/ssl/certs`; `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured).
    Platform,
    /// Only the certificates in this PEM bundle: for private CAs.
    PemFile(PathBuf),
    /// Only the certificates in this PEM text, from a config that carries it inline (Fulcio's
    /// `CACert`); `name` says where it came from in errors.
    Pem { name: String, pem: Vec<u8> },
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("CA bundle {path}: {why}")]
    Bundle { path: String, why: String },
    #[error("platform root certificates: {0}")]
    Platform(String),
    #[error("TLS client setup: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The crypto provider every signet TLS config uses. Its key exchange groups are named here,
/// not left to rustls' defaults: those change with a cargo feature (`prefer-post-quantum`, on
/// whenever any crate in the build enables rustls' defaults) and would silently change what
/// every handshake costs and what the benchmarks compare with OpenSSL.
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::aws_lc_rs::kx_group;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1];
    Arc::new(provider)
}

/// A client config that verifies servers against `trust`, with rustls' safe protocol versions.
pub fn client_config(trust: &Trust) -> Result<Arc<ClientConfig>, TrustError> {
    let roots = roots(trust)?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The platform's roots, read and parsed once per process (a few ms for ~150 certificates:
/// report 002 paid it per handshake). A store that could not be read is not cached.
fn platform_roots() -> Result<RootCertStore, TrustError> {
    platform().cloned()
}

/// The platform's root store, loaded once.
fn platform() -> Result<&'static RootCertStore, TrustError> {
    static LOADED: std::sync::OnceLock<RootCertStore> = std::sync::OnceLock::new();
    if let Some(loaded) = LOADED.get() {
        return Ok(loaded);
    }
    let mut store = RootCertStore::empty();
    LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let found = rustls_native_certs::load_native_certs();
    let (added, _ignored) = store.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(TrustError::Platform(format!(
            "none found ({}); install ca-certificates or configure a CA bundle file",
            if errors.is_empty() { "the store is empty".to_string() } else { errors.join("; ") }
        )));
    }
    Ok(LOADED.get_or_init(|| store))
}

fn pem_bundle(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let bundle = |why: String| TrustError::Bundle { path: path.display().to_string(), why };
    let pem = std::fs::read(path).map_err(|e| bundle(e.to_string()))?;
    pem_certs(&path.display().to_string(), &pem)
}

fn pem_certs(name: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let bundle = |why: String| TrustError::Bundle { path: name.to_string(), why };
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| bundle(format!("not a PEM file: {e}")))?;
    if certs.is_empty() {
        return Err(bundle("holds no CERTIFICATE block; expected PEM CA certificates".into()));
    }
    Ok(certs)
}

static LOADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many times this process read the platform's store (for tests).
pub fn platform_loads() -> usize {
    LOADS.load(std::sync::atomic::Ordering::Relaxed)
}

fn add_all(store: &mut RootCertStore, name: &str, certs: Vec<CertificateDer<'static>>) -> Result<(), TrustError> {
    for (i, cert) in certs.into_iter().enumerate() {
        store
            .add(cert)
            .map_err(|e| TrustError::Bundle { path: name.to_string(), why: format!("certificate {} is not a usable CA certificate: {e}", i + 1) })?;
    }
    Ok(())
}

fn roots(trust: &Trust) -> Result<RootCertStore, TrustError> {
    let mut store = RootCertStore::empty();
    match trust {
        Trust::Platform => store = platform_roots()?,
        Trust::PemFile(path) => add_all(&mut store, &path.display().to_string(), pem_bundle(path)?)?,
        Trust::Pem { name, pem } => add_all(&mut store, name, pem_certs(name, pem)?)?,
    }
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_errors_name_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = client_config(&Trust::PemFile(missing.clone())).unwrap_err().to_string();
        assert!(err.contains(&missing.display().to_string()), "{err}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "just text\n").unwrap();
        let err = client_config(&Trust::PemFile(empty)).unwrap_err().to_string();
        assert!(err.contains("no CERTIFICATE block"), "{err}");

        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").unwrap();
        let err = client_config(&Trust::PemFile(junk)).unwrap_err().to_string();
        assert!(err.contains("certificate 1"), "{err}");
    }

    #[test]
    fn a_generated_ca_is_accepted_as_a_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::testing::TestPki::new();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, &pki.ca_pem).unwrap();
        client_config(&Trust::PemFile(path)).unwrap();
    }
}
