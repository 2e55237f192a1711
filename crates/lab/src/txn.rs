//! Transactions: arrivals that are several requests in sequence on one connection.
//!
//! - `sign` is the keyless flow of `cosign sign-blob`: `POST /api/v2/signingCert` (public key
//!   and proof of possession) → `POST` the hashedrekord, which embeds the returned certificate,
//!   to the log (Rekor v1, or v2) → `POST /api/v1/timestamp` over the signature.
//! - `verify` is the verify path of report 004 (RHTAS): `POST /api/v1/index/retrieve` by
//!   SHA-256 digest → `GET /api/v1/log/entries/{uuid}`. The client checks the entry's
//!   inclusion proof against the root hash the entry carries (`core::merkle`); it does not
//!   check the checkpoint's signature, the SET or the certificate.
//! - `mixed` is 20% sign and 80% verify, chosen per arrival by a seeded RNG.
//!
//! Everything that does not depend on a reply is made before the clock starts: keys, proofs
//! of possession, the signatures over the artifacts, the timestamp requests (they cover the
//! signature) and the verify digests. During the run, a sign transaction only assembles the
//! log entry around the certificate the CA returned, which is a little JSON.

use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use http::Uri;
use serde_json::{json, Value};
use signet_client::{fulcio, rekor, token, tsa, ClientError};
use signet_core::{b64, hash, merkle};

use crate::conn::{self, Conn, ConnError};
use crate::dial::Dialer;
use crate::transport::Client;
use crate::workload::Workload;

/// The kinds of transaction, as named in the result's `by_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sign,
    Verify,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Sign => "sign",
            Kind::Verify => "verify",
        }
    }
}

/// The share of sign transactions in `mixed`, in percent (report 004: 20% sign / 80% verify).
pub const MIXED_SIGN_PCT: u64 = 20;

/// Keys per run: each signs many artifacts; the CA certifies a key again at every use.
const KEY_POOL: usize = 256;

/// What one arrival does, made before the clock starts.
pub enum Plan {
    Sign(SignPlan),
    /// The artifact digest to search for.
    Verify([u8; 32]),
}

pub struct SignPlan {
    /// Index of the key (and of its prepared signingCert request).
    pub key: usize,
    pub digest: [u8; 32],
    /// ECDSA over the artifact by that key.
    pub signature: Vec<u8>,
    /// The serialized RFC 3161 request over the SHA-256 of `signature`.
    pub tsa_request: Vec<u8>,
}

/// How many transactions, of which mix, against which log.
#[derive(Debug, Clone)]
pub struct TxnSpec {
    pub workload: Workload,
    pub count: usize,
    /// Seeds the per-arrival choice of kind (`mixed`) and of verify digest.
    pub rng_seed: u64,
    /// 1 or 2: where sign transactions append.
    pub rekor_version: u8,
}

/// Every transaction of a run, ready to execute.
pub struct Transactions {
    target: Uri,
    prefix: String,
    rekor_version: u8,
    /// Per key: the serialized `signingCert` request (public key, proof of possession, token).
    cert_requests: Vec<Vec<u8>>,
    plans: Vec<Plan>,
}

/// Why the transactions of a run cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TxnError {
    #[error("verify transactions need seeded entries (--seed N, N > 0)")]
    NeedsSeed,
    #[error("sign transactions need --token with an identity token (signet dev-token)")]
    NeedsToken,
    /// The token has no identity claim to prove possession over.
    #[error("--token: {0}")]
    Token(#[source] ClientError),
}

