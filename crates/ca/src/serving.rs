//! The TLS CA of a `--dev` instance, and the short-lived serving certificates it issues
//! (DESIGN's `issued` source; SPIFFE's Workload API in spirit: the workload never holds a
//! long-lived certificate, only a key and a few hours of validity, renewed in memory).
//!
//! A CA of its own, not the code-signing root: clients that trust `tls_ca.pem` for HTTPS
//! then trust nothing that signs artifacts, and the Fulcio root is never a TLS anchor. Its
//! key is `keys/tls-ca.pem` (0600) and its certificate `ca/tls-ca.pem`, made on first
//! start and kept, so that a client configured once keeps working across restarts. The
//! serving key and certificate never touch the disk.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use der::asn1::{Ia5String, ObjectIdentifier, OctetString};
use der::{Decode, Encode};
use signet_core::{files, pem};
use signet_keys::{self as keys, Algorithm};
use x509_cert::certificate::Certificate;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{AuthorityKeyIdentifier, ExtendedKeyUsage, KeyUsage, KeyUsages, SubjectAltName, SubjectKeyIdentifier};
use x509_cert::name::Name;

use crate::authority::{
    ca_tbs, CaError, OID_AUTHORITY_KEY_ID, OID_EXT_KEY_USAGE, OID_KEY_USAGE, OID_SUBJECT_ALT_NAME, OID_SUBJECT_KEY_ID,
};
use crate::x509::{self, CaKey, TbsSpec, X509Error};

/// RFC 5280 id-kp-serverAuth.
pub const OID_SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");

/// Where the CA's certificate is kept in a data dir: what `signet trust export` copies to
/// `tls_ca.pem`.
pub fn certificate_path(data_dir: &Path) -> PathBuf {
    data_dir.join("ca").join("tls-ca.pem")
}

/// The dev TLS CA: its key and its self-signed certificate.
pub struct ServingCa {
    key: CaKey,
    certificate: Certificate,
    pem: String,
}

/// A serving certificate just issued: PEM text held in memory only.
pub struct Serving {
    pub certificate_pem: String,
    pub key_pem: String,
    pub not_after: SystemTime,
}

/// The names a serving certificate is for: DNS names and IP addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServingNames {
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
}

impl ServingNames {
    /// `localhost`, 127.0.0.1 and ::1, the address listened on (unless it is a wildcard) and the
    /// host of the public URL, without duplicates.
    pub fn for_listener(listen: IpAddr, public_host: Option<&str>) -> ServingNames {
        let mut names = ServingNames { dns: vec!["localhost".into()], ips: vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])] };
        if !listen.is_unspecified() {
            names.add_ip(listen);
        }
        if let Some(host) = public_host {
            match host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
                Ok(ip) => names.add_ip(ip),
                Err(_) if !names.dns.iter().any(|d| d.eq_ignore_ascii_case(host)) => names.dns.push(host.to_ascii_lowercase()),
                Err(_) => {}
            }
        }
        names
    }

    fn add_ip(&mut self, ip: IpAddr) {
        if !self.ips.contains(&ip) {
            self.ips.push(ip);
        }
    }
}

