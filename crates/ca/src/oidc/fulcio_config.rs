//! Fulcio's own issuer config, read as it is: the JSON that Fulcio's Helm chart and RHTAS
//! write (`OIDCIssuers`, `MetaIssuers`, `CIIssuerMetadata`) or the YAML of Fulcio's
//! `config/identity/config.yaml` (`oidc-issuers`, `meta-issuers`, `ci-issuer-metadata`,
//! with its anchors). A team moving from Fulcio points `[oidc] fulcio_config` at the file.
//!
//! Fields that only describe an issuer (`Description`, `Contact`, `Environment`) are
//! ignored, as Fulcio ignores them. Fields whose meaning signet does not implement are
//! refused by name rather than dropped, since dropping them would change which tokens are
//! accepted or what a certificate says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::IssuerError;
use super::spec::IssuerSpec;
use crate::ci::{CiConfigError, CiProvider};

/// One issuer from the file, with the CA certificate its HTTPS endpoints use, if given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FulcioIssuer {
    pub spec: IssuerSpec,
    pub ca_pem: Option<String>,
}

/// What a Fulcio config file configures.
#[derive(Debug, Clone, Default)]
pub struct FulcioConfig {
    /// Plain issuers, then meta-issuers (whose `url` holds a `*`), each in URL order.
    pub issuers: Vec<FulcioIssuer>,
    pub providers: BTreeMap<String, CiProvider>,
}

#[derive(Deserialize, Default)]
struct File {
    #[serde(rename = "OIDCIssuers", alias = "oidc-issuers", default)]
    oidc_issuers: BTreeMap<String, FileIssuer>,
    #[serde(rename = "MetaIssuers", alias = "meta-issuers", default)]
    meta_issuers: BTreeMap<String, FileIssuer>,
    #[serde(rename = "CIIssuerMetadata", alias = "ci-issuer-metadata", default)]
    ci_issuer_metadata: BTreeMap<String, FileMetadata>,
}

#[derive(Deserialize, Default)]
struct FileIssuer {
    #[serde(rename = "IssuerURL", alias = "issuer-url", default)]
    issuer_url: Option<String>,
    #[serde(rename = "ClientID", alias = "client-id", default)]
    client_id: Option<String>,
    #[serde(rename = "Type", alias = "type", default)]
    kind: String,
    #[serde(rename = "CIProvider", alias = "ci-provider", default)]
    ci_provider: Option<String>,
    #[serde(rename = "IssuerClaim", alias = "issuer-claim", default)]
    issuer_claim: Option<String>,
    #[serde(rename = "SubjectDomain", alias = "subject-domain", default)]
    subject_domain: Option<String>,
    #[serde(rename = "SPIFFETrustDomain", alias = "spiffe-trust-domain", default)]
    spiffe_trust_domain: Option<String>,
    #[serde(rename = "ChallengeClaim", alias = "challenge-claim", default)]
    challenge_claim: Option<String>,
    #[serde(rename = "SkipEmailVerification", alias = "skip-email-verification", default)]
    skip_email_verification: bool,
    #[serde(rename = "CACert", alias = "ca-cert", default)]
    ca_cert: Option<String>,
}

#[derive(Deserialize, Default)]
struct FileMetadata {
    #[serde(rename = "DefaultTemplateValues", alias = "default-template-values", default)]
    defaults: BTreeMap<String, String>,
    #[serde(rename = "ExtensionTemplates", alias = "extension-templates", default)]
    extensions: BTreeMap<String, String>,
    #[serde(rename = "SubjectAlternativeNameTemplate", alias = "subject-alternative-name-template", default)]
    san: String,
}

/// The largest config file read (Fulcio's public one is about 20 KB).
const MAX_BYTES: u64 = 4 << 20;

/// A Fulcio config file that cannot be used: which, and why.
#[derive(Debug, thiserror::Error)]
#[error("Fulcio config {}: {why}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    #[source]
    pub why: FulcioConfigError,
}

