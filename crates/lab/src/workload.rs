//! Workloads: how each request of a run is made.
//!
//! Append workloads sign their entries before the clock starts, so the generator spends its
//! measured time sending requests, not computing signatures on the cores it shares with the
//! server under test.

use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use bytes::Bytes;
use http::{Method, Uri};
use serde_json::json;
use signet_core::{b64, hash, pem};

use crate::conn;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Distinct, validly signed hashedrekord v0.0.1 entries to `POST /api/v1/log/entries`.
    LogAppend,
    /// Distinct hashedRekordRequestV002 entries to `POST /api/v2/log/entries`.
    LogAppendV2,
    /// Distinct intoto 0.0.2 entries to `POST /api/v1/log/entries`, as sigstore-js's `attest`
    /// sends them: a SLSA provenance statement of about 1.9 KiB in a DSSE envelope, kept as an
    /// attestation beside its entry.
    LogAppendIntoto,
    /// Entry + inclusion proof reads, `GET /api/v1/log/entries?logIndex=` at random indices.
    LogRead,
    /// `POST /api/v2/signingCert` with a proof of possession, as cosign's first step.
    Cert,
    /// The same certificate through Fulcio's gRPC API (`CreateSigningCertificate`), as
    /// sigstore-java asks for it: HTTP/2 only (`--http 2`).
    CertGrpc,
    /// RFC 3161 `POST /api/v1/timestamp` with distinct DER requests.
    Tsa,
    /// The target URL itself, with `--method`, `--body` and `--header`.
    Custom,
    /// The keyless flow as one transaction: certificate, log entry, timestamp ([`crate::txn`]).
    Sign,
    /// The RHTAS verify path as one transaction: search by digest, then get the entry.
    Verify,
    /// 20% sign and 80% verify transactions, chosen per arrival by a seeded RNG.
    Mixed,
}

impl std::str::FromStr for Workload {
    type Err = UnknownWorkload;
    fn from_str(s: &str) -> Result<Self, UnknownWorkload> {
        Ok(match s {
            "log-append" => Workload::LogAppend,
            "log-append-v2" => Workload::LogAppendV2,
            "log-append-intoto" => Workload::LogAppendIntoto,
            "log-read" => Workload::LogRead,
            "cert" => Workload::Cert,
            "cert-grpc" => Workload::CertGrpc,
            "tsa" => Workload::Tsa,
            "custom" => Workload::Custom,
            "sign" => Workload::Sign,
            "verify" => Workload::Verify,
            "mixed" => Workload::Mixed,
            other => return Err(UnknownWorkload(other.to_string())),
        })
    }
}

/// `--workload` names no workload; the name given.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown workload {0:?}; expected sign, verify, mixed, log-append, log-append-v2, log-append-intoto, log-read, cert, cert-grpc, tsa or custom"
)]
pub struct UnknownWorkload(pub String);

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::LogAppend => "log-append",
            Workload::LogAppendV2 => "log-append-v2",
            Workload::LogAppendIntoto => "log-append-intoto",
            Workload::LogRead => "log-read",
            Workload::Cert => "cert",
            Workload::CertGrpc => "cert-grpc",
            Workload::Tsa => "tsa",
            Workload::Custom => "custom",
            Workload::Sign => "sign",
            Workload::Verify => "verify",
            Workload::Mixed => "mixed",
        }
    }

    /// Whether each arrival is a transaction of several requests ([`crate::txn`]).
    pub fn is_transaction(self) -> bool {
        matches!(self, Workload::Sign | Workload::Verify | Workload::Mixed)
    }
}

/// Makes the i-th request of a run, as the bytes to write on the connection.
/// In a `custom` body, replaced by a number unique to each request.
pub const UNIQUE: &str = "{n}";

pub struct RequestMaker {
    target: Uri,
    kind: Workload,
    /// Fully serialized requests, made before the clock starts.
    prepared: Vec<Vec<u8>>,
    read_size: u64,
    /// `--header`s, added to every request (a guarded server's token, for one).
    headers: Vec<(String, String)>,
}

