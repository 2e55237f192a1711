//! A witnessed checkpoint in the bundle (docs/witness.md): when the Rekor v2 log serves its
//! checkpoints cosigned by witnesses (`[log.witnesses]`), the cosigned copy of the very
//! checkpoint the entry's proof is under can take the place of the log's own. The checkpoint
//! envelope is a signed note, and cosignatures are note signatures, so the bundle format
//! allows it; verifiers ignore the lines they have no key for. The proof is untouched: only
//! the identical checkpoint text with more signature lines is adopted.

use std::time::{Duration, Instant};

use serde_json::Value;
use signet_core::note::SignedNote;

use crate::http::Http;
use crate::ClientError;

/// How often the log's checkpoint is read while waiting.
const POLL: Duration = Duration::from_millis(100);

/// Waits up to `wait` for the log at `tlog_url` to serve the checkpoint of `entry` (a bundle's
/// `TransparencyLogEntry`) with cosignatures, and puts that copy in. False when it did not
/// within `wait`, or the log moved past it first (the entry stays with the log's own).
pub fn adopt_cosigned(http: &Http, tlog_url: &str, entry: &mut Value, wait: Duration) -> Result<bool, ClientError> {
    let Some(own) = entry.pointer("/inclusionProof/checkpoint/envelope").and_then(Value::as_str) else { return Ok(false) };
    let own = SignedNote::parse(own).map_err(|e| ClientError::Service { service: "Rekor", url: tlog_url.into(), why: e.to_string() })?;
    let url = format!("{}/api/v2/checkpoint", tlog_url.trim_end_matches('/'));
    let deadline = Instant::now() + wait;
    loop {
        let reply = http.get("Rekor", &url, 64 * 1024)?;
        if let Some(served) = std::str::from_utf8(&reply.body).ok().and_then(|t| SignedNote::parse(t).ok().map(|n| (t.to_string(), n))) {
            let (text, note) = served;
            let cosigned = note.signatures.len() > own.signatures.len();
            if note.text == own.text && cosigned {
                if let Some(slot) = entry.pointer_mut("/inclusionProof/checkpoint/envelope") {
                    *slot = Value::String(text);
                    return Ok(true);
                }
            }
            if cosigned && note.checkpoint.size > own.checkpoint.size {
                return Ok(false);
            }
        }
        if Instant::now() + POLL > deadline {
            return Ok(false);
        }
        std::thread::sleep(POLL);
    }
}
