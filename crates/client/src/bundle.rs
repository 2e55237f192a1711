//! Sigstore bundle v0.3 (protobuf-specs `Bundle`, JSON form) for a message signature.

use serde_json::{json, Value};
use signet_core::b64;

pub const MEDIA_TYPE_V03: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// What a bundle over a plain artifact holds.
pub struct MessageBundle<'a> {
    pub leaf_der: &'a [u8],
    pub tlog_entry: Value,
    /// DER RFC 3161 `TimeStampResp`s over the signature.
    pub timestamps: Vec<Vec<u8>>,
    pub digest: &'a [u8; 32],
    pub signature: &'a [u8],
}

impl MessageBundle<'_> {
    pub fn to_json(&self) -> Value {
        let timestamps: Vec<Value> = self.timestamps.iter().map(|t| json!({"signedTimestamp": b64::encode(t)})).collect();
        json!({
            "mediaType": MEDIA_TYPE_V03,
            "verificationMaterial": {
                // v0.3 carries the leaf alone; the chain comes from the trusted root.
                "certificate": {"rawBytes": b64::encode(self.leaf_der)},
                "tlogEntries": [self.tlog_entry],
                "timestampVerificationData": {"rfc3161Timestamps": timestamps},
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": b64::encode(self.digest)},
                "signature": b64::encode(self.signature),
            },
        })
    }
}
