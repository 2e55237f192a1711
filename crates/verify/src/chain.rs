//! The signing certificate must chain to a certificate authority of the trusted root, and
//! every certificate on the way must be valid at each trusted signing time (Fulcio
//! certificates live ten minutes; the signing time, not now, is what counts).

use crate::cert::Cert;
use crate::error::{Result, VerifyError};
use crate::time::SigningTime;
use crate::trust_root::{Authority, TrustedRoot};

fn err(m: impl Into<String>) -> VerifyError {
    VerifyError::Chain(m.into())
}

/// Returns the CA that issued `leaf`, after checking the chain at every one of `times`.
/// `bundle_chain` holds the certificates a v0.1/v0.2 bundle sent after the leaf: they are
/// never trusted, and a root among them is rejected outright.
pub fn verify<'r>(root: &'r TrustedRoot, leaf: &Cert, bundle_chain: &[Vec<u8>], times: &[SigningTime]) -> Result<&'r Authority> {
    for der in bundle_chain {
        let c = Cert::parse(der).map_err(|e| err(format!("bundle chain certificate: {e}")))?;
        if c.is_self_issued() {
            return Err(err(format!(
                "the bundle's chain includes the root certificate {}; roots come only from the trusted root",
                c.x509.tbs_certificate.subject
            )));
        }
    }
    if leaf.is_ca() {
        return Err(err("the signing certificate is a CA certificate"));
    }
    let mut last_error = None;
    let ca = root
        .certificate_authorities
        .iter()
        .find(|ca| match leaf.check_issued_by(&ca.chain[0]) {
            Ok(()) => true,
            Err(e) => {
                last_error = Some(e);
                false
            }
        })
        .ok_or_else(|| {
            err(format!(
                "the signing certificate was not issued by any certificate authority in the trusted root{}",
                last_error.map(|e| format!(" (last: {e})")).unwrap_or_default()
            ))
        })?;
    if let Some(e) = &ca.chain_error {
        return Err(err(format!("the trusted chain of CA {} does not verify: {e}", ca.uri)));
    }
    for t in times {
        if !leaf.validity.contains(t.unix) {
            return Err(err(format!("the signing certificate is not valid at {t} (valid {})", leaf.validity)));
        }
        if !ca.valid.contains(t.unix) {
            return Err(err(format!("{t} is outside the trusted root's validity for CA {} ({})", ca.uri, ca.valid)));
        }
        for c in &ca.chain {
            if !c.validity.contains(t.unix) {
                return Err(err(format!(
                    "CA certificate {} is not valid at {t} (valid {})",
                    c.x509.tbs_certificate.subject, c.validity
                )));
            }
        }
    }
    Ok(ca)
}