impl RequestMaker {
    pub fn prepare(
        target: &Uri,
        kind: Workload,
        count: usize,
        method: Method,
        custom_body: Bytes,
        read_size: u64,
        token: Option<&str>,
        headers: &[(String, String)],
    ) -> Arc<RequestMaker> {
        let prefix = target.path().trim_end_matches('/').to_string();
        let prepared = match kind {
            Workload::LogAppend | Workload::LogAppendV2 | Workload::LogAppendIntoto => {
                let path = if kind == Workload::LogAppendV2 { "/api/v2/log/entries" } else { "/api/v1/log/entries" };
                signed_entries(kind, count)
                    .iter()
                    .map(|(_, body)| conn::with_headers(conn::request_bytes("POST", target, &format!("{prefix}{path}"), Some(body)), headers))
                    .collect()
            }
            Workload::Custom => {
                let path = target.path_and_query().map_or("/", |p| p.as_str());
                match std::str::from_utf8(&custom_body).ok().filter(|b| b.contains(UNIQUE)) {
                    // `{n}` in the body: every request distinct (a log that deduplicates must
                    // not answer from its cache), numbered from a random start per run.
                    Some(template) => {
                        let start: u64 = rand::random::<u32>() as u64 * 1_000_000_000;
                        (0..count.max(1) as u64)
                            .map(|i| {
                                let body = template.replace(UNIQUE, &(start + i).to_string());
                                conn::with_headers(conn::request_bytes(method.as_str(), target, path, Some(body.as_bytes())), headers)
                            })
                            .collect()
                    }
                    None => {
                        let body = (!custom_body.is_empty()).then_some(&custom_body[..]);
                        vec![conn::with_headers(conn::request_bytes(method.as_str(), target, path, body), headers)]
                    }
                }
            }
            Workload::LogRead | Workload::Sign | Workload::Verify | Workload::Mixed => Vec::new(),
            Workload::Tsa => {
                let path = format!("{prefix}/api/v1/timestamp");
                (0..count.clamp(1, 4096))
                    .map(|_| {
                        let query = timestamp_query(&rand::random());
                        conn::with_headers(conn::request_bytes_typed("POST", target, &path, Some(&query), "application/timestamp-query"), headers)
                    })
                    .collect()
            }
            Workload::Cert => {
                let token = token.expect("checked by the caller");
                let path = format!("{prefix}/api/v2/signingCert");
                cert_requests(token, count.min(256))
                    .iter()
                    .map(|body| conn::with_headers(conn::request_bytes("POST", target, &path, Some(body)), headers))
                    .collect()
            }
            Workload::CertGrpc => {
                let token = token.expect("checked by the caller");
                let path = format!("{prefix}{}", signet_core::grpc::fulcio::CREATE_SIGNING_CERTIFICATE);
                // gRPC asks for `te: trailers`: the status comes after the message.
                let headers: Vec<(String, String)> = headers.iter().cloned().chain([("te".to_string(), "trailers".to_string())]).collect();
                cert_grpc_requests(token, count.min(256))
                    .iter()
                    .map(|body| conn::with_headers(conn::request_bytes_typed("POST", target, &path, Some(&body[..]), "application/grpc"), &headers))
                    .collect()
            }
        };
        Arc::new(RequestMaker { target: target.clone(), kind, prepared, read_size, headers: headers.to_vec() })
    }

    pub fn request(&self, i: u64) -> std::borrow::Cow<'_, [u8]> {
        match self.kind {
            Workload::LogRead => {
                let index = rand::random::<u64>() % self.read_size.max(1);
                let path = format!("{}/api/v1/log/entries?logIndex={index}", self.target.path().trim_end_matches('/'));
                std::borrow::Cow::Owned(conn::with_headers(conn::request_bytes("GET", &self.target, &path, None), &self.headers))
            }
            _ => std::borrow::Cow::Borrowed(&self.prepared[i as usize % self.prepared.len()]),
        }
    }
}

/// A DER RFC 3161 `TimeStampReq` for a SHA-256 digest, asking for the TSA certificate:
/// `SEQUENCE { INTEGER 1, SEQUENCE { SEQUENCE { OID sha256 }, OCTET STRING digest }, BOOLEAN TRUE }`.
pub fn timestamp_query(digest: &[u8; 32]) -> Vec<u8> {
    let mut out = vec![0x30, 0x37, 0x02, 0x01, 0x01, 0x30, 0x2f, 0x30, 0x0b, 0x06, 0x09];
    out.extend_from_slice(&[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]);
    out.extend_from_slice(&[0x04, 0x20]);
    out.extend_from_slice(digest);
    out.extend_from_slice(&[0x01, 0x01, 0xff]);
    out
}

