//! What `add-chain` and `add-pre-chain` (RFC 6962 §4.1, §4.2) are sent: a chain checked
//! against this CA, and turned into the entry to log.
//!
//! The log takes only its own CA's certificates (`get-roots` lists one root), so a chain is
//! the submitted certificate, the intermediate that issued it, and optionally the root. The
//! intermediate need not be today's: one that the root signed before a rotation is checked
//! by that signature. Whatever is sent, a check costs at most two signature verifications.

use der::Encode;
use signet_verify::cert::Cert;

use super::opaque24;
use crate::authority::OID_CT_POISON;

/// Which endpoint a chain came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// `add-chain`: a final certificate.
    Certificate,
    /// `add-pre-chain`: a precertificate (it carries the critical poison extension).
    Precertificate,
}

/// A chain that passed [`check`]: what to log, and what `get-entries` serves beside it.
#[derive(Debug)]
pub struct Checked {
    /// The certificate (DER), or the precertificate's TBS without the poison extension.
    pub entry: Vec<u8>,
    /// SHA-256 of the issuing intermediate's public key (a precert entry names its issuer so).
    pub issuer_key_hash: [u8; 32],
    /// `extra_data`: for a certificate, the chain to the root (§4.6's `certificate_chain`);
    /// for a precertificate, the precertificate itself.
    pub extra: Vec<u8>,
}

/// This CA's certificates, against which a chain is checked.
#[derive(Debug, Clone, Copy)]
pub struct OwnCa<'a> {
    pub root: &'a [u8],
    pub intermediate: &'a [u8],
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubmissionError {
    /// The chain is wrong: `at` is the JSON path of the certificate (`chain[1]`), or `chain`.
    #[error("{at}: {why}")]
    Chain { at: String, why: String },
    /// This CA's own root did not parse (not the client's doing).
    #[error("this CA's root: {0}")]
    OwnRoot(signet_verify::cert::CertError),
}

fn wrong(at: impl Into<String>, why: impl ToString) -> SubmissionError {
    SubmissionError::Chain { at: at.into(), why: why.to_string() }
}

