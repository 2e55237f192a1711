//! [`NoteSigner`]: an Ed25519 [`Signer`] that signs C2SP signed notes under one name: a
//! witness's cosignatures, or a log's Ed25519 checkpoint signature.

use std::fmt;
use std::path::Path;

use signet_core::note::NoteSignature;
use signet_core::notekey::{cosigned_message, NoteKeyType, VerifierKey};

use crate::source::{KeySource, Pkcs11Settings};
use crate::{Algorithm, KeyError, Signer};

pub struct NoteSigner {
    key: Signer,
    vkey: VerifierKey,
}

impl fmt::Debug for NoteSigner {
    // Never print key material, only the public identity.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NoteSigner({})", self.vkey)
    }
}

impl NoteSigner {
    /// The key at `path` (PKCS#8 PEM), or a new one written there with mode 0600.
    pub fn load_or_generate(path: &Path, name: &str, kind: NoteKeyType) -> Result<NoteSigner, KeyError> {
        NoteSigner::new(Signer::load_or_generate(path, Algorithm::Ed25519)?, name, kind)
    }

    /// The Ed25519 key `source` names (a file, made if `generate`; or on a token).
    pub fn open(source: &KeySource, settings: &Pkcs11Settings, name: &str, kind: NoteKeyType, generate: bool) -> Result<NoteSigner, KeyError> {
        NoteSigner::new(Signer::open(source, settings, &[Algorithm::Ed25519], generate)?, name, kind)
    }

    /// A new key held in memory only (tests, benches).
    pub fn generate(name: &str, kind: NoteKeyType) -> Result<NoteSigner, KeyError> {
        NoteSigner::new(Signer::generate(Algorithm::Ed25519)?, name, kind)
    }

    /// `key` signing under `name`; it must be Ed25519.
    pub fn new(key: Signer, name: &str, kind: NoteKeyType) -> Result<NoteSigner, KeyError> {
        let invalid = |why: String| KeyError::Invalid { path: name.to_string(), why };
        let public = key.ed25519_public().ok_or_else(|| invalid(format!("a note key must be Ed25519, not {}", key.algorithm())))?;
        let vkey = VerifierKey::new(name, kind, public).map_err(|e| invalid(e.to_string()))?;
        Ok(NoteSigner { key, vkey })
    }

    pub fn vkey(&self) -> &VerifierKey {
        &self.vkey
    }

    /// Whether the private key is on a token.
    pub fn on_token(&self) -> bool {
        self.key.on_token()
    }

    /// Signs a checkpoint's text: a log signature, or a cosignature made at `time` (seconds).
    pub fn sign(&self, text: &str, time: u64) -> Result<NoteSignature, KeyError> {
        let signature = match self.vkey.kind {
            NoteKeyType::Ed25519 => self.key.sign(text.as_bytes())?,
            NoteKeyType::Cosignature => {
                let mut sig = time.to_be_bytes().to_vec();
                sig.extend_from_slice(&self.key.sign(cosigned_message(time, text).as_bytes())?);
                sig
            }
        };
        Ok(NoteSignature { name: self.vkey.name.clone(), hint: self.vkey.id(), signature })
    }
}

#[cfg(test)]
mod tests {
    use signet_core::note::SignedNote;
    use signet_core::notekey::signature_line;

    use super::*;

    #[test]
    fn a_signer_kept_on_disk_signs_lines_its_vkey_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("witness.pem");
        let signer = NoteSigner::load_or_generate(&path, "w.example/1", NoteKeyType::Cosignature).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let again = NoteSigner::load_or_generate(&path, "w.example/1", NoteKeyType::Cosignature).unwrap();
        assert_eq!(again.vkey(), signer.vkey());
        let text = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
        let note = format!("{text}\n{}", signature_line(&signer.sign(text, 42).unwrap()));
        let parsed = SignedNote::parse(&note).unwrap();
        assert_eq!(signer.vkey().verify(&parsed), Some(42));
        let log = NoteSigner::generate("example.com/log", NoteKeyType::Ed25519).unwrap();
        let note = format!("{text}\n{}", signature_line(&log.sign(text, 0).unwrap()));
        assert_eq!(log.vkey().verify(&SignedNote::parse(&note).unwrap()), Some(0));
        assert_eq!(signer.vkey().verify(&SignedNote::parse(&note).unwrap()), None);
    }

    #[test]
    fn a_note_key_must_be_ed25519() {
        let p256 = Signer::generate(Algorithm::EcdsaP256Sha256).unwrap();
        let err = NoteSigner::new(p256, "w.example/1", NoteKeyType::Cosignature).unwrap_err().to_string();
        assert!(err.contains("must be Ed25519, not ECDSA P-256"), "{err}");
    }
}