/// The claim Fulcio wants signed: `email`, else `sub` (read without verifying the token).
pub fn token_challenge(token: &str) -> Option<String> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("email").or_else(|| claims.get("sub"))?.as_str().map(str::to_string)
}

/// `count` fresh keys, each with its PEM public key and its proof of possession for `token`.
fn keys_with_proofs(token: &str, count: usize) -> impl Iterator<Item = (String, Vec<u8>)> {
    let challenge = token_challenge(token).unwrap_or_default();
    let rng = SystemRandom::new();
    (0..count.max(1)).map(move |_| {
        let k = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).expect("keygen");
        let spki = k.public_key().as_der().expect("spki").as_ref().to_vec();
        let pop = k.sign(&rng, challenge.as_bytes()).expect("sign");
        (pem::encode("PUBLIC KEY", &spki), pop.as_ref().to_vec())
    })
}

/// `count` signingCert bodies, each with its own key and proof of possession.
fn cert_requests(token: &str, count: usize) -> Vec<Bytes> {
    keys_with_proofs(token, count)
        .map(|(key, pop)| {
            let body = json!({"credentials": {"oidcIdentityToken": token}, "publicKeyRequest": {
                "publicKey": {"algorithm": "ECDSA", "content": key}, "proofOfPossession": b64::encode(pop)}});
            Bytes::from(serde_json::to_vec(&body).expect("json"))
        })
        .collect()
}

/// The same requests as [`cert_requests`], as framed `CreateSigningCertificateRequest`s.
fn cert_grpc_requests(token: &str, count: usize) -> Vec<Vec<u8>> {
    use signet_core::grpc::fulcio as pb;
    keys_with_proofs(token, count)
        .map(|(content, proof_of_possession)| {
            signet_core::grpc::frame(&pb::CreateSigningCertificateRequest {
                credentials: Some(pb::Credentials { oidc_identity_token: Some(token.to_string()) }),
                key: Some(pb::Key::PublicKeyRequest(pb::PublicKeyRequest {
                    public_key: Some(pb::PublicKey { algorithm: pb::ALGORITHM_ECDSA, content }),
                    proof_of_possession,
                })),
            })
        })
        .collect()
}

