//! mTLS identities: a client certificate that the TLS layer verified (against `[tls]
//! client_ca`) names its holder by its subject alternative names, and `[guard.mtls] roles`
//! maps a SAN to a role. The first SAN of the certificate that the table names is the
//! principal: its role's permissions apply as a token's would, rate limits and bans key on
//! it, and the audit record names it. A certificate none of whose SANs is mapped grants
//! nothing: its holder is anonymous, though the audit record still names its SAN.
//!
//! An API token presented on the same request wins: it is the more specific credential.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

/// The verified client certificate of a connection, as the server hands it to the guard:
/// its SANs (URIs, DNS names, emails), in the certificate's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    sans: Arc<[String]>,
}

impl ClientCertificate {
    pub fn new(sans: Vec<String>) -> ClientCertificate {
        ClientCertificate { sans: sans.into() }
    }

    pub fn sans(&self) -> &[String] {
        &self.sans
    }
}

/// `[guard.mtls]`: certificate SANs to role names, e.g.
/// `roles = { "spiffe://example.org/ci" = "signer" }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MtlsConfig {
    pub roles: BTreeMap<String, String>,
}

impl MtlsConfig {
    /// The SAN of `certificate` that the table maps, and its role name.
    pub fn principal<'a>(&'a self, certificate: &'a ClientCertificate) -> Option<(&'a str, &'a str)> {
        certificate.sans().iter().find_map(|san| self.roles.get(san).map(|role| (san.as_str(), role.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_mapped_san_is_the_principal() {
        let config: MtlsConfig = serde_json::from_str(r#"{"roles": {"spiffe://x/ci": "signer", "ops@x": "admin"}}"#).unwrap();
        let cert = ClientCertificate::new(vec!["spiffe://x/other".into(), "ops@x".into(), "spiffe://x/ci".into()]);
        assert_eq!(config.principal(&cert), Some(("ops@x", "admin")));
        assert_eq!(config.principal(&ClientCertificate::new(vec!["spiffe://x/other".into()])), None);
        assert!(serde_json::from_str::<MtlsConfig>(r#"{"role": {}}"#).is_err(), "unknown keys are refused");
    }
}
