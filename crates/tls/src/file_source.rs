//! The certificate files: a PEM chain and a PEM key on disk (and, for mTLS, a client-CA bundle),
//! read and checked. [`crate::reloader`] reads them again while a server runs.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::certified::{CertError, CertifiedPair};
use crate::client_auth::{ClientAuth, ClientAuthMode};

/// A certificate chain file and its key file, and, for mTLS, a client-CA bundle file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Re-read like the pair; a changed bundle is verified against from the next handshake.
    pub client_ca: Option<(PathBuf, ClientAuthMode)>,
}

impl FileSource {
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> FileSource {
        FileSource { cert: cert.into(), key: key.into(), client_ca: None }
    }

    /// The same, asking clients for certificates issued by the CAs in `bundle`.
    pub fn with_client_ca(self, bundle: impl Into<PathBuf>, mode: ClientAuthMode) -> FileSource {
        FileSource { client_ca: Some((bundle.into(), mode)), ..self }
    }

    /// Reads and checks the client-CA bundle now, if there is one.
    pub fn load_client_auth(&self) -> Result<Option<ClientAuth>, CertError> {
        self.client_ca.as_ref().map(|(path, mode)| ClientAuth::from_file(*mode, path)).transpose()
    }

    /// Reads and checks the pair now; logs a warning if the certificate is expired.
    pub fn load(&self) -> Result<CertifiedPair, CertError> {
        let pair = CertifiedPair::from_files(&self.cert, &self.key)?;
        if let Some(warning) = pair.validity_warning(SystemTime::now()) {
            tracing::warn!("{warning}");
        }
        Ok(pair)
    }

    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.cert.clone(), self.key.clone()];
        files.extend(self.client_ca.as_ref().map(|(path, _)| path.clone()));
        files
    }
}

/// A certificate file's and a key file's bytes, as read.
pub(crate) type Contents = (Vec<u8>, Vec<u8>);

pub(crate) fn contents(cert: &Path, key: &Path) -> Result<Contents, CertError> {
    let read = |what, path: &Path| {
        std::fs::read(path).map_err(|source| CertError::Read { what, path: path.display().to_string(), source })
    };
    Ok((read("certificate", cert)?, read("key", key)?))
}
