//! A certificate chain and key as OpenSSL objects: converted once per pair read, presented on
//! every connection that the pair serves.

use openssl::pkey::{PKey, Private};
use openssl::ssl::SslRef;
use openssl::x509::X509;
use rustls::pki_types::PrivateKeyDer;

use crate::certified::{CertError, CertifiedPair};

/// A certificate chain and key as OpenSSL objects, converted once per pair read.
pub(crate) struct OpensslPair {
    pub(crate) leaf: X509,
    pub(crate) chain: Vec<X509>,
    pub(crate) key: PKey<Private>,
}

impl OpensslPair {
    pub(crate) fn new(pair: &CertifiedPair) -> Result<OpensslPair, CertError> {
        let refused = |e: openssl::error::ErrorStack| CertError::Backend { backend: "openssl", why: e.to_string() };
        let mut chain = pair.chain().iter();
        let leaf = chain.next().ok_or_else(|| CertError::Backend { backend: "openssl", why: "no certificate".into() })?;
        let leaf = X509::from_der(leaf).map_err(refused)?;
        let chain = chain.map(|c| X509::from_der(c).map_err(refused)).collect::<Result<Vec<_>, _>>()?;
        let key = match pair.key() {
            PrivateKeyDer::Pkcs8(der) => PKey::private_key_from_pkcs8(der.secret_pkcs8_der()),
            other => PKey::private_key_from_der(other.secret_der()),
        }
        .map_err(refused)?;
        Ok(OpensslPair { leaf, chain, key })
    }

    /// Presents this pair on one connection (the servername callback).
    pub(crate) fn apply(&self, ssl: &mut SslRef) -> Result<(), openssl::error::ErrorStack> {
        ssl.set_certificate(&self.leaf)?;
        ssl.set_private_key(&self.key)?;
        for extra in &self.chain {
            ssl.add_chain_cert(extra.clone())?;
        }
        Ok(())
    }
}
