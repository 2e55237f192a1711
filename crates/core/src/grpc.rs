//! gRPC's length-prefixed messages, and the Fulcio v2 CA service's messages.
//!
//! A gRPC body is a sequence of messages, each behind five bytes: a compression flag and a
//! big-endian length. A unary call sends exactly one. signet reads a request only once the
//! validation layer has buffered and bounded its whole body, so a frame is read from a slice,
//! with nothing to wait for, and the same function serves the server, the lab and the fuzzer.
//!
//! - [`fulcio`]: `dev.sigstore.fulcio.v2` (fulcio.proto), as prost types.

pub mod fulcio;

/// The bytes before each message: a compression flag, then the message's length (u32, big-endian).
pub const PREFIX_LEN: usize = 5;

/// Why a unary request's body is not one gRPC message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("the body is {0} bytes, shorter than a gRPC message's 5-byte prefix")]
    Short(usize),
    #[error("the message is compressed (flag {0}); this server reads uncompressed messages only: send grpc-encoding identity")]
    Compressed(u8),
    #[error("the prefix announces {announced} bytes of message but {present} follow it")]
    Length { announced: u64, present: usize },
}

impl FrameError {
    /// Compression is a capability this server declines (a compressed message is a
    /// decompression bomb's way in), not a malformed request.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, FrameError::Compressed(_))
    }
}

/// The one message of a unary call's body: exactly one uncompressed frame, nothing after it.
pub fn unary_message(body: &[u8]) -> Result<&[u8], FrameError> {
    let (prefix, message) = body.split_first_chunk::<PREFIX_LEN>().ok_or(FrameError::Short(body.len()))?;
    let [flag, length @ ..] = *prefix;
    if flag != 0 {
        return Err(FrameError::Compressed(flag));
    }
    let announced = u32::from_be_bytes(length) as u64;
    if announced != message.len() as u64 {
        return Err(FrameError::Length { announced, present: message.len() });
    }
    Ok(message)
}

/// `message` behind its prefix, uncompressed.
pub fn frame(message: &impl prost::Message) -> Vec<u8> {
    let len = message.encoded_len();
    let mut out = Vec::with_capacity(PREFIX_LEN + len);
    out.push(0);
    // A message over 4 GiB cannot be framed; nothing signet sends comes near (a chain of PEMs).
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    message.encode_raw(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_message_reads_back_whole() {
        let chain = fulcio::CertificateChain { certificates: vec!["a".into(), "bc".into()] };
        let framed = frame(&chain);
        assert_eq!(&framed[..5], &[0, 0, 0, 0, 7]);
        let inner = unary_message(&framed).unwrap();
        assert_eq!(<fulcio::CertificateChain as prost::Message>::decode(inner).unwrap(), chain);
    }

    #[test]
    fn an_empty_message_is_five_zero_bytes() {
        assert_eq!(unary_message(&[0, 0, 0, 0, 0]).unwrap(), b"");
        assert_eq!(frame(&fulcio::GetTrustBundleRequest {}), vec![0; 5]);
    }

    #[test]
    fn bodies_that_are_not_one_uncompressed_message_are_refused() {
        assert_eq!(unary_message(b""), Err(FrameError::Short(0)));
        assert_eq!(unary_message(&[0, 0, 0]), Err(FrameError::Short(3)));
        assert_eq!(unary_message(&[1, 0, 0, 0, 1, 9]), Err(FrameError::Compressed(1)));
        assert!(FrameError::Compressed(1).is_unsupported());
        // Too few bytes, and a second message after the first.
        assert_eq!(unary_message(&[0, 0, 0, 0, 3, 1]), Err(FrameError::Length { announced: 3, present: 1 }));
        assert_eq!(unary_message(&[0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]), Err(FrameError::Length { announced: 1, present: 6 }));
        assert_eq!(unary_message(&[0, 255, 255, 255, 255]), Err(FrameError::Length { announced: u32::MAX as u64, present: 0 }));
    }
}
