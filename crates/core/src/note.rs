//! C2SP signed notes (c2sp.org/signed-note) carrying tlog checkpoints (c2sp.org/tlog-checkpoint).
//!
//! ```text
//! <origin>\n<tree size>\n<base64 root hash>\n[extension lines]\n
//! \n
//! — <key name> base64(key hint ‖ signature)\n
//! ```
//! Parsing and checking live here so that verifiers need no log machinery; the log signs
//! notes with `signet-log::checkpoint::NoteSigner`.

use crate::b64;
use crate::hash::{sha256, Hash};
use crate::pubkey::{KeyKind, PublicKey};

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

/// One `— name base64(hint ‖ sig)` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    pub name: String,
    pub hint: [u8; 4],
    pub signature: Vec<u8>,
}

/// A parsed note: the signed text, the checkpoint it holds, and every signature line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedNote {
    /// The signed text, up to and including the newline before the blank line.
    pub text: String,
    pub checkpoint: Checkpoint,
    pub signatures: Vec<NoteSignature>,
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

/// The key hint that identifies `key` under `name`: SHA-256(SPKI)[:4] for ECDSA and RSA (as
/// Rekor does), and the C2SP key ID SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key)[:4] for Ed25519.
pub fn key_hint(name: &str, key: &PublicKey) -> [u8; 4] {
    let id = match key.kind {
        KeyKind::Ed25519 => {
            let mut buf = Vec::with_capacity(name.len() + 2 + 32);
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(&[0x0a, 0x01]);
            buf.extend_from_slice(key.raw());
            sha256(&buf)
        }
        _ => sha256(&key.spki_der),
    };
    [id[0], id[1], id[2], id[3]]
}

impl SignedNote {
    pub fn parse(note: &str) -> Result<SignedNote, NoteError> {
        let split = note.rfind("\n\n").ok_or(NoteError::Malformed("no blank line before signatures"))?;
        let (text, sigs) = (&note[..split + 1], &note[split + 2..]);
        if !sigs.ends_with('\n') {
            return Err(NoteError::Malformed("note must end with a newline"));
        }
        let mut signatures = Vec::new();
        for line in sigs.strip_suffix('\n').unwrap_or(sigs).split('\n') {
            let rest = line.strip_prefix("\u{2014} ").ok_or(NoteError::Malformed("signature line must start with an em dash"))?;
            let (name, sig_b64) = rest.rsplit_once(' ').ok_or(NoteError::Malformed("signature line has no signature"))?;
            let blob = b64::decode(sig_b64).map_err(|_| NoteError::Malformed("signature is not base64"))?;
            if blob.len() < 5 || name.is_empty() {
                return Err(NoteError::Malformed("signature line is too short"));
            }
            signatures.push(NoteSignature {
                name: name.to_string(),
                hint: [blob[0], blob[1], blob[2], blob[3]],
                signature: blob[4..].to_vec(),
            });
        }
        if signatures.is_empty() {
            return Err(NoteError::Malformed("note has no signature lines"));
        }
        Ok(SignedNote { text: text.to_string(), checkpoint: parse_body(text)?, signatures })
    }

    /// Verifies the signature of `name` by `key`. Lines by other keys are tolerated
    /// (cosignatures), as the signed-note spec requires.
    pub fn verify(&self, name: &str, key: &PublicKey) -> Result<&Checkpoint, NoteError> {
        let hint = key_hint(name, key);
        let mut found = false;
        for sig in self.signatures.iter().filter(|s| s.name == name && s.hint == hint) {
            found = true;
            key.verify_message(self.text.as_bytes(), &sig.signature).map_err(|_| NoteError::BadSignature)?;
        }
        if !found {
            return Err(NoteError::NoSignature(name.to_string()));
        }
        Ok(&self.checkpoint)
    }
}

/// Parses a signed note and verifies the signature of `name` by the key `spki_der`.
pub fn verify(note: &str, name: &str, spki_der: &[u8]) -> Result<Checkpoint, NoteError> {
    let key = PublicKey::from_spki(spki_der).map_err(|_| NoteError::Malformed("verifier key is not a valid SPKI"))?;
    SignedNote::parse(note)?.verify(name, &key).cloned()
}

/// The checkpoint lines of a note body (c2sp.org/tlog-checkpoint). Only the canonical
/// spelling is accepted: the size in decimal without a sign or leading zeros, the root in
/// padded standard base64. The signature covers the text, so a lenient reader would accept
/// several texts for one checkpoint (found by the `checkpoint_note` fuzz target).
fn parse_body(body: &str) -> Result<Checkpoint, NoteError> {
    // Lines end in "\n" alone: `str::lines` would also take "\r\n", and so accept a second
    // text for the same checkpoint.
    let mut lines = body.split('\n');
    let origin = lines.next().filter(|o| !o.is_empty()).ok_or(NoteError::Malformed("missing origin"))?;
    let size = lines
        .next()
        .and_then(|s| s.parse::<u64>().ok().filter(|n| n.to_string() == s))
        .ok_or(NoteError::Malformed("tree size is not a decimal integer without sign or leading zeros"))?;
    let root = lines
        .next()
        .and_then(|r| b64::decode(r).ok().filter(|d| b64::encode(d) == r))
        .and_then(|r| <Hash>::try_from(r.as_slice()).ok())
        .ok_or(NoteError::Malformed("root hash is not 32 bytes of padded standard base64"))?;
    Ok(Checkpoint { origin: origin.to_string(), size, root_hash: root })

}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_checkpoint_lines_parse() {
        // The fuzzer's input: a root hash in unpadded base64 (43 characters).
        // (fuzz/regressions/checkpoint_note/unpadded-root.txt)
        let text = "127.0.0.1 - 5778827680023528268\n1\nk60aZHy9Jm3jZHy9JmMACkIMVa5jry7680023528268\n1\nAo6QLIJIJxF8LuM1FZbKgok=\n\n\u{2014} 127.0.0.1l 7yx10K0nZHy9Jm3jMdBo=\n";
        assert!(matches!(SignedNote::parse(text), Err(NoteError::Malformed(_))));
        let root = b64::encode([7u8; 32]);
        let note = |size: &str, root: &str| format!("o\n{size}\n{root}\n\n\u{2014} o AAAAAAAA\n");
        assert!(SignedNote::parse(&note("12", &root)).is_ok());
        let crlf = format!("{root}\r");
        for (size, r) in [("012", root.as_str()), ("+12", root.as_str()), ("12", root.trim_end_matches('=')), ("12\r", root.as_str()), ("12", crlf.as_str())] {
            assert!(SignedNote::parse(&note(size, r)).is_err(), "{size} {r}");
        }
    }
}
