//! Fulcio v2 `signingCert`: a public key and a proof of possession in, a chain out.

use serde_json::{json, Value};
use signet_core::{b64, pem};

use crate::ClientError;

pub const PATH: &str = "/api/v2/signingCert";

/// The `publicKeyRequest` form: `proof` is the signature over the token's identity claim.
pub fn request(spki_der: &[u8], proof: &[u8]) -> Value {
    json!({
        "publicKeyRequest": {
            "publicKey": {"algorithm": "ECDSA", "content": pem::encode("PUBLIC KEY", spki_der)},
            "proofOfPossession": b64::encode(proof),
        }
    })
}

/// The DER chain (leaf first) from a reply with `signedCertificateEmbeddedSct`.
pub fn chain(reply: &Value) -> Result<Vec<Vec<u8>>, ClientError> {
    let bad = |why: &str| ClientError::Service { service: "CA", url: PATH.into(), why: why.to_string() };
    let certs = reply
        .pointer("/signedCertificateEmbeddedSct/chain/certificates")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("reply has no signedCertificateEmbeddedSct.chain.certificates (a detached SCT is not supported)"))?;
    let chain: Vec<Vec<u8>> = certs
        .iter()
        .map(|c| {
            c.as_str()
                .and_then(|p| pem::decode_first(p.as_bytes()).ok())
                .filter(|b| b.label == "CERTIFICATE")
                .map(|b| b.der)
                .ok_or_else(|| bad("a chain entry is not a PEM certificate"))
        })
        .collect::<Result<_, _>>()?;
    if chain.is_empty() {
        return Err(bad("the certificate chain is empty"));
    }
    Ok(chain)
}