/// What is wrong with a Fulcio config.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FulcioConfigError {
    #[error("{0}")]
    Io(#[source] std::io::Error),
    #[error("{0} bytes; at most {MAX_BYTES} are read")]
    TooLarge(u64),
    #[error("not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("neither JSON nor YAML Fulcio reads: {0}")]
    Yaml(#[source] serde_norway::Error),
    #[error(transparent)]
    CiProvider(#[from] CiConfigError),
    /// An entry of `OIDCIssuers` (or of `MetaIssuers`, when `meta`), by its URL.
    #[error("{} {url}: {why}", if *meta { "meta-issuer" } else { "issuer" })]
    Issuer {
        meta: bool,
        url: String,
        #[source]
        why: IssuerError,
    },
}

/// Reads and checks the file at `path`. `Err` names the file and what is wrong.
pub fn read(path: &Path) -> Result<FulcioConfig, ReadError> {
    let fail = |why: FulcioConfigError| ReadError { path: path.to_path_buf(), why };
    let size = std::fs::metadata(path).map_err(|e| fail(FulcioConfigError::Io(e)))?.len();
    if size > MAX_BYTES {
        return Err(fail(FulcioConfigError::TooLarge(size)));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(FulcioConfigError::Io(e)))?;
    parse(&text).map_err(fail)
}

/// Parses a config's text, JSON or YAML (Fulcio tries JSON first; YAML reads both).
pub fn parse(text: &str) -> Result<FulcioConfig, FulcioConfigError> {
    let file: File = match serde_json::from_str(text) {
        Ok(file) => file,
        Err(json) if text.trim_start().starts_with('{') => return Err(FulcioConfigError::Json(json)),
        Err(_) => serde_norway::from_str(text).map_err(FulcioConfigError::Yaml)?,
    };
    let mut providers = BTreeMap::new();
    for (name, m) in &file.ci_issuer_metadata {
        let provider = CiProvider::new(name, m.defaults.iter().map(|(k, v)| (k.as_str(), v.as_str())), m.extensions.iter().map(|(k, v)| (k.as_str(), v.as_str())), &m.san)?;
        providers.insert(name.clone(), provider);
    }
    let mut issuers = Vec::new();
    for (meta, entries) in [(false, &file.oidc_issuers), (true, &file.meta_issuers)] {
        for (key, i) in entries {
            let url = if meta { key.clone() } else { i.issuer_url.clone().unwrap_or_else(|| key.clone()) };
            let at = |why: IssuerError| FulcioConfigError::Issuer { meta, url: url.clone(), why };
            if !meta && url != *key {
                return Err(at(IssuerError::UrlDiffers(key.clone())));
            }
            if meta != url.contains('*') {
                return Err(at(if meta { IssuerError::MetaNeedsStar } else { IssuerError::StarNotMeta }));
            }
            if let Some(claim) = &i.issuer_claim {
                return Err(at(IssuerError::IssuerClaim(claim.clone())));
            }
            let spec = IssuerSpec {
                url: url.clone(),
                audience: i.client_id.clone().filter(|c| !c.is_empty()).unwrap_or_else(|| "sigstore".into()),
                kind: i.kind.clone(),
                ci_provider: i.ci_provider.clone().filter(|c| !c.is_empty()),
                subject_domain: i.subject_domain.clone().filter(|s| !s.is_empty()),
                trust_domain: i.spiffe_trust_domain.clone().filter(|s| !s.is_empty()),
                skip_email_verification: i.skip_email_verification,
                ci_defaults: BTreeMap::new(),
            };
            let kind = spec.kind(&providers).map_err(at)?;
            if let Some(claim) = i.challenge_claim.as_deref().filter(|c| !c.is_empty() && *c != kind.challenge_claim()) {
                return Err(at(IssuerError::ChallengeClaim { claim: claim.to_string(), checked: kind.challenge_claim() }));
            }
            issuers.push(FulcioIssuer { spec, ca_pem: i.ca_cert.clone().filter(|c| !c.trim().is_empty()) });
        }
    }
    Ok(FulcioConfig { issuers, providers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oidc::IssuerKind;

    #[test]
    fn fulcios_yaml_with_anchors() {
        let yaml = r#"
define:
  - &gitlab-type "gitlab-pipeline"
oidc-issuers:
  https://gitlab.example.com:
    issuer-url: https://gitlab.example.com
    client-id: sigstore
    type: ci-provider
    ci-provider: *gitlab-type
    contact: ops@example.com
    description: "our GitLab"
  https://accounts.example.com:
    issuer-url: https://accounts.example.com
    client-id: sigstore
    type: username
    subject-domain: example.com
meta-issuers:
  https://oidc.eks.*.amazonaws.com/id/*:
    client-id: sigstore
    type: kubernetes
ci-issuer-metadata:
  *gitlab-type:
    default-template-values:
      url: "https://gitlab.example.com"
    extension-templates:
      source-repository-uri: "{{ .url }}/{{ .project_path }}"
      build-trigger: "pipeline_source"
    subject-alternative-name-template: "https://{{ .ci_config_ref_uri }}"
"#;
        let config = parse(yaml).unwrap();
        let urls: Vec<&str> = config.issuers.iter().map(|i| i.spec.url.as_str()).collect();
        assert_eq!(urls, ["https://accounts.example.com", "https://gitlab.example.com", "https://oidc.eks.*.amazonaws.com/id/*"]);
        let gitlab = &config.issuers[1].spec;
        let IssuerKind::Ci(provider) = gitlab.kind(&config.providers).unwrap() else { panic!("ci-provider") };
        let claims = serde_json::json!({"project_path": "g/p", "pipeline_source": "push", "ci_config_ref_uri": "gitlab.example.com/g/p//.gitlab-ci.yml@refs/heads/main"});
        let r = provider.render(claims.as_object().unwrap()).unwrap();
        assert_eq!(r.extensions.len(), 2, "the file's own templates, not the built-in ones");
        assert!(matches!(config.issuers[0].spec.kind(&config.providers), Ok(IssuerKind::Username { .. })));
        assert!(matches!(config.issuers[2].spec.kind(&config.providers), Ok(IssuerKind::Kubernetes)));
    }

    #[test]
    fn the_helm_charts_json() {
        let json = r#"{
          "OIDCIssuers": {
            "https://keycloak.example.com/auth/realms/sigstore": {
              "IssuerURL": "https://keycloak.example.com/auth/realms/sigstore", "ClientID": "trusted-artifact-signer", "Type": "email"
            },
            "https://spire.example.org": {"IssuerURL": "https://spire.example.org", "ClientID": "sigstore", "Type": "spiffe", "SPIFFETrustDomain": "example.org"}
          },
          "MetaIssuers": {"https://token.actions.githubusercontent.com/*": {"ClientID": "sigstore", "Type": "ci-provider", "CIProvider": "github-workflow"}}
        }"#;
        let config = parse(json).unwrap();
        assert_eq!(config.issuers.len(), 3);
        assert_eq!(config.issuers[0].spec.audience, "trusted-artifact-signer");
        assert!(matches!(config.issuers[2].spec.kind(&config.providers), Ok(IssuerKind::Ci(p)) if p.name == "github-workflow"));
    }

    #[test]
    fn what_signet_does_not_implement_is_refused_by_name() {
        for (text, why) in [
            (r#"{"OIDCIssuers": {"https://dex.example.com": {"IssuerURL": "https://dex.example.com", "Type": "email", "IssuerClaim": "$.federated_claims.connector_id"}}}"#, "IssuerClaim"),
            (r#"{"OIDCIssuers": {"https://a.example.com": {"IssuerURL": "https://a.example.com", "Type": "email", "ChallengeClaim": "sub"}}}"#, "ChallengeClaim"),
            (r#"{"OIDCIssuers": {"https://a.example.com": {"IssuerURL": "https://b.example.com", "Type": "email"}}}"#, "differs"),
            (r#"{"OIDCIssuers": {"https://a.example.com": {"Type": "uri"}}}"#, "subject_domain"),
            (r#"{"MetaIssuers": {"https://a.example.com": {"Type": "email"}}}"#, "needs a `*`"),
            (r#"{"OIDCIssuers": {"https://a.example.com": {"Type": "jenkins"}}}"#, "not an issuer type"),
            (r#"{"OIDCIssuers": "#, "not valid JSON"),
            ("oidc-issuers: [1, 2", "neither JSON nor YAML"),
        ] {
            let err = parse(text).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
        let same_claim = r#"{"OIDCIssuers": {"https://a.example.com": {"Type": "email", "ChallengeClaim": "email"}}}"#;
        assert!(parse(same_claim).is_ok(), "the type's own challenge claim, spelled out, is fine");
    }
}
