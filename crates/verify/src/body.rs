//! Does the log entry describe this bundle? The canonicalized body of each supported kind
//! must record the same signature, the same digest (or envelope) and the same certificate
//! or key; otherwise the inclusion proof would prove the wrong thing.
//!
//! Kinds: hashedrekord 0.0.1 (Rekor v1), hashedrekord 0.0.2 (Rekor v2, also for DSSE as
//! SHA-256 of the PAE), dsse 0.0.1 and intoto 0.0.2 (Rekor v1 envelopes).

use serde_json::Value;
use signet_core::pubkey::HashAlg;
use signet_core::{b64, hexfmt, pem};

use crate::bundle::{hash_alg, Content, TlogEntry};
use crate::error::{Result, VerifyError};
use crate::signature::SignedDigest;

/// What the bundle says was signed, and by what.
pub struct Expected<'a> {
    pub content: &'a Content,
    /// The digest the signature covers (artifact digest, or SHA-256 of the DSSE PAE).
    pub signed: &'a SignedDigest,
    /// DER of the leaf certificate, if the bundle has one.
    pub cert_der: Option<&'a [u8]>,
    /// SPKI DER of the signing key.
    pub spki_der: &'a [u8],
}

fn mismatch(m: impl Into<String>) -> VerifyError {
    VerifyError::EntryMismatch(m.into())
}

fn field<'v>(v: &'v Value, path: &[&str]) -> Result<&'v Value> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .ok_or_else(|| mismatch(format!("body has no {}", path.join("."))))
}

fn string<'v>(v: &'v Value, path: &[&str]) -> Result<&'v str> {
    field(v, path)?.as_str().ok_or_else(|| mismatch(format!("body field {} is not a string", path.join("."))))
}

fn b64_field(v: &Value, path: &[&str]) -> Result<Vec<u8>> {
    b64::decode(string(v, path)?).map_err(|_| mismatch(format!("body field {} is not base64", path.join("."))))
}

fn rekor_hash_alg(name: &str) -> Option<HashAlg> {
    match name {
        "sha256" => Some(HashAlg::Sha256),
        "sha384" => Some(HashAlg::Sha384),
        "sha512" => Some(HashAlg::Sha512),
        _ => None,
    }
}

/// Checks a Rekor v1 `{algorithm, value(hex)}` hash.
fn check_hex_hash(v: &Value, path: &[&str], alg: HashAlg, want: &[u8], what: &str) -> Result<()> {
    let mut p = path.to_vec();
    p.push("algorithm");
    let got_alg = rekor_hash_alg(string(v, &p)?);
    p.pop();
    p.push("value");
    let got = string(v, &p)?;
    if got_alg != Some(alg) || !hexfmt::encode(want).eq_ignore_ascii_case(got) {
        return Err(mismatch(format!("the entry's {what} differs from the bundle's")));
    }
    Ok(())
}

impl Expected<'_> {
    /// A verifier recorded as base64 PEM (v1 kinds): a certificate equal to the leaf, or
    /// a public key equal to the signing key.
    fn check_pem_verifier(&self, pem_b64: &[u8]) -> Result<()> {
        let block = pem::decode_first(pem_b64).map_err(|e| mismatch(format!("entry verifier is not PEM: {e}")))?;
        let same = match block.label.as_str() {
            "CERTIFICATE" => self.cert_der == Some(block.der.as_slice()),
            "PUBLIC KEY" => self.cert_der.is_none() && block.der == self.spki_der,
            _ => false,
        };
        if !same {
            return Err(mismatch("the entry's certificate / public key differs from the bundle's"));
        }
        Ok(())
    }

    fn check_signature(&self, got: &[u8], want: &[u8]) -> Result<()> {
        if got != want {
            return Err(mismatch("the entry's signature differs from the bundle's"));
        }
        Ok(())
    }
}