/// Checks that `chain` is `[certificate, intermediate]` or `[certificate, intermediate, root]`
/// of this CA, the certificate of the kind its endpoint takes. An error says which
/// certificate was wrong, and what was expected.
pub fn check(chain: &[Vec<u8>], submitted: Submitted, ca: OwnCa<'_>) -> Result<Checked, SubmissionError> {
    if !(2..=3).contains(&chain.len()) {
        return Err(wrong(
            "chain",
            format!(
                "expected the certificate, the intermediate that issued it and optionally this log's root (GET /ct/v1/get-roots): {} certificates sent",
                chain.len()
            ),
        ));
    }
    if chain.get(2).is_some_and(|root| root.as_slice() != ca.root) {
        return Err(wrong("chain[2]", "not this log's root: it takes only its own CA's certificates (GET /ct/v1/get-roots)"));
    }
    let leaf = Cert::parse(&chain[0]).map_err(|e| wrong("chain[0]", e))?;
    let intermediate = Cert::parse(&chain[1]).map_err(|e| wrong("chain[1]", e))?;
    // Today's intermediate by its bytes; an earlier one by the root's signature on it.
    if intermediate.der != ca.intermediate {
        let root = Cert::parse(ca.root).map_err(SubmissionError::OwnRoot)?;
        intermediate.check_issued_by(&root).map_err(|why| wrong("chain[1]", format!("not an intermediate of this log's CA: {why}")))?;
        if !intermediate.is_ca() {
            return Err(wrong("chain[1]", "not a CA certificate (its basicConstraints do not set cA)"));
        }
    }
    leaf.check_issued_by(&intermediate).map_err(|why| wrong("chain[0]", format!("not issued by chain[1]: {why}")))?;
    let spki = intermediate.x509.tbs_certificate.subject_public_key_info.to_der().map_err(|e| wrong("chain[1]", format!("its public key: {e}")))?;
    let issuer_key_hash = signet_core::hash::sha256(&spki);
    let poison = leaf.extension(OID_CT_POISON);
    match submitted {
        Submitted::Certificate => {
            if poison.is_some() {
                return Err(wrong("chain[0]", "a precertificate (it carries the CT poison extension): submit it to /ct/v1/add-pre-chain"));
            }
            let mut list = Vec::with_capacity(6 + intermediate.der.len() + ca.root.len());
            opaque24(&mut list, &intermediate.der);
            opaque24(&mut list, ca.root);
            let mut extra = Vec::with_capacity(3 + list.len());
            opaque24(&mut extra, &list);
            Ok(Checked { entry: leaf.der, issuer_key_hash, extra })
        }
        Submitted::Precertificate => {
            if !poison.is_some_and(|e| e.critical) {
                return Err(wrong("chain[0]", "not a precertificate (no critical CT poison extension): submit it to /ct/v1/add-chain"));
            }
            // §3.2: a precert entry logs the TBS with the poison taken out.
            let mut tbs = leaf.x509.tbs_certificate.clone();
            if let Some(extensions) = tbs.extensions.as_mut() {
                extensions.retain(|e| e.extn_id != OID_CT_POISON);
            }
            let entry = tbs.to_der().map_err(|e| wrong("chain[0]", format!("its TBS does not encode without the poison: {e}")))?;
            Ok(Checked { entry, issuer_key_hash, extra: leaf.der })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use der::{Decode, Encode};
    use signet_keys::{Algorithm, Signer};
    use spki::SubjectPublicKeyInfoOwned;
    use x509_cert::certificate::TbsCertificate;

    use super::*;
    use crate::authority::{issue_intermediate, Authority, CaKeys};
    use crate::x509::{self, CaKey};

    fn authority(dir: &std::path::Path) -> Authority {
        Authority::open(dir, &CaKeys::curve(None)).unwrap()
    }

    fn tbs(ca: &Authority) -> TbsCertificate {
        let key = Signer::generate(Algorithm::EcdsaP256Sha256).unwrap();
        let spki = SubjectPublicKeyInfoOwned::from_der(key.spki_der()).unwrap();
        ca.leaf_tbs(&crate::authority::tests::identity(), spki, x509::random_serial().unwrap(), SystemTime::now(), None).unwrap()
    }

    fn own(ca: &Authority) -> OwnCa<'_> {
        OwnCa { root: ca.root_der(), intermediate: ca.intermediate_der() }
    }

    fn at(e: SubmissionError) -> (String, String) {
        match e {
            SubmissionError::Chain { at, why } => (at, why),
            other => panic!("not a chain error: {other}"),
        }
    }

    #[test]
    fn a_certificate_of_this_ca_is_logged_as_itself_with_its_chain_as_extra_data() {
        let dir = tempfile::tempdir().unwrap();
        let ca = authority(dir.path());
        let cert = ca.sign(tbs(&ca)).unwrap();
        for chain in [vec![cert.clone(), ca.intermediate_der().to_vec()], vec![cert.clone(), ca.intermediate_der().to_vec(), ca.root_der().to_vec()]] {
            let checked = check(&chain, Submitted::Certificate, own(&ca)).unwrap();
            assert_eq!(checked.entry, cert);
            assert_eq!(checked.issuer_key_hash, signet_core::hash::sha256(ca.issuer_spki_der()));
            let mut list = Vec::new();
            opaque24(&mut list, ca.intermediate_der());
            opaque24(&mut list, ca.root_der());
            let mut want = Vec::new();
            opaque24(&mut want, &list);
            assert_eq!(checked.extra, want, "RFC 6962 §4.6: certificate_chain, intermediate then root");
        }
    }

    #[test]
    fn a_precertificate_is_logged_as_its_tbs_without_the_poison() {
        let dir = tempfile::tempdir().unwrap();
        let ca = authority(dir.path());
        let tbs = tbs(&ca);
        let precert = ca.precertificate_of(tbs.clone()).unwrap();
        let checked = check(&[precert.clone(), ca.intermediate_der().to_vec()], Submitted::Precertificate, own(&ca)).unwrap();
        assert_eq!(checked.entry, tbs.to_der().unwrap(), "the TBS the CA would have logged itself");
        assert_eq!(checked.extra, precert);
        assert_eq!(checked.issuer_key_hash, signet_core::hash::sha256(ca.issuer_spki_der()));
    }

    #[test]
    fn each_endpoint_takes_only_its_kind() {
        let dir = tempfile::tempdir().unwrap();
        let ca = authority(dir.path());
        let tbs = tbs(&ca);
        let inter = ca.intermediate_der().to_vec();
        let (path, why) = at(check(&[ca.precertificate_of(tbs.clone()).unwrap(), inter.clone()], Submitted::Certificate, own(&ca)).unwrap_err());
        assert_eq!(path, "chain[0]");
        assert!(why.contains("add-pre-chain"), "{why}");
        let (path, why) = at(check(&[ca.sign(tbs).unwrap(), inter], Submitted::Precertificate, own(&ca)).unwrap_err());
        assert_eq!(path, "chain[0]");
        assert!(why.contains("/ct/v1/add-chain"), "{why}");
    }

    #[test]
    fn chains_of_another_ca_or_the_wrong_shape_are_refused_by_position() {
        let (dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (ca, other) = (authority(dir.path()), authority(other_dir.path()));
        let cert = ca.sign(tbs(&ca)).unwrap();
        let foreign = other.sign(tbs(&other)).unwrap();
        let inter = ca.intermediate_der().to_vec();
        let cases: Vec<(Vec<Vec<u8>>, &str, &str)> = vec![
            (vec![], "chain", "0 certificates sent"),
            (vec![cert.clone()], "chain", "1 certificates sent"),
            (vec![cert.clone(), inter.clone(), ca.root_der().to_vec(), ca.root_der().to_vec()], "chain", "4 certificates sent"),
            (vec![cert.clone(), inter.clone(), other.root_der().to_vec()], "chain[2]", "not this log's root"),
            (vec![foreign.clone(), other.intermediate_der().to_vec()], "chain[1]", "not an intermediate of this log's CA"),
            (vec![cert.clone(), other.intermediate_der().to_vec()], "chain[1]", "not an intermediate of this log's CA"),
            (vec![foreign, inter.clone()], "chain[0]", "not issued by chain[1]"),
            (vec![cert.clone(), ca.root_der().to_vec()], "chain[0]", "not issued by chain[1]"),
            (vec![b"not a certificate".to_vec(), inter.clone()], "chain[0]", "not a DER X.509 certificate"),
            (vec![cert[..cert.len() - 1].to_vec(), inter.clone()], "chain[0]", "not a DER X.509 certificate"),
            (vec![cert, b"\x30\x00".to_vec()], "chain[1]", "not a DER X.509 certificate"),
        ];
        for (chain, want_at, want_why) in cases {
            let (path, why) = at(check(&chain, Submitted::Certificate, own(&ca)).unwrap_err());
            assert_eq!((path.as_str(), why.contains(want_why)), (want_at, true), "{want_at}: {why}");
        }
    }

    #[test]
    fn an_intermediate_the_root_signed_at_a_rotation_is_taken_by_its_signature() {
        let dir = tempfile::tempdir().unwrap();
        let ca = authority(dir.path());
        let root_key = CaKeys::curve(None).root_key(dir.path()).unwrap();
        let next_key = CaKey::new(Signer::generate(Algorithm::EcdsaP256Sha256).unwrap()).unwrap();
        let next_der = issue_intermediate(&root_key, ca.root_der(), &next_key).unwrap();
        let next = ca.successor(next_key, next_der.clone()).unwrap();
        let cert = next.sign(tbs(&next)).unwrap();
        // Served while `ca`'s intermediate is today's: the next one is checked against the root.
        let checked = check(&[cert.clone(), next_der], Submitted::Certificate, own(&ca)).unwrap();
        assert_eq!(checked.issuer_key_hash, signet_core::hash::sha256(next.issuer_spki_der()));
        let (path, _) = at(check(&[cert, ca.intermediate_der().to_vec()], Submitted::Certificate, own(&ca)).unwrap_err());
        assert_eq!(path, "chain[0]", "a certificate of the next intermediate is not one of today's");
    }
}
