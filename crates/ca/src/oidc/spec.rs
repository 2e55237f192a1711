//! Issuers as configured: the plain settings of one issuer, from signet's TOML or from a
//! Fulcio config file ([`super::fulcio_config`]), and the [`IssuerKind`] they make.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::error::IssuerError;
use super::kind::IssuerKind;
use crate::ci::{providers, CiProvider};

/// One issuer's settings. `url` may be a meta-issuer pattern (it has a `*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssuerSpec {
    pub url: String,
    pub audience: String,
    /// Fulcio's issuer type: `email`, `uri`, `spiffe`, `username`, `kubernetes`,
    /// `chainguard-identity`, `ci-provider`, or a CI provider's name as a type of its own
    /// (`github-workflow`, `gitlab-pipeline`, …, as older Fulcio configs write them).
    pub kind: String,
    pub ci_provider: Option<String>,
    pub subject_domain: Option<String>,
    pub trust_domain: Option<String>,
    pub skip_email_verification: bool,
    /// Overrides of the CI provider's template defaults for this issuer only.
    pub ci_defaults: BTreeMap<String, String>,
}

/// The issuer types [`IssuerSpec::kind`] knows, for error messages.
pub const TYPES: &str = "email, uri, spiffe, username, kubernetes, chainguard-identity, ci-provider, or a CI provider's name \
                         (github-workflow, gitlab-pipeline, buildkite-job, circleci-job, codefresh-workflow, buddy-pipeline)";

impl IssuerSpec {
    /// The issuer's kind. `providers` are CI providers the config defines (they override
    /// the built-in ones of the same name). `Err` says what is wrong and what to write.
    pub fn kind(&self, providers: &BTreeMap<String, CiProvider>) -> Result<IssuerKind, IssuerError> {
        let needs = |what: Option<&String>, key: &'static str, example: &'static str| {
            what.filter(|s| !s.is_empty()).cloned().ok_or_else(|| IssuerError::Needs { kind: self.kind.clone(), key, example })
        };
        let kind = match self.kind.as_str() {
            "email" => IssuerKind::Email { skip_email_verification: self.skip_email_verification },
            "uri" => IssuerKind::Uri { subject_domain: needs(self.subject_domain.as_ref(), "subject_domain", "\"https://ci.example.com\"")? },
            "spiffe" => IssuerKind::Spiffe { trust_domain: needs(self.trust_domain.as_ref(), "trust_domain", "\"example.org\"")? },
            "username" => IssuerKind::Username { subject_domain: needs(self.subject_domain.as_ref(), "subject_domain", "\"example.com\"")? },
            "kubernetes" => IssuerKind::Kubernetes,
            "chainguard-identity" => IssuerKind::Chainguard,
            "ci-provider" => {
                let name = self.ci_provider.as_deref().ok_or(IssuerError::NoCiProvider)?;
                IssuerKind::Ci(Arc::new(self.provider(name, providers)?))
            }
            name if providers.contains_key(name) || providers::NAMES.contains(&name) => IssuerKind::Ci(Arc::new(self.provider(name, providers)?)),
            other => return Err(IssuerError::UnknownType(other.to_string())),
        };
        if self.skip_email_verification && !matches!(kind, IssuerKind::Email { .. }) {
            return Err(IssuerError::SkipEmailVerification);
        }
        if self.ci_provider.is_some() && !matches!(kind, IssuerKind::Ci(_)) {
            return Err(IssuerError::CiProviderOnly(self.kind.clone()));
        }
        if !self.ci_defaults.is_empty() && !matches!(kind, IssuerKind::Ci(_)) {
            return Err(IssuerError::CiDefaultsOnly(self.kind.clone()));
        }
        if !self.url.contains('*') {
            kind.check(&self.url)?;
        }
        Ok(kind)
    }