/// Why one transaction failed. Its text is the key the result counts it under: the step
/// (`cert`, `log`, `tsa`, `index`, `entry`) and what went wrong there, e.g. `cert_status_500`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TxnFailure {
    #[error("{step}_status_{status}")]
    Status { step: &'static str, status: u16 },
    /// The connection failed; keyed by the kind of failure (`io`, `tls`, ...).
    #[error("{step}_{}", .source.kind())]
    Conn { step: &'static str, source: ConnError },
    #[error("cert_bad_reply")]
    CertNotJson(#[source] serde_json::Error),
    #[error("cert_bad_reply")]
    CertNoChain(#[source] ClientError),
    #[error("tsa_refused")]
    TsaRefused(#[source] ClientError),
    #[error("index_bad_reply")]
    IndexBadReply(#[source] serde_json::Error),
    #[error("index_not_found")]
    IndexNotFound,
    #[error("entry_{0}")]
    Entry(EntryFault),
}

/// What is wrong with an entry a verify transaction read ([`check_entry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EntryFault {
    #[error("bad_reply")]
    BadReply,
    /// No inclusion proof, or one with a field missing.
    #[error("no_proof")]
    NoProof,
    /// The proof does not lead from the body to the root hash.
    #[error("bad_proof")]
    BadProof,
}

/// Why the entries for verify transactions could not be appended before the run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeedError {
    /// A signing or seeding task panicked or was cancelled.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("seeding entry {index}: status {status}")]
    Status { index: usize, status: u16 },
    #[error("seeding entry {index}: {source}")]
    Conn { index: usize, source: ConnError },
}

/// A SplitMix64 step: a seeded, stateless RNG per arrival, so the mix does not depend on
/// which connection sends which arrival.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The kind of arrival `i`.
pub fn kind_of(workload: Workload, rng_seed: u64, i: u64) -> Kind {
    match workload {
        Workload::Sign => Kind::Sign,
        Workload::Mixed if splitmix64(rng_seed ^ splitmix64(i)) % 100 < MIXED_SIGN_PCT => Kind::Sign,
        _ => Kind::Verify,
    }
}

impl Transactions {
    /// Makes every plan. `token` is needed when the mix has sign transactions, `seeded` when it
    /// has verify transactions (the digests of entries already in the log).
    pub fn prepare(target: &Uri, spec: &TxnSpec, token: Option<&str>, seeded: &[[u8; 32]]) -> Result<Transactions, TxnError> {
        let prefix = target.path().trim_end_matches('/').to_string();
        let kinds: Vec<Kind> = (0..spec.count as u64).map(|i| kind_of(spec.workload, spec.rng_seed, i)).collect();
        let signs = kinds.iter().filter(|k| **k == Kind::Sign).count();
        if kinds.contains(&Kind::Verify) && seeded.is_empty() {
            return Err(TxnError::NeedsSeed);
        }
        let (keys, cert_requests) = if signs > 0 {
            let token = token.ok_or(TxnError::NeedsToken)?;
            let challenge = token::challenge(token).map_err(TxnError::Token)?;
            make_keys(target, &prefix, token, &challenge, signs.min(KEY_POOL))
        } else {
            (Vec::new(), Vec::new())
        };
        let tsa_path = format!("{prefix}/api/v1/timestamp");
        let mut signed = sign_artifacts(&keys, signs).into_iter();
        let plans = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| match kind {
                Kind::Sign => {
                    let (key, digest, signature) = signed.next().expect("one signature per sign arrival");
                    let nonce: [u8; 8] = rand::random();
                    let query = tsa::request(&hash::sha256(&signature), &nonce).expect("a TimeStampReq encodes");
                    let tsa_request = conn::request_bytes_typed("POST", target, &tsa_path, Some(&query), "application/timestamp-query");
                    Plan::Sign(SignPlan { key, digest, signature, tsa_request })
                }
                Kind::Verify => {
                    let pick = splitmix64(spec.rng_seed.rotate_left(17) ^ splitmix64(i as u64 ^ 0x5eed)) % seeded.len() as u64;
                    Plan::Verify(seeded[pick as usize])
                }
            })
            .collect();
        Ok(Transactions { target: target.clone(), prefix, rekor_version: spec.rekor_version, cert_requests, plans })
    }

    pub fn plan(&self, i: u64) -> &Plan {
        &self.plans[i as usize % self.plans.len()]
    }

    pub fn kind(&self, i: u64) -> Kind {
        match self.plan(i) {
            Plan::Sign(_) => Kind::Sign,
            Plan::Verify(_) => Kind::Verify,
        }
    }

    /// The `signingCert` request of a key, as sent.
    pub fn cert_request(&self, key: usize) -> &[u8] {
        &self.cert_requests[key]
    }

    /// The log entry of a sign transaction around the leaf certificate the CA returned.
    pub fn log_request(&self, plan: &SignPlan, leaf_der: &[u8]) -> Vec<u8> {
        let (path, body) = match self.rekor_version {
            2 => (rekor::V2_PATH, rekor::v2_request(&plan.digest, &plan.signature, leaf_der)),
            _ => (rekor::V1_PATH, rekor::v1_request(&plan.digest, &plan.signature, leaf_der)),
        };
        let body = serde_json::to_vec(&body).expect("JSON serializes");
        conn::request_bytes("POST", &self.target, &format!("{}{path}", self.prefix), Some(&body))
    }

    /// The index search of a verify transaction.
    pub fn search_request(&self, digest: &[u8; 32]) -> Vec<u8> {
        let body = serde_json::to_vec(&json!({"hash": format!("sha256:{}", hex::encode(digest))})).expect("JSON serializes");
        conn::request_bytes("POST", &self.target, &format!("{}/api/v1/index/retrieve", self.prefix), Some(&body))
    }

    /// Runs arrival `i` on `conn`: its kind, and the kind of error of the first step that failed.
    pub async fn execute(&self, conn: &mut Client, i: u64) -> (Kind, Result<(), TxnFailure>) {
        match self.plan(i) {
            Plan::Sign(p) => (Kind::Sign, self.sign(conn, p).await),
            Plan::Verify(d) => (Kind::Verify, self.verify(conn, d).await),
        }
    }

    async fn sign(&self, conn: &mut Client, p: &SignPlan) -> Result<(), TxnFailure> {
        let body = step(conn, "cert", self.cert_request(p.key)).await?;
        let reply: Value = serde_json::from_slice(&body).map_err(TxnFailure::CertNotJson)?;
        let chain = fulcio::chain(&reply).map_err(TxnFailure::CertNoChain)?;
        step(conn, "log", &self.log_request(p, &chain[0])).await?;
        let stamp = step(conn, "tsa", &p.tsa_request).await?;
        tsa::check_response("timestamp", &stamp).map_err(TxnFailure::TsaRefused)
    }

    async fn verify(&self, conn: &mut Client, digest: &[u8; 32]) -> Result<(), TxnFailure> {
        let body = step(conn, "index", &self.search_request(digest)).await?;
        let uuids: Vec<String> = serde_json::from_slice(&body).map_err(TxnFailure::IndexBadReply)?;
        let uuid = uuids.first().ok_or(TxnFailure::IndexNotFound)?;
        let path = format!("{}/api/v1/log/entries/{uuid}", self.prefix);
        let body = step(conn, "entry", &conn::request_bytes("GET", &self.target, &path, None)).await?;
        check_entry(&body).map_err(TxnFailure::Entry)
    }
}

/// One request of a transaction: its body on a 2xx, else `<step>_status_<code>` or
/// `<step>_<connection error kind>`.
async fn step(conn: &mut Client, step: &'static str, request: &[u8]) -> Result<Vec<u8>, TxnFailure> {
    match conn.fetch(request).await {
        Ok((status, body)) if (200..300).contains(&status) => Ok(body),
        Ok((status, _)) => Err(TxnFailure::Status { step, status }),
        Err(source) => Err(TxnFailure::Conn { step, source }),
    }
}

/// Checks a Rekor v1 `{uuid: entry}` reply: the entry's inclusion proof leads from the hash
/// of its body to the root hash it states.
pub fn check_entry(reply: &[u8]) -> Result<(), EntryFault> {
    use EntryFault::{BadProof, BadReply, NoProof};
    let v: Value = serde_json::from_slice(reply).map_err(|_| BadReply)?;
    let entry = v.as_object().and_then(|m| m.values().next()).ok_or(BadReply)?;
    let body = entry.get("body").and_then(Value::as_str).and_then(|b| b64::decode(b).ok()).ok_or(BadReply)?;
    let proof = entry.pointer("/verification/inclusionProof").ok_or(NoProof)?;
    let hash32 = |v: &Value| -> Option<[u8; 32]> { hex::decode(v.as_str()?).ok()?.try_into().ok() };
    let index = proof.get("logIndex").and_then(Value::as_u64).ok_or(NoProof)?;
    let size = proof.get("treeSize").and_then(Value::as_u64).ok_or(NoProof)?;
    let root = proof.get("rootHash").and_then(hash32).ok_or(NoProof)?;
    let hashes: Vec<[u8; 32]> =
        proof.get("hashes").and_then(Value::as_array).ok_or(NoProof)?.iter().map(hash32).collect::<Option<_>>().ok_or(NoProof)?;
    merkle::verify_inclusion(&merkle::leaf_hash(&body), index, size, &hashes, &root).map_err(|_| BadProof)
}

/// `n` keys and, per key, its serialized `signingCert` request: the public key and the
/// signature over the token's identity claim, with the token as a bearer credential.
fn make_keys(target: &Uri, prefix: &str, token: &str, challenge: &str, n: usize) -> (Vec<EcdsaKeyPair>, Vec<Vec<u8>>) {
    let rng = SystemRandom::new();
    let path = format!("{prefix}{}", fulcio::PATH);
    (0..n)
        .map(|_| {
            let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).expect("keygen");
            let spki = key.public_key().as_der().expect("spki").as_ref().to_vec();
            let proof = key.sign(&rng, challenge.as_bytes()).expect("sign");
            let body = serde_json::to_vec(&fulcio::request(&spki, proof.as_ref())).expect("JSON serializes");
            let request = conn::request_bytes_bearer("POST", target, &path, &body, token);
            (key, request)
        })
        .unzip()
}

/// `count` distinct random artifacts signed round-robin by `keys`, on all cores:
/// (key index, artifact digest, signature).
fn sign_artifacts(keys: &[EcdsaKeyPair], count: usize) -> Vec<(usize, [u8; 32], Vec<u8>)> {
    if count == 0 {
        return Vec::new();
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = count.div_ceil(threads);
    let keys = Arc::new(keys);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let keys = keys.clone();
                s.spawn(move || {
                    let rng = SystemRandom::new();
                    (t * per..((t + 1) * per).min(count))
                        .map(|i| {
                            let artifact: [u8; 32] = rand::random();
                            let key = i % keys.len();
                            let signature = keys[key].sign(&rng, &artifact).expect("sign").as_ref().to_vec();
                            (key, hash::sha256(&artifact), signature)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("signer thread")).collect()
    })
}

/// The entries that verify transactions look up: `n` distinct signed hashedrekords appended
/// to the Rekor v1 log over a few connections before the clock starts. Returns their digests.
pub async fn seed_entries(dialer: &Arc<Dialer>, target: &Uri, n: usize) -> Result<Vec<[u8; 32]>, SeedError> {
    let entries = tokio::task::spawn_blocking(move || crate::workload::signed_entries(Workload::LogAppend, n)).await?;
    let path = format!("{}{}", target.path().trim_end_matches('/'), rekor::V1_PATH);
    let requests: Vec<(usize, Vec<u8>)> =
        entries.iter().enumerate().map(|(i, (_, body))| (i, conn::request_bytes("POST", target, &path, Some(body)))).collect();
    let requests = Arc::new(requests);
    let lanes = 16.min(n.max(1));
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let (requests, dialer) = (requests.clone(), dialer.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(&dialer);
            for (i, req) in requests.iter().skip(lane).step_by(lanes) {
                match conn.send(req).await {
                    // 409: already in the log from an earlier run with the same entry, which is as good.
                    Ok(r) if (200..300).contains(&r.status) || r.status == 409 => {}
                    Ok(r) => return Err(SeedError::Status { index: *i, status: r.status }),
                    Err(source) => return Err(SeedError::Conn { index: *i, source }),
                }
            }
            Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(entries.into_iter().map(|(d, _)| d).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_ASN1};
    use base64::Engine;
    use signet_core::pem;

    fn token() -> String {
        let e = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", e(r#"{"alg":"RS256"}"#), e(r#"{"sub":"s","email":"lab@example.com"}"#))
    }

    fn target() -> Uri {
        "http://127.0.0.1:9/base".parse().unwrap()
    }

    fn spec(workload: Workload, count: usize, rng_seed: u64) -> TxnSpec {
        TxnSpec { workload, count, rng_seed, rekor_version: 1 }
    }

    /// The JSON body of a serialized request.
    fn body_of(request: &[u8]) -> Value {
        let at = request.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        serde_json::from_slice(&request[at..]).unwrap()
    }

    #[test]
    fn sign_requests_carry_a_valid_proof_and_the_log_entry_embeds_the_returned_cert() {
        let t = Transactions::prepare(&target(), &spec(Workload::Sign, 4, 1), Some(&token()), &[]).unwrap();
        let Plan::Sign(p) = t.plan(2) else { panic!("sign workload made a verify plan") };

        let cert = t.cert_request(p.key);
        assert!(cert.starts_with(b"POST /base/api/v2/signingCert HTTP/1.1\r\n"));
        assert!(String::from_utf8_lossy(cert).contains(&format!("\r\nAuthorization: Bearer {}\r\n", token())));
        let req = body_of(cert);
        let key_pem = req.pointer("/publicKeyRequest/publicKey/content").and_then(Value::as_str).unwrap();
        let spki = pem::decode_first(key_pem.as_bytes()).unwrap().der;
        let proof = b64::decode(req.pointer("/publicKeyRequest/proofOfPossession").and_then(Value::as_str).unwrap()).unwrap();
        // The proof of possession is the key's signature over the token's email claim.
        let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &spki[26..]);
        key.verify(b"lab@example.com", &proof).expect("valid proof of possession");
        assert!(key.verify(b"s", &proof).is_err());

        let leaf = b"the leaf certificate DER the CA returned".to_vec();
        let log = t.log_request(p, &leaf);
        assert!(log.starts_with(b"POST /base/api/v1/log/entries HTTP/1.1\r\n"));
        let entry = body_of(&log);
        assert_eq!(entry["kind"], "hashedrekord");
        assert_eq!(entry.pointer("/spec/data/hash/value").unwrap(), &hex::encode(p.digest));
        assert_eq!(entry.pointer("/spec/signature/content").unwrap(), &b64::encode(&p.signature));
        let cert_pem = b64::decode(entry.pointer("/spec/signature/publicKey/content").and_then(Value::as_str).unwrap()).unwrap();
        let block = pem::decode_first(&cert_pem).unwrap();
        assert_eq!((block.label.as_str(), block.der), ("CERTIFICATE", leaf.clone()));

        // The timestamp request covers the signature.
        assert!(p.tsa_request.starts_with(b"POST /base/api/v1/timestamp HTTP/1.1\r\n"));
        let imprint = hash::sha256(&p.signature);
        assert!(p.tsa_request.windows(32).any(|w| w == imprint));

        // Every arrival has its own artifact; keys are reused.
        let digests: std::collections::BTreeSet<_> =
            (0..4).map(|i| match t.plan(i) { Plan::Sign(p) => p.digest, _ => unreachable!() }).collect();
        assert_eq!(digests.len(), 4);

        // Rekor v2: the v2 request with the cert as verifier.
        let t2 = Transactions::prepare(&target(), &TxnSpec { rekor_version: 2, ..spec(Workload::Sign, 1, 1) }, Some(&token()), &[]).unwrap();
        let Plan::Sign(p2) = t2.plan(0) else { unreachable!() };
        let v2 = t2.log_request(p2, &leaf);
        assert!(v2.starts_with(b"POST /base/api/v2/log/entries HTTP/1.1\r\n"));
        assert_eq!(body_of(&v2).pointer("/hashedRekordRequestV002/signature/verifier/x509Certificate/rawBytes").unwrap(), &b64::encode(&leaf));
    }

    #[test]
    fn verify_picks_seeded_digests_reproducibly() {
        let seeded: Vec<[u8; 32]> = (0..5u8).map(|i| [i; 32]).collect();
        let picks = |rng_seed| {
            let t = Transactions::prepare(&target(), &spec(Workload::Verify, 200, rng_seed), None, &seeded).unwrap();
            (0..200).map(|i| match t.plan(i) { Plan::Verify(d) => *d, Plan::Sign(_) => panic!("verify made a sign plan") }).collect::<Vec<_>>()
        };
        let a = picks(7);
        assert!(a.iter().all(|d| seeded.contains(d)));
        assert_eq!(a.iter().collect::<std::collections::BTreeSet<_>>().len(), 5, "all seeded digests get picked");
        assert_eq!(a, picks(7), "the same seed picks the same digests");
        assert_ne!(a, picks(8));

        let t = Transactions::prepare(&target(), &spec(Workload::Verify, 1, 7), None, &seeded).unwrap();
        let search = t.search_request(&[0xab; 32]);
        assert!(search.starts_with(b"POST /base/api/v1/index/retrieve HTTP/1.1\r\n"));
        assert_eq!(body_of(&search), json!({"hash": format!("sha256:{}", "ab".repeat(32))}));
    }

    #[test]
    fn mixed_is_a_fifth_sign_and_needs_token_and_seed() {
        let seeded = [[1u8; 32]];
        let t = Transactions::prepare(&target(), &spec(Workload::Mixed, 5000, 3), Some(&token()), &seeded).unwrap();
        let signs = (0..5000).filter(|&i| t.kind(i) == Kind::Sign).count();
        assert!((900..1100).contains(&signs), "{signs} sign of 5000");
        let again: Vec<Kind> = (0..5000).map(|i| kind_of(Workload::Mixed, 3, i)).collect();
        assert_eq!(again, (0..5000).map(|i| t.kind(i)).collect::<Vec<_>>());

        let no_token = Transactions::prepare(&target(), &spec(Workload::Mixed, 100, 3), None, &seeded).err().unwrap().to_string();
        assert!(no_token.contains("need --token"), "{no_token}");
        let no_seed = Transactions::prepare(&target(), &spec(Workload::Verify, 10, 3), None, &[]).err().unwrap();
        assert!(matches!(no_seed, TxnError::NeedsSeed) && no_seed.to_string().contains("--seed"), "{no_seed}");
        let bad_token = Transactions::prepare(&target(), &spec(Workload::Sign, 1, 3), Some("x"), &[]).err().unwrap().to_string();
        assert!(bad_token.starts_with("--token: "), "{bad_token}");
    }

    #[test]
    fn entries_are_checked_against_their_inclusion_proof() {
        let (b0, b1) = (b"entry zero".to_vec(), b"entry one".to_vec());
        let (l0, l1) = (merkle::leaf_hash(&b0), merkle::leaf_hash(&b1));
        let root = merkle::node_hash(&l0, &l1);
        let entry = |root: &[u8; 32], proof: bool| {
            let mut e = json!({"body": b64::encode(&b0), "logIndex": 0});
            if proof {
                e["verification"] = json!({"inclusionProof": {"logIndex": 0, "treeSize": 2, "rootHash": hex::encode(root), "hashes": [hex::encode(l1)]}});
            }
            serde_json::to_vec(&json!({"uuid": e})).unwrap()
        };
        assert_eq!(check_entry(&entry(&root, true)), Ok(()));
        assert_eq!(check_entry(&entry(&[0; 32], true)), Err(EntryFault::BadProof));
        assert_eq!(check_entry(&entry(&root, false)), Err(EntryFault::NoProof));
        assert_eq!(check_entry(b"[]"), Err(EntryFault::BadReply));
        assert_eq!(TxnFailure::Entry(EntryFault::NoProof).to_string(), "entry_no_proof");
    }
}
