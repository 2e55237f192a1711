//! Base64 as the Sigstore formats use it: standard alphabet with padding.
//!
//! Decoding is lenient about padding (protojson writers differ) but strict about the alphabet:
//! a stray character is an error that callers turn into a 400 naming the field.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;

pub fn encode(data: impl AsRef<[u8]>) -> String {
    STANDARD.encode(data)
}

/// Decodes standard base64, padded or not. protojson readers also accept the URL-safe
/// alphabet, so we do too.
pub fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    let t = text.trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(t)
        .or_else(|_| URL_SAFE_NO_PAD.decode(t))
        .or_else(|_| URL_SAFE.decode(text))
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_padding() {
        let s = super::encode(b"hello");
        assert_eq!(s, "aGVsbG8=");
        assert_eq!(super::decode(&s).unwrap(), b"hello");
        assert_eq!(super::decode("aGVsbG8").unwrap(), b"hello");
        assert!(super::decode("a$b=").is_err());
    }
}
