//! mTLS: the client certificates a listener asks for, and who a verified one names.
//!
//! A listener either asks for none (the default), asks and lets a client without one in
//! (`optional`: the guard then treats it as anonymous), or refuses the handshake without one
//! (`required`). A certificate is verified against the client-CA bundle, chain and validity,
//! by the backend, during the handshake; what it names is then read from its subject
//! alternative names ([`subject_alt_names`]) and handed to the guard as a principal.

use std::path::Path;

use der::Decode;
use x509_cert::der::oid::AssociatedOid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::SubjectAltName;

use crate::certified::CertError;

/// Whether a handshake without a client certificate goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuthMode {
    Optional,
    Required,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a client-certificate mode; expected optional or required")]
pub struct UnknownClientAuthMode(pub String);

impl std::str::FromStr for ClientAuthMode {
    type Err = UnknownClientAuthMode;
    fn from_str(s: &str) -> Result<Self, UnknownClientAuthMode> {
        match s {
            "optional" => Ok(ClientAuthMode::Optional),
            "required" => Ok(ClientAuthMode::Required),
            other => Err(UnknownClientAuthMode(other.to_string())),
        }
    }
}

/// The client certificates a listener accepts: its mode and the CAs that issue them.
#[derive(Debug, Clone)]
pub struct ClientAuth {
    pub mode: ClientAuthMode,
    cas: Vec<CertificateDer<'static>>,
    /// Where the CAs came from, for messages.
    origin: String,
}

impl ClientAuth {
    /// The CA certificates of a PEM bundle; `origin` names it in errors.
    pub fn from_pem(mode: ClientAuthMode, pem: &[u8], origin: &str) -> Result<ClientAuth, CertError> {
        let cas = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| CertError::NotPem {
            what: "client CA bundle",
            path: origin.into(),
            why: e.to_string(),
            expected: "-----BEGIN CERTIFICATE----- blocks of the CAs that issue client certificates",
        })?;
        if cas.is_empty() {
            return Err(CertError::NoClientCa { path: origin.into() });
        }
        for ca in &cas {
            x509_cert::Certificate::from_der(ca).map_err(|e| CertError::BadCertificate { path: origin.into(), why: e.to_string() })?;
        }
        // Each backend must take the bundle too, or the first handshake would find out.
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&cas)?.into(), crate::client::provider())
            .build()
            .map_err(|e| CertError::Backend { backend: "rustls", why: format!("client CA bundle {origin}: {e}") })?;
        Ok(ClientAuth { mode, cas, origin: origin.into() })
    }

    pub fn from_file(mode: ClientAuthMode, path: &Path) -> Result<ClientAuth, CertError> {
        let pem = std::fs::read(path)
            .map_err(|source| CertError::Read { what: "client CA bundle", path: path.display().to_string(), source })?;
        Self::from_pem(mode, &pem, &path.display().to_string())
    }

    pub fn cas(&self) -> &[CertificateDer<'static>] {
        &self.cas
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The rustls verifier: chains to one of the CAs, valid now, for client authentication.
    pub(crate) fn rustls_verifier(&self) -> Result<std::sync::Arc<dyn rustls::server::danger::ClientCertVerifier>, CertError> {
        let builder = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&self.cas)?.into(), crate::client::provider());
        let builder = match self.mode {
            ClientAuthMode::Optional => builder.allow_unauthenticated(),
            ClientAuthMode::Required => builder,
        };
        builder.build().map_err(|e| CertError::Backend { backend: "rustls", why: format!("client CA bundle {}: {e}", self.origin) })
    }
}

fn roots(cas: &[CertificateDer<'static>]) -> Result<rustls::RootCertStore, CertError> {
    let mut store = rustls::RootCertStore::empty();
    for ca in cas {
        store.add(ca.clone()).map_err(|e| CertError::Backend { backend: "rustls", why: format!("a client CA: {e}") })?;
    }
    Ok(store)
}

/// The names a certificate's subject alternative names give: URIs (SPIFFE ids), DNS names
/// and email addresses, in the certificate's order. None for a certificate without them, or
/// one that does not parse (the backend verified it, so that is not expected).
pub fn subject_alt_names(der: &[u8]) -> Vec<String> {
    let Ok(cert) = x509_cert::Certificate::from_der(der) else { return Vec::new() };
    let extensions = cert.tbs_certificate.extensions.unwrap_or_default();
    let Some(ext) = extensions.iter().find(|e| e.extn_id == SubjectAltName::OID) else {
        return Vec::new();
    };
    let Ok(names) = SubjectAltName::from_der(ext.extn_value.as_bytes()) else { return Vec::new() };
    names
        .0
        .iter()
        .filter_map(|n| match n {
            GeneralName::UniformResourceIdentifier(s) | GeneralName::DnsName(s) | GeneralName::Rfc822Name(s) => Some(s.to_string()),
            _ => None,
        })
        .collect()
}
