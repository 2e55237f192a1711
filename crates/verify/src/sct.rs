//! The embedded SCT (RFC 6962 §3.3): proof that the certificate was logged to a trusted CT
//! log. An embedded SCT signs the precertificate, so the signed TBS is the leaf's TBS with
//! the SCT list extension removed, bound to the issuer by the SHA-256 of its key.

use der::asn1::{ObjectIdentifier, OctetString};
use der::{Decode, Encode};
use signet_core::b64;
use signet_core::hash::sha256;
use signet_core::pubkey::HashAlg;

use crate::cert::Cert;
use crate::error::{Result, VerifyError};
use crate::time::format_unix;
use crate::trust_root::TrustedRoot;

pub const OID_SCT_LIST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");

fn err(m: impl Into<String>) -> VerifyError {
    VerifyError::Sct(m.into())
}

/// One parsed `SignedCertificateTimestamp` (v1).
struct Sct<'a> {
    log_id: &'a [u8],
    timestamp_ms: u64,
    extensions: &'a [u8],
    hash: u8,
    signature: &'a [u8],
}

/// A cursor over TLS-encoded bytes; every read is bounds-checked.
struct Tls<'a>(&'a [u8]);

impl<'a> Tls<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

fn parse_list(bytes: &[u8]) -> Option<Vec<Sct<'_>>> {
    let mut outer = Tls(bytes);
    let mut list = Tls(outer.vec16()?);
    if !outer.0.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    while !list.0.is_empty() {
        let mut s = Tls(list.vec16()?);
        if s.u8()? != 0 {
            continue; // only v1 exists; skip what we cannot read
        }
        let log_id = s.take(32)?;
        let ts = s.take(8)?;
        let extensions = s.vec16()?;
        let hash = s.u8()?;
        let _sig_alg = s.u8()?;
        let signature = s.vec16()?;
        let timestamp_ms = u64::from_be_bytes(ts.try_into().ok()?);
        out.push(Sct { log_id, timestamp_ms, extensions, hash, signature });
    }
    Some(out)
}

/// The RFC 6962 §3.2 signed data for a precert entry.
fn signed_data(sct: &Sct<'_>, issuer_key_hash: &[u8; 32], tbs: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(tbs.len() + sct.extensions.len() + 64);
    out.extend_from_slice(&[0, 0]); // v1, certificate_timestamp
    out.extend_from_slice(&sct.timestamp_ms.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes()); // precert_entry
    out.extend_from_slice(issuer_key_hash);
    out.extend_from_slice(&(tbs.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(tbs);
    out.extend_from_slice(&(sct.extensions.len() as u16).to_be_bytes());
    out.extend_from_slice(sct.extensions);
    out
}

/// Requires one embedded SCT that verifies against a trusted CT log valid at its time.
pub fn verify(root: &TrustedRoot, leaf: &Cert, issuer: &Cert) -> Result<()> {
    let ext = leaf.extension(OID_SCT_LIST).ok_or_else(|| err("the signing certificate has no embedded SCT"))?;
    let inner = OctetString::from_der(ext.extn_value.as_bytes()).map_err(|_| err("the SCT list extension is malformed"))?;
    let scts = parse_list(inner.as_bytes()).ok_or_else(|| err("the SCT list is malformed"))?;
    let mut tbs = leaf.x509.tbs_certificate.clone();
    if let Some(exts) = tbs.extensions.as_mut() {
        exts.retain(|e| e.extn_id != OID_SCT_LIST);
    }
    let tbs = tbs.to_der().map_err(|e| err(format!("cannot rebuild the precertificate: {e}")))?;
    let issuer_key_hash = sha256(&issuer.key.spki_der);

    let mut problems = Vec::new();
    for sct in &scts {
        let Some(log) = root.ctlog(sct.log_id) else {
            problems.push(format!("log {} is not a CT log in the trusted root", b64::encode(sct.log_id)));
            continue;
        };
        let key = match &log.key {
            Ok(k) => k,
            Err(e) => {
                problems.push(format!("key of CT log {} is unusable: {e}", log.base_url));
                continue;
            }
        };
        let time = (sct.timestamp_ms / 1000) as i64;
        if !log.valid.contains(time) {
            problems.push(format!("SCT time {} is outside CT log {}'s validity ({})", format_unix(time), log.base_url, log.valid));
            continue;
        }
        let hash = match sct.hash {
            4 => HashAlg::Sha256,
            5 => HashAlg::Sha384,
            6 => HashAlg::Sha512,
            // "intrinsic", as Ed25519 logs declare; unused for pure Ed25519.
            8 => HashAlg::Sha512,
            h => {
                problems.push(format!("unsupported SCT hash algorithm {h}"));
                continue;
            }
        };
        match key.verify_with_hash(hash, &signed_data(sct, &issuer_key_hash, &tbs), sct.signature) {
            Ok(()) => return Ok(()),
            Err(_) => problems.push(format!("signature by CT log {} does not verify", log.base_url)),
        }
    }
    if problems.is_empty() {
        return Err(err("the SCT list is empty"));
    }
    Err(err(format!("no embedded SCT verifies: {}", problems.join("; "))))
}
