//! C2SP signed-note verifier keys (c2sp.org/signed-note) for the Ed25519 signatures of
//! witnessing: a log's own signature (type 0x01) and a witness's timestamped cosignature
//! (type 0x04, c2sp.org/tlog-cosignature).
//!
//! ```text
//! <name>+<key ID, 8 hex digits>+<base64(type ‖ 32-byte Ed25519 key)>
//! ```
//! The key ID is the first four bytes of SHA-256(name ‖ 0x0A ‖ type ‖ key): it binds the key
//! to its name and type, so a log key can never pass as a cosigning key or the reverse.
//! A cosignature line's signature is `key ID ‖ timestamp (8 bytes, big-endian seconds) ‖
//! Ed25519 signature` over `cosignature/v1\ntime <timestamp>\n<checkpoint text>`.

use std::fmt;

use aws_lc_rs::signature::{UnparsedPublicKey, ED25519};

use crate::b64;
use crate::hash::sha256;
use crate::note::{NoteSignature, SignedNote};

/// What a key signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoteKeyType {
    /// A log's signature on its own checkpoints.
    Ed25519 = 0x01,
    /// A witness's cosignature (c2sp.org/tlog-cosignature).
    Cosignature = 0x04,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteKeyError {
    #[error("verifier key {0:?} is malformed: {1} (expected <name>+<8 hex digits>+<base64 of a type byte and a 32-byte Ed25519 key>)")]
    Malformed(String, &'static str),
    #[error("verifier key {0:?} has key type {1:#04x}: only 0x01 (Ed25519) and 0x04 (cosignature/v1) are supported")]
    UnsupportedType(String, u8),
    #[error("verifier key {0:?} has key ID {1}, but its name and key give {2}")]
    WrongId(String, String, String),
    #[error("key name {0:?} is not valid: it must be non-empty UTF-8 without spaces or '+'")]
    BadName(String),
}

/// A verifier key: a name, a type, and an Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifierKey {
    pub name: String,
    pub kind: NoteKeyType,
    pub key: [u8; 32],
}

/// A note name may not hold whitespace or '+' (the vkey's separator).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

impl VerifierKey {
    pub fn new(name: &str, kind: NoteKeyType, key: [u8; 32]) -> Result<VerifierKey, NoteKeyError> {
        if !valid_name(name) {
            return Err(NoteKeyError::BadName(name.to_string()));
        }
        Ok(VerifierKey { name: name.to_string(), kind, key })
    }

    /// Parses `name+id+base64`, checking that the ID matches the name and key.
    pub fn parse(text: &str) -> Result<VerifierKey, NoteKeyError> {
        let bad = |why| NoteKeyError::Malformed(text.to_string(), why);
        let mut parts = text.trim().splitn(3, '+');
        let (name, id, key) = match (parts.next(), parts.next(), parts.next()) {
            (Some(n), Some(i), Some(k)) => (n, i, k),
            _ => return Err(bad("it does not have three '+'-separated parts")),
        };
        if !valid_name(name) {
            return Err(NoteKeyError::BadName(name.to_string()));
        }
        if id.len() != 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("the key ID is not 8 hex digits"));
        }
        let raw = b64::decode(key).map_err(|_| bad("the key is not base64"))?;
        let (&kind, key) = raw.split_first().ok_or(bad("the key is empty"))?;
        let kind = match kind {
            0x01 => NoteKeyType::Ed25519,
            0x04 => NoteKeyType::Cosignature,
            other => return Err(NoteKeyError::UnsupportedType(text.to_string(), other)),
        };
        let key: [u8; 32] = key.try_into().map_err(|_| bad("the Ed25519 key is not 32 bytes"))?;
        let parsed = VerifierKey { name: name.to_string(), kind, key };
        let want = hex4(parsed.id());
        if !id.eq_ignore_ascii_case(&want) {
            return Err(NoteKeyError::WrongId(text.to_string(), id.to_string(), want));
        }
        Ok(parsed)
    }

    /// SHA-256(name ‖ 0x0A ‖ type ‖ key)[:4].
    pub fn id(&self) -> [u8; 4] {
        let mut buf = Vec::with_capacity(self.name.len() + 2 + 32);
        buf.extend_from_slice(self.name.as_bytes());
        buf.push(0x0a);
        buf.push(self.kind as u8);
        buf.extend_from_slice(&self.key);
        let h = sha256(&buf);
        [h[0], h[1], h[2], h[3]]
    }

    /// Whether `sig` is this key's line: its name and key ID. Says nothing of the signature.
    pub fn names(&self, sig: &NoteSignature) -> bool {
        sig.name == self.name && sig.hint == self.id()
    }

    /// Checks one signature line of this key over `text`, the note's signed text. For a
    /// cosignature, returns its timestamp (seconds since the epoch); for a log signature, 0.
    pub fn check(&self, text: &str, sig: &NoteSignature) -> Option<u64> {
        if !self.names(sig) {
            return None;
        }
        let public = UnparsedPublicKey::new(&ED25519, &self.key);
        let counted = || crate::verifications::count(crate::verifications::Algorithm::Ed25519);
        match self.kind {
            NoteKeyType::Ed25519 => {
                counted();
                public.verify(text.as_bytes(), &sig.signature).ok().map(|_| 0)
            }
            NoteKeyType::Cosignature => {
                let (time, signature) = sig.signature.split_at_checked(8)?;
                let time = u64::from_be_bytes(time.try_into().ok()?);
                // Go's verifiers refuse timestamps past i64::MAX; so do we, to agree on what verifies.
                if time > i64::MAX as u64 || signature.len() != 64 {
                    return None;
                }
                counted();
                public.verify(cosigned_message(time, text).as_bytes(), signature).ok().map(|_| time)
            }
        }
    }

    /// The first line of `note` by this key that verifies, with its timestamp (see [`check`](Self::check)).
    pub fn verify(&self, note: &SignedNote) -> Option<u64> {
        note.signatures.iter().find_map(|s| self.check(&note.text, s))
    }
}

