//! DSSE envelopes (github.com/secure-systems-lab/dsse) carrying in-toto statements: the
//! signature is over PAE(payloadType, payload), and the artifact must be one of the
//! statement's subjects.

use serde::Deserialize;
use signet_core::hexfmt;
use signet_core::pubkey::{HashAlg, PublicKey};

use crate::bundle::DsseEnvelope;
use crate::error::{Result, VerifyError};
use crate::signature::{Artifact, SignedDigest};

pub const IN_TOTO: &str = "application/vnd.in-toto+json";

fn err(m: impl Into<String>) -> VerifyError {
    VerifyError::Dsse(m.into())
}

/// DSSE v1 pre-authentication encoding: "DSSEv1" SP len(type) SP type SP len(body) SP body.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + payload_type.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

#[derive(Deserialize)]
struct Statement {
    #[serde(rename = "_type")]
    type_: String,
    #[serde(default)]
    subject: Vec<Subject>,
}

#[derive(Deserialize)]
struct Subject {
    #[serde(default)]
    digest: std::collections::BTreeMap<String, String>,
}

/// Verifies the envelope signature and that the artifact is a subject of the statement.
/// Returns the SHA-256 of the PAE, which a Rekor v2 hashedrekord entry records.
pub fn verify(env: &DsseEnvelope, artifact: Artifact<'_>, key: &PublicKey) -> Result<SignedDigest> {
    let [sig] = env.signatures.as_slice() else {
        return Err(err(format!("envelope must carry exactly one signature, found {}", env.signatures.len())));
    };
    let pae = pae(&env.payload_type, &env.payload);
    key.verify_message(&pae, sig)
        .map_err(|_| err("signature over the envelope (PAE) does not verify with the signing key"))?;

    if env.payload_type != IN_TOTO {
        return Err(err(format!("payloadType {:?} is not an in-toto statement ({IN_TOTO})", env.payload_type)));
    }
    let st: Statement =
        serde_json::from_slice(&env.payload).map_err(|e| err(format!("payload is not an in-toto statement: {e}")))?;
    if !st.type_.starts_with("https://in-toto.io/Statement/") {
        return Err(err(format!("payload _type {:?} is not an in-toto statement", st.type_)));
    }
    let matches = |name: &str, hex_digest: &str| -> bool {
        let alg = match name {
            "sha256" => HashAlg::Sha256,
            "sha384" => HashAlg::Sha384,
            "sha512" => HashAlg::Sha512,
            _ => return false,
        };
        let want = match artifact {
            Artifact::Bytes(b) => alg.digest(b),
            Artifact::Digest(a, d) if a == alg => d.to_vec(),
            Artifact::Digest(..) => return false,
        };
        hexfmt::encode(&want).eq_ignore_ascii_case(hex_digest)
    };
    if !st.subject.iter().any(|s| s.digest.iter().any(|(n, d)| matches(n, d))) {
        return Err(err("the artifact's digest matches no subject of the in-toto statement"));
    }
    Ok(SignedDigest { alg: HashAlg::Sha256, digest: HashAlg::Sha256.digest(&pae) })
}

#[cfg(test)]
mod tests {
    #[test]
    fn pae_matches_the_dsse_spec_example() {
        assert_eq!(super::pae("http://example.com/HelloWorld", b"hello world"), b"DSSEv1 29 http://example.com/HelloWorld 11 hello world");
    }
}
