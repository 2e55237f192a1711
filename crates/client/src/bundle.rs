//! Sigstore bundle v0.3 (protobuf-specs `Bundle`, JSON form) for a message signature or a
//! DSSE envelope.

use serde_json::{json, Value};
use signet_core::b64;

use crate::dsse;

pub const MEDIA_TYPE_V03: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// What was signed: the bundle's `messageSignature` or `dsseEnvelope`.
pub enum Content<'a> {
    /// A signature over the artifact, with the artifact's SHA-256.
    Message { digest: &'a [u8; 32], signature: &'a [u8] },
    /// An in-toto statement in a DSSE envelope, signed over its PAE.
    Dsse { payload: &'a [u8], signature: &'a [u8] },
}

/// What a bundle holds.
pub struct Bundle<'a> {
    pub leaf_der: &'a [u8],
    pub tlog_entry: Value,
    /// DER RFC 3161 `TimeStampResp`s over the signature.
    pub timestamps: Vec<Vec<u8>>,
    pub content: Content<'a>,
}

impl Bundle<'_> {
    pub fn to_json(&self) -> Value {
        let timestamps: Vec<Value> = self.timestamps.iter().map(|t| json!({"signedTimestamp": b64::encode(t)})).collect();
        let mut bundle = json!({
            "mediaType": MEDIA_TYPE_V03,
            "verificationMaterial": {
                // v0.3 carries the leaf alone; the chain comes from the trusted root.
                "certificate": {"rawBytes": b64::encode(self.leaf_der)},
                "tlogEntries": [self.tlog_entry],
                "timestampVerificationData": {"rfc3161Timestamps": timestamps},
            },
        });
        match self.content {
            Content::Message { digest, signature } => {
                bundle["messageSignature"] = json!({
                    "messageDigest": {"algorithm": "SHA2_256", "digest": b64::encode(digest)},
                    "signature": b64::encode(signature),
                });
            }
            Content::Dsse { payload, signature } => bundle["dsseEnvelope"] = dsse::envelope(payload, signature),
        }
        bundle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_content_field_of_the_right_shape() {
        let entry = json!({"logIndex": "1"});
        let message = Bundle {
            leaf_der: b"leaf",
            tlog_entry: entry.clone(),
            timestamps: vec![b"ts".to_vec()],
            content: Content::Message { digest: &[7; 32], signature: b"sig" },
        }
        .to_json();
        assert_eq!(message["messageSignature"]["messageDigest"]["digest"], b64::encode([7; 32]));
        assert!(message.get("dsseEnvelope").is_none());

        let dsse = Bundle {
            leaf_der: b"leaf",
            tlog_entry: entry,
            timestamps: vec![b"ts".to_vec()],
            content: Content::Dsse { payload: b"{}", signature: b"sig" },
        }
        .to_json();
        let keys: Vec<&String> = dsse.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["dsseEnvelope", "mediaType", "verificationMaterial"]);
        assert_eq!(dsse["mediaType"], MEDIA_TYPE_V03);
        assert_eq!(
            dsse["dsseEnvelope"],
            json!({"payload": b64::encode(b"{}"), "payloadType": "application/vnd.in-toto+json", "signatures": [{"sig": b64::encode(b"sig")}]})
        );
        assert_eq!(dsse["verificationMaterial"]["certificate"]["rawBytes"], b64::encode(b"leaf"));
        assert_eq!(dsse["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"][0]["signedTimestamp"], b64::encode(b"ts"));
    }
}