impl fmt::Display for VerifierKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut raw = Vec::with_capacity(33);
        raw.push(self.kind as u8);
        raw.extend_from_slice(&self.key);
        write!(f, "{}+{}+{}", self.name, hex4(self.id()), b64::encode(raw))
    }
}

fn hex4(id: [u8; 4]) -> String {
    crate::hexfmt::encode(&id)
}

/// A signature line as a note carries it: `— name base64(key ID ‖ signature)\n`.
pub fn signature_line(sig: &NoteSignature) -> String {
    let mut blob = sig.hint.to_vec();
    blob.extend_from_slice(&sig.signature);
    format!("\u{2014} {} {}\n", sig.name, b64::encode(blob))
}

/// What a cosignature signs (c2sp.org/tlog-cosignature).
pub fn cosigned_message(time: u64, checkpoint_text: &str) -> String {
    format!("cosignature/v1\ntime {time}\n{checkpoint_text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: NoteKeyType) -> (aws_lc_rs::signature::Ed25519KeyPair, VerifierKey) {
        use aws_lc_rs::signature::KeyPair;
        let pair = aws_lc_rs::signature::Ed25519KeyPair::generate().unwrap();
        let public: [u8; 32] = pair.public_key().as_ref().try_into().unwrap();
        (pair, VerifierKey::new("example.com/w1", kind, public).unwrap())
    }

    #[test]
    fn a_vkey_round_trips_and_its_id_binds_name_and_type() {
        let (_, vkey) = key(NoteKeyType::Cosignature);
        let text = vkey.to_string();
        assert_eq!(VerifierKey::parse(&text).unwrap(), vkey);
        let renamed = text.replacen("example.com/w1", "example.com/w2", 1);
        assert!(matches!(VerifierKey::parse(&renamed), Err(NoteKeyError::WrongId(..))));
        let as_log = VerifierKey { kind: NoteKeyType::Ed25519, ..vkey.clone() };
        assert_ne!(as_log.id(), vkey.id());
        for bad in ["", "a+b", "a b+00000000+AQ==", "n+0000000g+AQ==", "n+00000000+%%%", "n+00000000+Ag=="] {
            assert!(VerifierKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_id_is_the_one_go_computes() {
        // From golang.org/x/mod/sumdb/note's documentation example.
        let vkey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
        let parsed = VerifierKey::parse(vkey).unwrap();
        assert_eq!(parsed.kind, NoteKeyType::Ed25519);
        assert_eq!(parsed.to_string(), vkey);
    }

    #[test]
    fn a_cosignature_verifies_with_its_timestamp_and_not_otherwise() {
        let (pair, vkey) = key(NoteKeyType::Cosignature);
        let text = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
        let time = 1_700_000_000u64;
        let mut sig = time.to_be_bytes().to_vec();
        sig.extend_from_slice(pair.sign(cosigned_message(time, text).as_bytes()).as_ref());
        let line = NoteSignature { name: vkey.name.clone(), hint: vkey.id(), signature: sig.clone() };
        assert_eq!(vkey.check(text, &line), Some(time));
        let later = NoteSignature { signature: [&(time + 1).to_be_bytes()[..], &sig[8..]].concat(), ..line.clone() };
        assert_eq!(vkey.check(text, &later), None);
        assert_eq!(vkey.check("example.com/log\n6\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", &line), None);
        let as_log = VerifierKey { kind: NoteKeyType::Ed25519, ..vkey };
        assert_eq!(as_log.check(text, &line), None);
    }
}