/// `count` distinct entries signed by a small pool of keys, made on all cores, each with the
/// SHA-256 digest of its artifact (what `POST /api/v1/index/retrieve` finds it by).
pub(crate) fn signed_entries(kind: Workload, count: usize) -> Vec<([u8; 32], Bytes)> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = count.div_ceil(threads);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let rng = SystemRandom::new();
                let keys: Vec<(EcdsaKeyPair, Vec<u8>)> = (0..8)
                    .map(|_| {
                        let k = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).expect("keygen");
                        let spki = k.public_key().as_der().expect("spki").as_ref().to_vec();
                        (k, spki)
                    })
                    .collect();
                (0..per)
                    .map(|i| {
                        let artifact: [u8; 32] = rand::random();
                        let (key, spki) = &keys[i % keys.len()];
                        let digest = hash::sha256(&artifact);
                        if kind == Workload::LogAppendIntoto {
                            return (digest, intoto_entry(key, spki, &rng, &digest));
                        }
                        let sig = key.sign(&rng, &artifact).expect("sign");
                        let body = match kind {
                            Workload::LogAppendV2 => json!({"hashedRekordRequestV002": {
                                "digest": b64::encode(digest),
                                "signature": {"content": b64::encode(sig.as_ref()), "verifier": {
                                    "publicKey": {"rawBytes": b64::encode(spki)},
                                    "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}}),
                            _ => json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
                                "signature": {"content": b64::encode(sig.as_ref()),
                                              "publicKey": {"content": b64::encode(pem::encode("PUBLIC KEY", spki))}},
                                "data": {"hash": {"algorithm": "sha256", "value": hex::encode(digest)}}}}),
                        };
                        (digest, Bytes::from(serde_json::to_vec(&body).expect("json")))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<([u8; 32], Bytes)> = handles.into_iter().flat_map(|h| h.join().expect("signer thread")).collect();
    all.truncate(count.max(1));
    all
}

/// An intoto 0.0.2 proposed entry as sigstore-js makes it, for an artifact with SHA-256
/// `digest`: a SLSA v1 provenance statement shaped like a CI build's (about 2 KiB), its DSSE
/// payload and signature base64-encoded twice, the key beside the signature.
fn intoto_entry(key: &EcdsaKeyPair, spki: &[u8], rng: &SystemRandom, digest: &[u8; 32]) -> Bytes {
    let statement = json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "signet-lab-artifact.tar.gz", "digest": {"sha256": hex::encode(digest)}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://actions.github.io/buildtypes/workflow/v1",
                "externalParameters": {"workflow": {"ref": "refs/heads/main", "repository": "https://github.com/example/project", "path": ".github/workflows/release.yml"}},
                "internalParameters": {"github": {"event_name": "push", "repository_id": "123456789", "repository_owner_id": "987654321", "runner_environment": "github-hosted"}},
                "resolvedDependencies": [{"uri": "git+https://github.com/example/project@refs/heads/main", "digest": {"gitCommit": hex::encode(&digest[..20])}}],
            },
            "runDetails": {
                "builder": {"id": "https://github.com/example/project/.github/workflows/release.yml@refs/heads/main"},
                "metadata": {"invocationId": format!("https://github.com/example/project/actions/runs/{}/attempts/1", u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]))},
                "byproducts": (0..8).map(|i| json!({"name": format!("step-{i}.log"), "digest": {"sha256": hex::encode(hash::sha256(&[digest[0], i]))}})).collect::<Vec<_>>(),
            },
        },
    })
    .to_string();
    let payload_type = "application/vnd.in-toto+json";
    let pae = format!("DSSEv1 {} {payload_type} {} {statement}", payload_type.len(), statement.len());
    let sig = key.sign(rng, pae.as_bytes()).expect("sign");
    let body = json!({"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
        "envelope": {"payloadType": payload_type, "payload": b64::encode(b64::encode(&statement)),
            "signatures": [{"sig": b64::encode(b64::encode(sig.as_ref())), "publicKey": b64::encode(pem::encode("PUBLIC KEY", spki))}]},
        "hash": {"algorithm": "sha256", "value": hex::encode(hash::sha256(pae.as_bytes()))},
        "payloadHash": {"algorithm": "sha256", "value": hex::encode(hash::sha256(statement.as_bytes()))}}}});
    Bytes::from(serde_json::to_vec(&body).expect("json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intoto_entries_are_ones_the_log_accepts() {
        let entries = signed_entries(Workload::LogAppendIntoto, 3);
        for (digest, body) in &entries {
            let e = signet_log::rekor::v1::parse(body).unwrap();
            assert_eq!(e.digest_key, format!("sha256:{}", hex::encode(digest)), "indexed by the subject");
            let statement = e.attestation.unwrap().data;
            assert!((1500..3000).contains(&statement.len()), "{}", statement.len());
        }
    }

    #[test]
    fn a_custom_body_with_n_is_distinct_per_request() {
        let target: Uri = "http://127.0.0.1:1/add".parse().unwrap();
        let make = |body: &'static str| {
            RequestMaker::prepare(&target, Workload::Custom, 3, Method::POST, Bytes::from_static(body.as_bytes()), 0, None, &[])
        };
        let unique = make("entry {n}");
        assert_eq!(unique.prepared.len(), 3);
        assert!(unique.prepared[0] != unique.prepared[1] && unique.prepared[1] != unique.prepared[2]);
        assert!(!String::from_utf8_lossy(&unique.prepared[0]).contains("{n}"));
        assert_eq!(make("same").prepared.len(), 1, "without {{n}}, one request sent again and again");
    }

    #[test]
    fn headers_go_on_every_workloads_requests() {
        let target: Uri = "http://127.0.0.1:1/".parse().unwrap();
        let headers = [("Authorization".to_string(), "Bearer sgt_x".to_string())];
        for kind in [Workload::Tsa, Workload::LogAppendV2, Workload::LogRead, Workload::Custom] {
            let maker = RequestMaker::prepare(&target, kind, 2, Method::GET, Bytes::new(), 10, None, &headers);
            let request = maker.request(1);
            let text = String::from_utf8_lossy(&request);
            let head = text.split("\r\n\r\n").next().unwrap_or_default();
            assert!(format!("{head}\r\n").contains("\r\nAuthorization: Bearer sgt_x\r\n"), "{kind:?}: {head}");
            // Still one request: the header went into its head, not after it.
            assert_eq!(text.matches("HTTP/1.1").count(), 1, "{kind:?}");
        }
    }
}
