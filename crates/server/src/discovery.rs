//! OpenID Connect Discovery 1.0: an issuer's key set, found from its URL.
//!
//! `<issuer>/.well-known/openid-configuration` names the issuer and its `jwks_uri`; both
//! documents are fetched over HTTPS. Plain http is allowed only towards loopback hosts,
//! where tests and local issuers live.

use serde_json::Value;
use signet_ca::oidc::jwks::KeySet;
use signet_tls::Fetcher;

/// Where an issuer's keys are found.
pub struct Discovery {
    issuer: String,
    fetcher: Fetcher,
}

impl Discovery {
    pub fn new(issuer: &str, fetcher: Fetcher) -> Discovery {
        Discovery { issuer: issuer.to_string(), fetcher }
    }

    /// §4: a terminating `/` of the issuer is removed before the well-known path is appended.
    pub fn document_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer.trim_end_matches('/'))
    }

    /// Fetches the discovery document, checks it, then fetches the key set it points at.
    /// Errors name the issuer and the step that failed.
    pub fn key_set(&self) -> Result<KeySet, DiscoveryError> {
        let context = |step: Step| DiscoveryError { issuer: self.issuer.clone(), step };
        let document = self.fetcher.get_json(&self.document_url()).map_err(|e| context(Step::Fetch(e)))?;
        let jwks_uri = jwks_uri(&document, &self.issuer).map_err(context)?;
        let jwks = self.fetcher.get_json(&jwks_uri).map_err(|e| context(Step::Fetch(e)))?;
        KeySet::from_json(&jwks.to_string()).map_err(|source| context(Step::KeySet { uri: jwks_uri, source }))
    }
}

/// Why an issuer's keys were not found, and whose.
#[derive(Debug, thiserror::Error)]
#[error("OIDC discovery for {issuer}: {step}")]
pub struct DiscoveryError {
    pub issuer: String,
    #[source]
    pub step: Step,
}

/// The step of discovery that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Step {
    #[error(transparent)]
    Fetch(signet_tls::FetchError),
    #[error("the discovery document names issuer {named:?}; expected exactly {expected:?}")]
    OtherIssuer { named: String, expected: String },
    #[error("the discovery document has no issuer")]
    NoIssuer,
    #[error("the discovery document has no jwks_uri")]
    NoJwksUri,
    #[error("jwks_uri {uri:?}: {source}")]
    JwksUri { uri: String, source: crate::config::UrlError },
    #[error("{uri}: {source}")]
    KeySet { uri: String, source: signet_ca::oidc::jwks::JwksError },
}

/// The `jwks_uri` of a discovery document, once its `issuer` is checked: §4.3 requires it to
/// equal, exactly, the issuer URL the document was fetched for. Without that check, a
/// document could hand out the keys of another issuer.
pub fn jwks_uri(document: &Value, issuer: &str) -> Result<String, Step> {
    match document.get("issuer").and_then(Value::as_str) {
        Some(named) if named == issuer => {}
        Some(named) => return Err(Step::OtherIssuer { named: named.to_string(), expected: issuer.to_string() }),
        None => return Err(Step::NoIssuer),
    }
    let uri = document.get("jwks_uri").and_then(Value::as_str).ok_or(Step::NoJwksUri)?;
    crate::config::check_url(uri).map_err(|source| Step::JwksUri { uri: uri.to_string(), source })?;
    Ok(uri.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_document_must_name_the_issuer_exactly() {
        let issuer = "https://idp.example";
        let doc = |iss: &str| json!({"issuer": iss, "jwks_uri": "https://keys.idp.example/jwks"});
        assert_eq!(jwks_uri(&doc(issuer), issuer).unwrap(), "https://keys.idp.example/jwks");
        for other in ["https://idp.example/", "https://IDP.example", "https://evil.example"] {
            let err = jwks_uri(&doc(other), issuer).unwrap_err().to_string();
            assert!(err.contains("expected exactly"), "{other}: {err}");
        }
        assert!(jwks_uri(&json!({"jwks_uri": "https://k"}), issuer).unwrap_err().to_string().contains("no issuer"));
        assert!(jwks_uri(&json!({"issuer": issuer}), issuer).unwrap_err().to_string().contains("no jwks_uri"));
    }

    #[test]
    fn keys_come_over_https_or_from_loopback() {
        let issuer = "https://idp.example";
        let doc = |uri: &str| json!({"issuer": issuer, "jwks_uri": uri});
        assert!(jwks_uri(&doc("http://keys.idp.example/jwks"), issuer).unwrap_err().to_string().contains("plain http"));
        assert!(jwks_uri(&doc("ftp://keys.idp.example/jwks"), issuer).is_err());
        jwks_uri(&doc("http://127.0.0.1:8080/jwks"), issuer).unwrap();
        jwks_uri(&doc("http://localhost/jwks"), issuer).unwrap();
        jwks_uri(&doc("http://[::1]:9/jwks"), issuer).unwrap();
    }

    #[test]
    fn the_well_known_path_follows_the_issuer() {
        let fetcher = Fetcher::new(signet_tls::client_config(&signet_tls::Trust::Platform).unwrap());
        let d = Discovery::new("https://idp.example/tenant/", fetcher.clone());
        assert_eq!(d.document_url(), "https://idp.example/tenant/.well-known/openid-configuration");
        let d = Discovery::new("https://idp.example", fetcher);
        assert_eq!(d.document_url(), "https://idp.example/.well-known/openid-configuration");
    }
}