pub fn check(entry: &TlogEntry, exp: &Expected<'_>) -> Result<()> {
    let body: Value = serde_json::from_slice(&entry.body).map_err(|_| mismatch("canonicalizedBody is not JSON"))?;
    let (kind, version) = (string(&body, &["kind"])?, string(&body, &["apiVersion"])?);
    if kind != entry.kind || version != entry.version {
        return Err(mismatch(format!(
            "kindVersion says {} {} but the body is {kind} {version}",
            entry.kind, entry.version
        )));
    }
    match (kind, version, exp.content) {
        ("hashedrekord", "0.0.1", Content::Message(m)) => {
            check_hex_hash(&body, &["spec", "data", "hash"], exp.signed.alg, &exp.signed.digest, "artifact digest")?;
            exp.check_signature(&b64_field(&body, &["spec", "signature", "content"])?, &m.signature)?;
            exp.check_pem_verifier(&b64_field(&body, &["spec", "signature", "publicKey", "content"])?)
        }
        ("hashedrekord", "0.0.2", content) => {
            let spec = field(&body, &["spec", "hashedRekordV002"])?;
            let alg = hash_alg(string(spec, &["data", "algorithm"])?);
            if alg != Some(exp.signed.alg) || b64_field(spec, &["data", "digest"])? != exp.signed.digest {
                let what = if matches!(content, Content::Dsse(_)) { "digest of the envelope (PAE)" } else { "artifact digest" };
                return Err(mismatch(format!("the entry's {what} differs from the bundle's")));
            }
            let want_sig = match content {
                Content::Message(m) => &m.signature,
                Content::Dsse(e) => e.signatures.first().ok_or_else(|| mismatch("envelope has no signature"))?,
            };
            exp.check_signature(&b64_field(spec, &["signature", "content"])?, want_sig)?;
            let verifier = field(spec, &["signature", "verifier"])?;
            let same = if let Some(cert) = verifier.get("x509Certificate") {
                Some(b64_field(cert, &["rawBytes"])?.as_slice()) == exp.cert_der
            } else if let Some(key) = verifier.get("publicKey") {
                exp.cert_der.is_none() && b64_field(key, &["rawBytes"])? == exp.spki_der
            } else {
                false
            };
            if !same {
                return Err(mismatch("the entry's certificate / public key differs from the bundle's"));
            }
            Ok(())
        }
        ("dsse", "0.0.1", Content::Dsse(env)) => {
            check_hex_hash(&body, &["spec", "payloadHash"], HashAlg::Sha256, &HashAlg::Sha256.digest(&env.payload), "payload hash")?;
            let sigs = field(&body, &["spec", "signatures"])?.as_array().ok_or_else(|| mismatch("spec.signatures is not a list"))?;
            check_envelope_sigs(exp, env, sigs, |s| Ok((b64_field(s, &["signature"])?, b64_field(s, &["verifier"])?)))
        }
        ("intoto", "0.0.2", Content::Dsse(env)) => {
            let content = field(&body, &["spec", "content"])?;
            check_hex_hash(content, &["payloadHash"], HashAlg::Sha256, &HashAlg::Sha256.digest(&env.payload), "payload hash")?;
            // intoto 0.0.2 stores the envelope's base64 fields base64-encoded once more. A
            // field that is not doubly encoded is kept as is, and so cannot match.
            let twice = |v: &Value, k: &str| -> Result<Vec<u8>> {
                let once = b64_field(v, &[k])?;
                Ok(std::str::from_utf8(&once).ok().and_then(|s| b64::decode(s).ok()).unwrap_or(once))
            };
            let envelope = field(content, &["envelope"])?;
            if envelope.get("payload").is_some() && twice(envelope, "payload")? != env.payload {
                return Err(mismatch("the entry's envelope payload differs from the bundle's"));
            }
            if string(envelope, &["payloadType"])? != env.payload_type {
                return Err(mismatch("the entry's envelope payloadType differs from the bundle's"));
            }
            let sigs = field(envelope, &["signatures"])?.as_array().ok_or_else(|| mismatch("envelope signatures is not a list"))?;
            check_envelope_sigs(exp, env, sigs, |s| Ok((twice(s, "sig")?, b64_field(s, &["publicKey"])?)))
        }
        (kind, version, content) => Err(mismatch(format!(
            "entry kind {kind} {version} cannot record a {} bundle",
            if matches!(content, Content::Dsse(_)) { "DSSE" } else { "message signature" }
        ))),
    }
}

/// The entry must list exactly the envelope's signatures, each with the bundle's verifier.
fn check_envelope_sigs(
    exp: &Expected<'_>,
    env: &crate::bundle::DsseEnvelope,
    sigs: &[Value],
    read: impl Fn(&Value) -> Result<(Vec<u8>, Vec<u8>)>,
) -> Result<()> {
    if sigs.len() != env.signatures.len() {
        return Err(mismatch(format!("the entry has {} signatures but the envelope has {}", sigs.len(), env.signatures.len())));
    }
    for want in &env.signatures {
        let mut found = false;
        for s in sigs {
            let (sig, verifier) = read(s)?;
            if &sig == want {
                exp.check_pem_verifier(&verifier)?;
                found = true;
            }
        }
        if !found {
            return Err(mismatch("the entry's signature differs from the envelope's"));
        }
    }
    Ok(())
}
