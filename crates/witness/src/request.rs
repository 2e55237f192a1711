//! The body of `POST /add-checkpoint` (c2sp.org/tlog-witness), both ways: parsed by the
//! witness, written by a log that asks for cosignatures.
//!
//! ```text
//! old <size>\n
//! <base64 proof hash>\n     (0 to 63 lines)
//! \n
//! <signed checkpoint note>
//! ```

use signet_core::b64;
use signet_core::hash::Hash;
use signet_core::note::SignedNote;

/// The spec's bound on proof lines: a proof in a tree of 2^64 leaves is shorter.
pub const MAX_PROOF_LINES: usize = 63;

/// The bound on a whole body: 63 proof lines, and a checkpoint with room for many signatures.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

#[derive(Debug)]
pub struct AddCheckpoint {
    pub old_size: u64,
    pub proof: Vec<Hash>,
    pub note: SignedNote,
}

/// What was wrong with a body: the witness answers it with 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("add-checkpoint request is malformed: {0}")]
pub struct Malformed(pub String);

fn malformed(why: impl Into<String>) -> Malformed {
    Malformed(why.into())
}

impl AddCheckpoint {
    pub fn parse(body: &[u8]) -> Result<AddCheckpoint, Malformed> {
        if body.len() > MAX_BODY_BYTES {
            return Err(malformed(format!("{} bytes, over the {MAX_BODY_BYTES} accepted", body.len())));
        }
        let text = std::str::from_utf8(body).map_err(|_| malformed("the body is not UTF-8"))?;
        let (head, note) = text
            .split_once("\n\n")
            .ok_or_else(|| malformed("no empty line between the old size and proof lines and the checkpoint"))?;
        let mut lines = head.split('\n');
        let old = lines.next().unwrap_or_default();
        let size = old.strip_prefix("old ").ok_or_else(|| malformed("the first line must be \"old <size>\""))?;
        let old_size = size
            .parse::<u64>()
            .ok()
            .filter(|n| n.to_string() == size)
            .ok_or_else(|| malformed(format!("old size {size:?} is not a decimal integer without sign or leading zeros")))?;
        let mut proof = Vec::new();
        for (i, line) in lines.enumerate() {
            if i >= MAX_PROOF_LINES {
                return Err(malformed(format!("more than {MAX_PROOF_LINES} consistency proof lines")));
            }
            let hash = b64::decode(line)
                .ok()
                .and_then(|h| Hash::try_from(h.as_slice()).ok())
                .ok_or_else(|| malformed(format!("proof line {} is not a base64 SHA-256 hash", i + 1)))?;
            proof.push(hash);
        }
        let note = SignedNote::parse(note).map_err(|e| malformed(e.to_string()))?;
        // c2sp.org/tlog-checkpoint: extension lines are non-empty; a cosignature is a promise
        // about a checkpoint, so only a well-formed one is cosigned.
        if note.text.trim_end_matches('\n').split('\n').any(str::is_empty) {
            return Err(malformed("the checkpoint has an empty line"));
        }
        Ok(AddCheckpoint { old_size, proof, note })
    }
}

/// The body a log sends: `old_size`, its proof, and the signed checkpoint note.
pub fn format(old_size: u64, proof: &[Hash], note: &str) -> String {
    let mut body = format!("old {old_size}\n");
    for h in proof {
        body.push_str(&b64::encode(h));
        body.push('\n');
    }
    body.push('\n');
    body.push_str(note);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOTE: &str = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n\u{2014} example.com/log AAAAAAAA\n";

    #[test]
    fn a_body_round_trips() {
        let body = format(3, &[[7; 32], [8; 32]], NOTE);
        let parsed = AddCheckpoint::parse(body.as_bytes()).unwrap();
        assert_eq!((parsed.old_size, parsed.proof), (3, vec![[7; 32], [8; 32]]));
        assert_eq!(parsed.note.checkpoint.size, 5);
    }

    #[test]
    fn malformed_bodies_say_what_is_wrong() {
        let proof_64 = format(3, &[[7; 32]; 64], NOTE);
        for (body, says) in [
            ("old 3\n", "no empty line"),
            ("new 3\n\n", "\"old <size>\""),
            ("old 03\n\nx", "leading zeros"),
            ("old -1\n\nx", "decimal"),
            ("old 3\nnot-base64\n\nx", "proof line 1"),
            ("old 3\nAAAA\n\nx", "proof line 1"),
            (proof_64.as_str(), "more than 63"),
            ("old 3\n\nnot a note", "malformed"),
            ("old 3\n\no\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\next\n\n\u{2014} o AAAAAAAA\n", "empty line"),
        ] {
            let err = AddCheckpoint::parse(body.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(says), "{body:?}: {err}");
        }
        assert!(AddCheckpoint::parse(b"old 3\n\n\xff").is_err());
    }
}