    fn provider(&self, name: &str, defined: &BTreeMap<String, CiProvider>) -> Result<CiProvider, IssuerError> {
        let mut provider = match defined.get(name) {
            Some(p) => p.clone(),
            None => {
                let builtin = providers::builtin(name).ok_or_else(|| IssuerError::UnknownCiProvider(name.to_string()))?;
                // The built-in templates' base URL is the public service's; a self-hosted
                // GitHub or GitLab is the issuer's own host. Fulcio needs a provider of its
                // own for each; here the issuer's URL says it.
                let builtin = builtin?;
                match name {
                    "github-workflow" if !self.url.contains('*') => builtin.with_default("url", &providers::github_base_url(&self.url)),
                    "gitlab-pipeline" if !self.url.contains('*') => builtin.with_default("url", self.url.trim_end_matches('/')),
                    _ => builtin,
                }
            }
        };
        for (key, value) in &self.ci_defaults {
            provider = provider.with_default(key, value);
        }
        Ok(provider)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str) -> IssuerSpec {
        IssuerSpec { url: "https://issuer.example.com".into(), audience: "sigstore".into(), kind: kind.into(), ..Default::default() }
    }

    #[test]
    fn each_type_and_what_it_needs() {
        let none = BTreeMap::new();
        assert!(matches!(spec("email").kind(&none), Ok(IssuerKind::Email { skip_email_verification: false })));
        assert!(spec("uri").kind(&none).unwrap_err().to_string().contains("subject_domain"));
        assert!(spec("spiffe").kind(&none).unwrap_err().to_string().contains("trust_domain"));
        assert!(spec("username").kind(&none).unwrap_err().to_string().contains("subject_domain"));
        assert!(spec("ci-provider").kind(&none).unwrap_err().to_string().contains("ci_provider"));
        assert!(spec("jenkins").kind(&none).unwrap_err().to_string().contains("not an issuer type"));
        let uri = IssuerSpec { subject_domain: Some("https://ci.example.com".into()), ..spec("uri") };
        assert!(matches!(uri.kind(&none), Ok(IssuerKind::Uri { .. })));
        let foreign = IssuerSpec { subject_domain: Some("https://ci.example.org".into()), ..spec("uri") };
        assert!(foreign.kind(&none).unwrap_err().to_string().contains("second-level"));
        let ci = IssuerSpec { ci_provider: Some("circleci-job".into()), ..spec("ci-provider") };
        assert!(matches!(ci.kind(&none), Ok(IssuerKind::Ci(p)) if p.name == "circleci-job"));
        assert!(matches!(spec("gitlab-pipeline").kind(&none), Ok(IssuerKind::Ci(p)) if p.name == "gitlab-pipeline"));
        let skip = IssuerSpec { skip_email_verification: true, ..spec("kubernetes") };
        assert!(skip.kind(&none).unwrap_err().to_string().contains("only to email"));
        let stray = IssuerSpec { ci_provider: Some("gitlab-pipeline".into()), ..spec("email") };
        assert!(stray.kind(&none).unwrap_err().to_string().contains("only to ci-provider"));
    }

    #[test]
    fn self_hosted_github_and_gitlab_use_their_own_host() {
        let none = BTreeMap::new();
        let claims = serde_json::json!({"ci_config_ref_uri": "gitlab.example.com/g/p//.gitlab-ci.yml@refs/heads/main", "ci_config_sha": "a",
            "runner_environment": "self-hosted", "project_path": "g/p", "sha": "b", "ref_type": "branch", "ref": "main", "project_id": "1",
            "namespace_path": "g", "namespace_id": "2", "pipeline_source": "push", "job_id": "3", "project_visibility": "private"});
        let gitlab = IssuerSpec { url: "https://gitlab.example.com".into(), ..spec("gitlab-pipeline") };
        let IssuerKind::Ci(p) = gitlab.kind(&none).unwrap() else { panic!("a CI kind") };
        let r = p.render(claims.as_object().unwrap()).unwrap();
        let repo = r.extensions.iter().find(|e| e.oid.to_string() == "1.3.6.1.4.1.57264.1.12").unwrap();
        assert_eq!(repo.value, "https://gitlab.example.com/g/p");
        let overridden = IssuerSpec { ci_defaults: [("url".to_string(), "https://git.example.com".to_string())].into(), ..gitlab };
        let IssuerKind::Ci(p) = overridden.kind(&none).unwrap() else { panic!("a CI kind") };
        let r = p.render(claims.as_object().unwrap()).unwrap();
        assert!(r.extensions.iter().any(|e| e.value == "https://git.example.com/g/p"));
    }
}
