//! RFC 3161 timestamps over the signature bytes (not the artifact: a timestamp proves the
//! signature existed at that time, which is what a verifier needs to check the short-lived
//! certificate against).

use cmpv2::status::PkiStatus;
use der::asn1::{Int, OctetString};
use der::{Decode, Encode};
use x509_tsp::{MessageImprint, TimeStampReq, TimeStampResp, TspVersion};

use crate::ClientError;

const ID_SHA256: der::oid::ObjectIdentifier = der::oid::ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");

fn bad(url: &str, why: impl std::fmt::Display) -> ClientError {
    ClientError::Service { service: "TSA", url: url.to_string(), why: why.to_string() }
}

/// A DER `TimeStampReq` for a SHA-256 digest, asking for the TSA's certificate.
pub fn request(digest: &[u8; 32], nonce: &[u8; 8]) -> Result<Vec<u8>, ClientError> {
    let mut nonce = *nonce;
    // A positive INTEGER with no leading zero byte, so its DER encoding is canonical.
    nonce[0] = (nonce[0] & 0x7f) | 0x40;
    let req = TimeStampReq {
        version: TspVersion::V1,
        message_imprint: MessageImprint {
            hash_algorithm: spki::AlgorithmIdentifier { oid: ID_SHA256, parameters: None },
            hashed_message: OctetString::new(digest.to_vec()).map_err(|e| bad("request", e))?,
        },
        req_policy: None,
        nonce: Some(Int::new(&nonce).map_err(|e| bad("request", e))?),
        cert_req: true,
        extensions: None,
    };
    req.to_der().map_err(|e| bad("request", e))
}

/// Checks that a DER `TimeStampResp` was granted and carries a token. Bundles hold the whole
/// response (protobuf-specs `RFC3161SignedTimestamp`), which is what verifiers parse.
pub fn check_response(url: &str, resp_der: &[u8]) -> Result<(), ClientError> {
    let resp = TimeStampResp::from_der(resp_der).map_err(|e| bad(url, format!("reply is not a DER TimeStampResp: {e}")))?;
    if !matches!(resp.status.status, PkiStatus::Accepted | PkiStatus::GrantedWithMods) {
        return Err(bad(url, format!("timestamp refused with status {:?}", resp.status.status)));
    }
    resp.time_stamp_token.map(|_| ()).ok_or_else(|| bad(url, "granted reply carries no timeStampToken"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips() {
        for nonce in [[0xff; 8], [0; 8]] {
            let req = TimeStampReq::from_der(&request(&[7; 32], &nonce).unwrap()).unwrap();
            assert_eq!(req.nonce.unwrap().as_bytes().len(), 8);
        }
        let der_bytes = request(&[7; 32], &[0xff; 8]).unwrap();
        let req = TimeStampReq::from_der(&der_bytes).unwrap();
        assert!(req.cert_req);
        assert_eq!(req.message_imprint.hashed_message.as_bytes(), &[7; 32]);
        assert_eq!(req.message_imprint.hash_algorithm.oid, ID_SHA256);
        assert!(check_response("u", b"junk").unwrap_err().to_string().contains("not a DER TimeStampResp"));
    }
}
