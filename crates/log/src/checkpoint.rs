//! Signing checkpoints as C2SP signed notes (c2sp.org/signed-note, c2sp.org/tlog-checkpoint).
//! Parsing and verification are in `signet_core::note` and re-exported here.
//!
//! ```text
//! <origin>\n<tree size>\n<base64 root hash>\n[extension lines]\n
//! \n
//! — <key name> base64(key hint ‖ signature)\n
//! ```
//! signet signs with ECDSA P-256 and uses the first four bytes of SHA-256(SPKI DER) as the
//! key hint, which is what Rekor does and what sigstore clients look keys up by.

use std::sync::Arc;

use signet_core::b64;
use signet_keys::{KeyError, Signer};
pub use signet_core::note::{verify, Checkpoint, NoteError, SignedNote};

/// A checkpoint together with its signed-note serialization.
#[derive(Debug, Clone)]
pub struct SignedCheckpoint {
    pub checkpoint: Checkpoint,
    pub note: String,
}

/// Signs checkpoints under one key name (the log's hostname).
pub struct NoteSigner {
    name: String,
    key: Arc<Signer>,
    /// A second, Ed25519 signature line for witnesses (c2sp.org/tlog-witness), when set.
    note_key: Option<Arc<signet_keys::NoteSigner>>,
}

impl NoteSigner {
    pub fn new(name: impl Into<String>, key: Arc<Signer>) -> Self {
        NoteSigner { name: name.into(), key, note_key: None }
    }

    pub fn with_note_key(mut self, note_key: Option<Arc<signet_keys::NoteSigner>>) -> Self {
        self.note_key = note_key;
        self
    }

    pub fn key(&self) -> &Signer {
        &self.key
    }

    /// The key name on the signature line.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn sign(&self, checkpoint: Checkpoint) -> Result<SignedCheckpoint, KeyError> {
        let body = checkpoint.body();
        let sig = self.key.sign(body.as_bytes())?;
        let mut blob = Vec::with_capacity(4 + sig.len());
        blob.extend_from_slice(&self.key.key_id()[..4]);
        blob.extend_from_slice(&sig);
        let mut note = format!("{body}\n\u{2014} {} {}\n", self.name, b64::encode(blob));
        if let Some(k) = &self.note_key {
            note.push_str(&signet_core::notekey::signature_line(&k.sign(&body, 0)?));
        }
        Ok(SignedCheckpoint { checkpoint, note })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_and_verifies_c2sp_layout() {
        let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
        let signer = NoteSigner::new("log.example", key.clone());
        let cp = Checkpoint { origin: "log.example - 42".into(), size: 7, root_hash: [9u8; 32] };
        let signed = signer.sign(cp.clone()).unwrap();
        let lines: Vec<&str> = signed.note.split('\n').collect();
        assert_eq!(lines[0], "log.example - 42");
        assert_eq!(lines[1], "7");
        assert_eq!(lines[3], "");
        assert!(lines[4].starts_with("\u{2014} log.example "));
        assert!(signed.note.ends_with('\n'));
        assert_eq!(verify(&signed.note, "log.example", key.spki_der()).unwrap(), cp);

        let tampered = signed.note.replacen("\n7\n", "\n8\n", 1);
        assert_eq!(verify(&tampered, "log.example", key.spki_der()), Err(NoteError::BadSignature));
        let other = Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
        assert!(matches!(verify(&signed.note, "log.example", other.spki_der()), Err(NoteError::NoSignature(_))));
    }

    #[test]
    fn tolerates_cosignatures() {
        let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
        let signed = NoteSigner::new("a", key.clone())
            .sign(Checkpoint { origin: "a".into(), size: 1, root_hash: [1; 32] })
            .unwrap();
        let with_cosig = format!("{}\u{2014} witness {}\n", signed.note, b64::encode([7u8; 68]));
        assert!(verify(&with_cosig, "a", key.spki_der()).is_ok());
    }
}
