//! PEM armour. Rekor canonicalizes keys and certificates by re-encoding them with Go's
//! `encoding/pem` (64-column base64, `\n` line ends), so signet writes that exact layout:
//! byte-identical bodies are what make identical entries deduplicate.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// One decoded PEM block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub label: String,
    pub der: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum PemError {
    #[error("no PEM block found (expected -----BEGIN <LABEL>-----)")]
    Missing,
    #[error("malformed PEM: {0}")]
    Malformed(String),
}

/// Encodes `der` under `label` the way Go's `pem.Encode` does.
pub fn encode(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = String::with_capacity(b64.len() + b64.len() / 64 + 2 * label.len() + 40);
    out.push_str("-----BEGIN ");
    out.push_str(label);
    out.push_str("-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str("-----END ");
    out.push_str(label);
    out.push_str("-----\n");
    out
}

/// Decodes the first PEM block in `text`. Whitespace inside the body is ignored, as Go does.
pub fn decode_first(text: &[u8]) -> Result<Block, PemError> {
    let text = std::str::from_utf8(text).map_err(|_| PemError::Malformed("not UTF-8".into()))?;
    let start = text.find("-----BEGIN ").ok_or(PemError::Missing)?;
    let rest = &text[start + 11..];
    let label_end = rest
        .find("-----")
        .ok_or_else(|| PemError::Malformed("unterminated BEGIN line".into()))?;
    let label = &rest[..label_end];
    let body_and_end = &rest[label_end + 5..];
    let end_marker = format!("-----END {label}-----");
    let end = body_and_end
        .find(&end_marker)
        .ok_or_else(|| PemError::Malformed(format!("missing {end_marker}")))?;
    // Bytes, not chars: base64 is ASCII, and a byte filter is several times faster than
    // collecting chars into a String (a third of a load generator's PEM time).
    let raw = body_and_end[..end].as_bytes();
    let mut body = Vec::with_capacity(raw.len());
    body.extend(raw.iter().copied().filter(|b| !b.is_ascii_whitespace()));
    if body.contains(&b':') {
        return Err(PemError::Malformed("encrypted or header-carrying PEM is not supported".into()));
    }
    let der = STANDARD
        .decode(&body)
        .map_err(|e| PemError::Malformed(format!("bad base64 in {label} block: {e}")))?;
    Ok(Block { label: label.to_string(), der })
}

/// Decodes every PEM block in `text`, in order.
pub fn decode_all(mut text: &[u8]) -> Result<Vec<Block>, PemError> {
    let mut blocks = Vec::new();
    loop {
        let s = std::str::from_utf8(text).map_err(|_| PemError::Malformed("not UTF-8".into()))?;
        if !s.contains("-----BEGIN ") {
            break;
        }
        let block = decode_first(text)?;
        let end_marker = format!("-----END {}-----", block.label);
        let pos = s.find(&end_marker).expect("decode_first found it") + end_marker.len();
        text = &text[pos..];
        blocks.push(block);
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_layout_round_trip() {
        let der: Vec<u8> = (0..100u8).collect();
        let pem = encode("PUBLIC KEY", &der);
        let lines: Vec<&str> = pem.lines().collect();
        assert_eq!(lines[0], "-----BEGIN PUBLIC KEY-----");
        assert_eq!(lines[1].len(), 64);
        assert!(pem.ends_with("-----END PUBLIC KEY-----\n"));
        let block = decode_first(pem.as_bytes()).unwrap();
        assert_eq!(block, Block { label: "PUBLIC KEY".into(), der });
    }

    #[test]
    fn decodes_chains_and_rejects_garbage() {
        let two = format!("{}{}", encode("CERTIFICATE", b"a"), encode("CERTIFICATE", b"b"));
        let blocks = decode_all(two.as_bytes()).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[1].der, b"b");
        assert!(matches!(decode_first(b"hello"), Err(PemError::Missing)));
        assert!(decode_first(b"-----BEGIN X-----\n!!!\n-----END X-----\n").is_err());
    }
}
