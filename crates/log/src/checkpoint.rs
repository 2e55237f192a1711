//! Checkpoints as C2SP signed notes (c2sp.org/signed-note, c2sp.org/tlog-checkpoint).
//!
//! ```text
//! <origin>\n<tree size>\n<base64 root hash>\n[extension lines]\n
//! \n
//! — <key name> base64(key hint ‖ signature)\n
//! ```
//! signet signs with ECDSA P-256 and uses the first four bytes of SHA-256(SPKI DER) as the
//! key hint, which is what Rekor does and what sigstore clients look keys up by.

use std::sync::Arc;

use signet_core::hash::Hash;
use signet_core::keys::{self, KeyError, SigningKey};
use signet_core::b64;

/// The unsigned body of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root_hash: Hash,
}

impl Checkpoint {
    /// The note text that is signed: three lines, each ending in a newline.
    pub fn body(&self) -> String {
        format!("{}\n{}\n{}\n", self.origin, self.size, b64::encode(self.root_hash))
    }
}

/// A checkpoint together with its signed-note serialization.
#[derive(Debug, Clone)]
pub struct SignedCheckpoint {
    pub checkpoint: Checkpoint,
    pub note: String,
}

/// Signs checkpoints under one key name (the log's hostname).
pub struct NoteSigner {
    name: String,
    key: Arc<SigningKey>,
}

impl NoteSigner {
    pub fn new(name: impl Into<String>, key: Arc<SigningKey>) -> Self {
        NoteSigner { name: name.into(), key }
    }

    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    pub fn sign(&self, checkpoint: Checkpoint) -> Result<SignedCheckpoint, KeyError> {
        let body = checkpoint.body();
        let sig = self.key.sign(body.as_bytes())?;
        let mut blob = Vec::with_capacity(4 + sig.len());
        blob.extend_from_slice(&self.key.key_id()[..4]);
        blob.extend_from_slice(&sig);
        let note = format!("{body}\n\u{2014} {} {}\n", self.name, b64::encode(blob));
        Ok(SignedCheckpoint { checkpoint, note })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("checkpoint note is malformed: {0}")]
    Malformed(&'static str),
    #[error("checkpoint carries no signature by key {0}")]
    NoSignature(String),
    #[error("checkpoint signature does not verify")]
    BadSignature,
}

/// Parses a signed note and verifies the signature of `name` made by the P-256 key `spki_der`.
/// Signatures by other keys are tolerated (cosignatures), as the signed-note spec requires.
pub fn verify(note: &str, name: &str, spki_der: &[u8]) -> Result<Checkpoint, NoteError> {
    let split = note.rfind("\n\n").ok_or(NoteError::Malformed("no blank line before signatures"))?;
    let (body, sigs) = (&note[..split + 1], &note[split + 2..]);
    let hint = &signet_core::hash::sha256(spki_der)[..4];
    let mut found = false;
    for line in sigs.lines() {
        let rest = line.strip_prefix("\u{2014} ").ok_or(NoteError::Malformed("signature line must start with an em dash"))?;
        let (line_name, sig_b64) = rest.rsplit_once(' ').ok_or(NoteError::Malformed("signature line has no signature"))?;
        let blob = b64::decode(sig_b64).map_err(|_| NoteError::Malformed("signature is not base64"))?;
        if line_name != name || blob.len() < 5 || &blob[..4] != hint {
            continue;
        }
        found = true;
        if !keys::verify_p256(spki_der, body.as_bytes(), &blob[4..]) {
            return Err(NoteError::BadSignature);
        }
    }
    if !found {
        return Err(NoteError::NoSignature(name.to_string()));
    }
    parse_body(body)
}

fn parse_body(body: &str) -> Result<Checkpoint, NoteError> {
    let mut lines = body.lines();
    let origin = lines.next().filter(|o| !o.is_empty()).ok_or(NoteError::Malformed("missing origin"))?;
    let size = lines
        .next()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or(NoteError::Malformed("tree size is not a decimal integer"))?;
    let root = lines
        .next()
        .and_then(|r| b64::decode(r).ok())
        .and_then(|r| <Hash>::try_from(r.as_slice()).ok())
        .ok_or(NoteError::Malformed("root hash is not 32 bytes of base64"))?;
    Ok(Checkpoint { origin: origin.to_string(), size, root_hash: root })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_and_verifies_c2sp_layout() {
        let key = Arc::new(SigningKey::generate().unwrap());
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
        let other = SigningKey::generate().unwrap();
        assert!(matches!(verify(&signed.note, "log.example", other.spki_der()), Err(NoteError::NoSignature(_))));
    }

    #[test]
    fn tolerates_cosignatures() {
        let key = Arc::new(SigningKey::generate().unwrap());
        let signed = NoteSigner::new("a", key.clone())
            .sign(Checkpoint { origin: "a".into(), size: 1, root_hash: [1; 32] })
            .unwrap();
        let with_cosig = format!("{}\u{2014} witness {}\n", signed.note, b64::encode([7u8; 68]));
        assert!(verify(&with_cosig, "a", key.spki_der()).is_ok());
    }
}
