//! The identity claim inside an OIDC token, read without verifying it: the CA verifies the
//! token; the client only needs to know which string to sign as proof of possession.

use base64::Engine;

use crate::ClientError;

/// The claim Fulcio wants signed: `email` when present, otherwise `sub`.
pub fn challenge(token: &str) -> Result<String, ClientError> {
    let payload = token.split('.').nth(1).ok_or_else(|| ClientError::Token("not a JWT (expected three dot-separated parts)".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| ClientError::Token(format!("payload is not base64url: {e}")))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Token(format!("payload is not JSON: {e}")))?;
    claims
        .get("email")
        .or_else(|| claims.get("sub"))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| ClientError::Token("has neither an email nor a sub claim".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let e = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", e("{}"), e(claims))
    }

    #[test]
    fn prefers_email_then_sub() {
        assert_eq!(challenge(&jwt(r#"{"sub":"s","email":"a@b"}"#)).unwrap(), "a@b");
        assert_eq!(challenge(&jwt(r#"{"sub":"s"}"#)).unwrap(), "s");
        assert!(challenge(&jwt(r#"{"aud":"x"}"#)).is_err());
        assert!(challenge("nodots").is_err());
    }
}