impl ServingCa {
    /// Loads the CA from `data_dir`, making its key and certificate on first use.
    pub fn open(data_dir: &Path) -> Result<ServingCa, CaError> {
        let (keys_dir, ca_dir) = (data_dir.join("keys"), data_dir.join("ca"));
        for d in [&keys_dir, &ca_dir] {
            files::ensure_private_dir(d).map_err(|e| file_err(d, e))?;
        }
        let key_path = keys_dir.join("tls-ca.pem");
        let key = CaKey::from_pkcs8(&keys::file::load_or_generate_pkcs8(&key_path, Algorithm::EcdsaP256Sha256)?)?;
        let cert_path = certificate_path(data_dir);
        let der = match std::fs::read(&cert_path) {
            Ok(bytes) => pem::decode_first(&bytes).map_err(|e| file_err(&cert_path, e))?.der,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let name = Name::from_str("CN=signet TLS CA,O=signet").map_err(X509Error::from)?;
                let der = x509::sign(ca_tbs(&key, &key, name.clone(), name, None, SystemTime::now())?, &key)?;
                files::write_atomic(&cert_path, pem::encode("CERTIFICATE", &der).as_bytes(), 0o644).map_err(|e| file_err(&cert_path, e))?;
                der
            }
            Err(e) => return Err(file_err(&cert_path, e)),
        };
        let certificate = Certificate::from_der(&der)?;
        if certificate.tbs_certificate.subject_public_key_info.to_der()? != key.spki_der() {
            return Err(file_err(&cert_path, "the TLS CA certificate does not match keys/tls-ca.pem"));
        }
        Ok(ServingCa { key, certificate, pem: pem::encode("CERTIFICATE", &der) })
    }

    /// The CA certificate, PEM: what clients trust.
    pub fn certificate_pem(&self) -> &str {
        &self.pem
    }

    /// A new key and a certificate for `names`, valid from a minute ago (clock skew) for
    /// `lifetime`: ECDSA P-256, serverAuth only.
    pub fn issue(&self, names: &ServingNames, lifetime: Duration) -> Result<Serving, CaError> {
        let pkcs8 = keys::file::generate_pkcs8(Algorithm::EcdsaP256Sha256)?;
        let spki = CaKey::from_pkcs8(&pkcs8)?.spki();
        let mut sans = Vec::with_capacity(names.dns.len() + names.ips.len());
        for dns in &names.dns {
            sans.push(GeneralName::DnsName(Ia5String::new(dns).map_err(|e| CaError::Identity(dns.clone(), e.to_string()))?));
        }
        for ip in &names.ips {
            let octets = match ip {
                IpAddr::V4(v4) => v4.octets().to_vec(),
                IpAddr::V6(v6) => v6.octets().to_vec(),
            };
            sans.push(GeneralName::IpAddress(OctetString::new(octets)?));
        }
        let ca_spki = &self.certificate.tbs_certificate.subject_public_key_info;
        let extensions = vec![
            x509::extension(OID_KEY_USAGE, true, &KeyUsage(KeyUsages::DigitalSignature.into()))?,
            x509::extension(OID_EXT_KEY_USAGE, false, &ExtendedKeyUsage(vec![OID_SERVER_AUTH]))?,
            x509::extension(OID_SUBJECT_KEY_ID, false, &SubjectKeyIdentifier(OctetString::new(x509::key_identifier(&spki))?))?,
            x509::extension(
                OID_AUTHORITY_KEY_ID,
                false,
                &AuthorityKeyIdentifier {
                    key_identifier: Some(OctetString::new(x509::key_identifier(ca_spki))?),
                    authority_cert_issuer: None,
                    authority_cert_serial_number: None,
                },
            )?,
            // Critical because the subject is empty (RFC 5280 §4.2.1.6): the names are here.
            x509::extension(OID_SUBJECT_ALT_NAME, true, &SubjectAltName(sans))?,
        ];
        let now = SystemTime::now();
        let not_after = now + lifetime;
        let tbs = x509::tbs(TbsSpec {
            serial: x509::random_serial()?,
            signature: self.key.signature_algorithm(),
            issuer: self.certificate.tbs_certificate.subject.clone(),
            subject: Name::default(),
            not_before: now - Duration::from_secs(60),
            not_after,
            spki,
            extensions,
        })?;
        let der = x509::sign(tbs, &self.key)?;
        Ok(Serving {
            certificate_pem: pem::encode("CERTIFICATE", &der),
            key_pem: pem::encode("PRIVATE KEY", pkcs8.as_ref()),
            not_after,
        })
    }
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> CaError {
    CaError::File { path: path.display().to_string(), why: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn openssl(args: &[&str]) -> (bool, String) {
        let out = Command::new("openssl").args(args).output().unwrap();
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }

    #[test]
    fn the_ca_is_made_once_and_its_leaves_verify_for_their_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let ca = ServingCa::open(dir.path()).unwrap();
        let again = ServingCa::open(dir.path()).unwrap();
        assert_eq!(ca.certificate_pem(), again.certificate_pem(), "a second start keeps the CA");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("keys/tls-ca.pem")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let names = ServingNames::for_listener("127.0.0.2".parse().unwrap(), Some("signet.test"));
        assert_eq!(names.dns, ["localhost", "signet.test"]);
        let served = again.issue(&names, Duration::from_secs(3600)).unwrap();
        let (leaf, root) = (dir.path().join("leaf.pem"), certificate_path(dir.path()));
        std::fs::write(&leaf, &served.certificate_pem).unwrap();
        let verify = |extra: &[&str]| {
            let mut args = vec!["verify", "-purpose", "sslserver", "-CAfile", root.to_str().unwrap()];
            args.extend_from_slice(extra);
            args.push(leaf.to_str().unwrap());
            openssl(&args)
        };
        for ok in [&["-verify_hostname", "localhost"][..], &["-verify_ip", "127.0.0.2"], &["-verify_ip", "::1"], &["-verify_hostname", "signet.test"]] {
            let (passed, out) = verify(ok);
            assert!(passed, "{ok:?}: {out}");
        }
        let (passed, out) = verify(&["-verify_hostname", "other.test"]);
        assert!(!passed, "a name the certificate does not hold: {out}");
        // Not a code-signing chain: the same leaf is refused for that purpose.
        let (passed, _) = openssl(&["verify", "-purpose", "codesign", "-CAfile", root.to_str().unwrap(), leaf.to_str().unwrap()]);
        assert!(!passed);
        assert!(served.not_after > SystemTime::now() + Duration::from_secs(3500));
    }

    #[test]
    fn a_ca_certificate_that_is_not_its_keys_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        ServingCa::open(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join("keys/tls-ca.pem")).unwrap();
        let err = ServingCa::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("does not match keys/tls-ca.pem"), "{err}");
    }
}
