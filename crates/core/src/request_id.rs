//! The id of one request, as sent back in `x-request-id`, written on its access-log line and
//! in its audit record, so that the three can be joined.
//!
//! 24 hex digits: 8 random per process (ids from two instances or two runs don't collide)
//! and a 64-bit counter (unique within the process, and cheap: no syscall per request).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId {
    process: u32,
    seq: u64,
}

impl RequestId {
    pub fn next() -> RequestId {
        static PROCESS: OnceLock<u32> = OnceLock::new();
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let process = *PROCESS.get_or_init(|| {
            let mut b = [0u8; 4];
            // Without randomness ids are still unique within the process.
            let _ = aws_lc_rs::rand::fill(&mut b);
            u32::from_be_bytes(b)
        });
        RequestId { process, seq: SEQ.fetch_add(1, Ordering::Relaxed) }
    }
}

impl RequestId {
    /// The 24 hex digits as bytes, without a `String`: what `x-request-id` carries.
    pub fn to_hex(self) -> [u8; 24] {
        let mut out = [0u8; 24];
        let bytes = self.process.to_be_bytes().into_iter().chain(self.seq.to_be_bytes());
        for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0xf)];
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As `{:08x}{:016x}`, without the padding machinery: every audit record shows one.
        crate::hexfmt::write(f, &self.process.to_be_bytes())?;
        crate::hexfmt::write(f, &self.seq.to_be_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_24_hex_digits() {
        let (a, b) = (RequestId::next(), RequestId::next());
        assert_ne!(a, b);
        let s = a.to_string();
        assert_eq!(s.len(), 24);
        assert!(s.bytes().all(|c| c.is_ascii_hexdigit()));
        let id = RequestId { process: 0x00ab_cdef, seq: 0x0123_4567_89ab_cdef };
        assert_eq!(id.to_string(), format!("{:08x}{:016x}", id.process, id.seq));
        assert_eq!(id.to_string(), "00abcdef0123456789abcdef");
        assert_eq!(&id.to_hex(), b"00abcdef0123456789abcdef");
        assert_eq!(a.to_hex().as_slice(), s.as_bytes());
    }
}
