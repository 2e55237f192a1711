//! Base64 as the Sigstore formats use it: standard alphabet with padding.
//!
//! Decoding is lenient about padding (protojson writers differ) but strict about the alphabet:
//! a stray character is an error that callers turn into a 400 naming the field.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;

pub fn encode(data: impl AsRef<[u8]>) -> String {
    STANDARD.encode(data)
}

/// Appends the standard, padded base64 of `data` to the text `out` (a JSON answer being written).
pub fn push(out: &mut String, data: &[u8]) {
    STANDARD.encode_string(data, out);
}

/// Appends the standard, padded base64 of `data` to the bytes `out` (a payload being signed).
pub fn encode_into(data: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + data.len().div_ceil(3) * 4, 0);
    // The slice is exactly the padded length, so the engine cannot run out of room.
    let written = STANDARD.encode_slice(data, &mut out[start..]).unwrap_or(0);
    out.truncate(start + written);
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
    fn encode_into_appends_what_encode_returns() {
        for data in [&b""[..], b"h", b"he", b"hel", b"hello", &[0xfb; 301]] {
            let mut out = b"prefix:".to_vec();
            super::encode_into(data, &mut out);
            assert_eq!(out, [&b"prefix:"[..], super::encode(data).as_bytes()].concat());
            let mut text = String::from("prefix:");
            super::push(&mut text, data);
            assert_eq!(text.as_bytes(), &out[..]);
        }
    }

    #[test]
    fn round_trip_and_padding() {
        let s = super::encode(b"hello");
        assert_eq!(s, "aGVsbG8=");
        assert_eq!(super::decode(&s).unwrap(), b"hello");
        assert_eq!(super::decode("aGVsbG8").unwrap(), b"hello");
        assert!(super::decode("a$b=").is_err());
    }
}
