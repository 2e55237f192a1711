//! API tokens: `sgt_<id>_<secret>`.
//!
//! The id (8 random bytes, hex) is not secret: it names the token in `signet admin token
//! list`, in bans and in rate-limit keys, and it finds the stored record without comparing
//! secrets. The secret (32 random bytes, base64url) is shown once, at creation. At rest
//! there is only the SHA-256 of the whole token, compared in constant time, so neither a
//! copy of the store nor response timing gives the token away.

use std::fmt;

use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use subtle::ConstantTimeEq;

/// Every signet API token starts with this, which tells it apart from an OIDC identity
/// token in the same `Authorization: Bearer` header (cosign sends those to Fulcio).
pub const PREFIX: &str = "sgt_";

/// A token's public id: 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TokenId(pub [u8; 8]);

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        signet_core::hexfmt::write(f, &self.0)
    }
}

/// Text that is not a token id: the text given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a token id (16 hex digits)")]
pub struct BadTokenId(pub String);

impl std::str::FromStr for TokenId {
    type Err = BadTokenId;
    fn from_str(s: &str) -> Result<TokenId, BadTokenId> {
        parse_id(s).ok_or_else(|| BadTokenId(s.to_string()))
    }
}

/// 16 hex digits as a token id. Apart from `from_str` so that a request's malformed token
/// costs no error value.
fn parse_id(s: &str) -> Option<TokenId> {
    if s.len() != 16 {
        return None;
    }
    let mut id = [0u8; 8];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(TokenId(id))
}

/// A freshly made token: the plaintext (to print once) and what is stored.
pub struct NewToken {
    pub id: TokenId,
    pub plaintext: String,
    pub hash: [u8; 32],
}

/// Makes a token from the system's CSPRNG. Only `signet admin token create` calls it, never
/// a request; a system RNG that fails is not something to issue a token without.
#[allow(clippy::expect_used)]
pub fn generate() -> NewToken {
    let mut id = [0u8; 8];
    SystemRandom::new().fill(&mut id).expect("system RNG");
    with_new_secret(TokenId(id))
}

/// A new secret for token `id` (its rotation): the old secret stops matching.
#[allow(clippy::expect_used)]
pub fn with_new_secret(id: TokenId) -> NewToken {
    let mut secret = [0u8; 32];
    SystemRandom::new().fill(&mut secret).expect("system RNG");
    let plaintext = format!("{PREFIX}{id}_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret));
    let hash = hash(&plaintext);
    NewToken { id, plaintext, hash }
}

/// SHA-256 of the whole token string, the only form that is stored.
pub fn hash(token: &str) -> [u8; 32] {
    signet_core::hash::sha256(token.as_bytes())
}

/// Whether a bearer value is meant as a signet API token (by its prefix); anything else in
/// that header is an OIDC identity token, the CA's to verify.
pub fn is_api_token(bearer: &str) -> bool {
    bearer.starts_with(PREFIX)
}

/// The id a presented token claims, or `None` when it is not shaped like a signet token.
/// The claim means nothing until [`matches`] agrees.
pub fn claimed_id(token: &str) -> Option<TokenId> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if secret.len() != 43 {
        return None;
    }
    parse_id(id)
}

/// Whether `token` hashes to `stored`, compared in constant time.
pub fn matches(token: &str, stored: &[u8; 32]) -> bool {
    hash(token).ct_eq(stored).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_and_match_only_themselves() {
        let t = generate();
        assert!(t.plaintext.starts_with("sgt_"));
        assert_eq!(claimed_id(&t.plaintext), Some(t.id));
        assert!(matches(&t.plaintext, &t.hash));
        let mut forged = t.plaintext.clone();
        forged.pop();
        forged.push(if t.plaintext.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(claimed_id(&forged), Some(t.id), "same id, other secret");
        assert!(!matches(&forged, &t.hash));
        assert_eq!(claimed_id("eyJhbGciOi.x.y"), None, "an OIDC JWT is not a signet token");
        assert_ne!(generate().plaintext, t.plaintext);
        let rotated = with_new_secret(t.id);
        assert_eq!(claimed_id(&rotated.plaintext), Some(t.id));
        assert!(!matches(&t.plaintext, &rotated.hash) && matches(&rotated.plaintext, &rotated.hash));
    }

    #[test]
    fn ids_show_as_sixteen_lowercase_hex_digits_and_parse_back() {
        let id = TokenId([0x00, 0x01, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff]);
        assert_eq!(id.to_string(), "00017f80abcdefff");
        assert_eq!("00017f80abcdefff".parse::<TokenId>(), Ok(id));
        let t = generate();
        assert_eq!(t.id.to_string().parse::<TokenId>(), Ok(t.id));
        assert!(t.plaintext.starts_with(&format!("sgt_{}_", t.id)));
    }
}
