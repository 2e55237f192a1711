//! Fulcio's CI extensions (OIDs 1.3.6.1.4.1.57264.1.2–.6 and .9–.23): what a CI token says
//! about the build, copied into the certificate so that a verifier can hold a signature to a
//! repository, ref, workflow and run, not only to an identity.
//!
//! Each CI provider is a [`CiProvider`]: templates over the token's claims, one per
//! certificate field and one for the SAN, with defaults for values a token may lack. That is
//! Fulcio's `ci-provider` issuer type, read from the same template text, so that a Fulcio
//! config can be brought unchanged; [`providers`] holds the six that Fulcio ships.
//!
//! - [`template`]: the subset of Go's `text/template` those templates use.
//! - [`providers`]: GitHub Actions, GitLab CI, Buildkite, CircleCI, Codefresh and Buddy.

pub mod providers;
pub mod template;

use std::collections::BTreeMap;

use der::asn1::ObjectIdentifier;
use serde_json::{Map, Value};

pub use template::{MissingValue, Template};

const fn oid(arc: &str) -> ObjectIdentifier {
    ObjectIdentifier::new_unwrap(arc)
}

/// How an extension's value is encoded: the deprecated .1.2–.6 hold raw UTF-8 bytes, the
/// newer ones a DER UTF8String.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Raw,
    Utf8String,
}

/// One CI extension to add to a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiExtension {
    pub oid: ObjectIdentifier,
    pub encoding: Encoding,
    pub value: String,
}

/// A certificate field that a provider's templates can fill, by both of the names Fulcio's
/// config formats use for it (YAML and JSON).
#[derive(Debug, PartialEq, Eq)]
pub struct Field {
    pub yaml: &'static str,
    pub json: &'static str,
    pub oid: ObjectIdentifier,
    pub encoding: Encoding,
}

const fn field(yaml: &'static str, json: &'static str, arc: &str, encoding: Encoding) -> Field {
    Field { yaml, json, oid: oid(arc), encoding }
}

/// Every field, in OID order (the order a certificate carries them in).
pub static FIELDS: [Field; 20] = [
    field("github-workflow-trigger", "GithubWorkflowTrigger", "1.3.6.1.4.1.57264.1.2", Encoding::Raw),
    field("github-workflow-sha", "GithubWorkflowSHA", "1.3.6.1.4.1.57264.1.3", Encoding::Raw),
    field("github-workflow-name", "GithubWorkflowName", "1.3.6.1.4.1.57264.1.4", Encoding::Raw),
    field("github-workflow-repository", "GithubWorkflowRepository", "1.3.6.1.4.1.57264.1.5", Encoding::Raw),
    field("github-workflow-ref", "GithubWorkflowRef", "1.3.6.1.4.1.57264.1.6", Encoding::Raw),
    field("build-signer-uri", "BuildSignerURI", "1.3.6.1.4.1.57264.1.9", Encoding::Utf8String),
    field("build-signer-digest", "BuildSignerDigest", "1.3.6.1.4.1.57264.1.10", Encoding::Utf8String),
    field("runner-environment", "RunnerEnvironment", "1.3.6.1.4.1.57264.1.11", Encoding::Utf8String),
    field("source-repository-uri", "SourceRepositoryURI", "1.3.6.1.4.1.57264.1.12", Encoding::Utf8String),
    field("source-repository-digest", "SourceRepositoryDigest", "1.3.6.1.4.1.57264.1.13", Encoding::Utf8String),
    field("source-repository-ref", "SourceRepositoryRef", "1.3.6.1.4.1.57264.1.14", Encoding::Utf8String),
    field("source-repository-identifier", "SourceRepositoryIdentifier", "1.3.6.1.4.1.57264.1.15", Encoding::Utf8String),
    field("source-repository-owner-uri", "SourceRepositoryOwnerURI", "1.3.6.1.4.1.57264.1.16", Encoding::Utf8String),
    field("source-repository-owner-identifier", "SourceRepositoryOwnerIdentifier", "1.3.6.1.4.1.57264.1.17", Encoding::Utf8String),
    field("build-config-uri", "BuildConfigURI", "1.3.6.1.4.1.57264.1.18", Encoding::Utf8String),
    field("build-config-digest", "BuildConfigDigest", "1.3.6.1.4.1.57264.1.19", Encoding::Utf8String),
    field("build-trigger", "BuildTrigger", "1.3.6.1.4.1.57264.1.20", Encoding::Utf8String),
    field("run-invocation-uri", "RunInvocationURI", "1.3.6.1.4.1.57264.1.21", Encoding::Utf8String),
    field("source-repository-visibility-at-signing", "SourceRepositoryVisibilityAtSigning", "1.3.6.1.4.1.57264.1.22", Encoding::Utf8String),
    field("deployment-environment", "DeploymentEnvironment", "1.3.6.1.4.1.57264.1.23", Encoding::Utf8String),
];

/// The extension that carries the token's raw `sub` claim, in every certificate.
pub const OID_TOKEN_SUBJECT: ObjectIdentifier = oid("1.3.6.1.4.1.57264.1.24");

/// The field named `name` in either of Fulcio's spellings.
pub fn field_named(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.yaml == name || f.json == name)
}

/// Why a provider's templates cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CiConfigError {
    #[error("ci provider {provider:?}: {name:?} is not a certificate field Fulcio defines (for example build-signer-uri or BuildSignerURI)")]
    UnknownField { provider: String, name: String },
    #[error("ci provider {provider:?}: {error}")]
    Template { provider: String, error: template::ParseError },
    #[error("ci provider {0:?}: the subject-alternative-name template is empty")]
    NoSan(String),
}

/// A CI provider: how its tokens' claims become a SAN and certificate fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiProvider {
    pub name: String,
    defaults: BTreeMap<String, String>,
    /// In OID order.
    fields: Vec<(&'static Field, Template)>,
    san: Template,
}

/// What a token's claims give a certificate under a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub san: String,
    pub extensions: Vec<CiExtension>,
}

impl CiProvider {
    /// A provider from Fulcio's `ci-issuer-metadata` parts. A template without `{{` is a
    /// claim's name (Fulcio's shorthand), not literal text.
    pub fn new<'a>(
        name: &str,
        defaults: impl IntoIterator<Item = (&'a str, &'a str)>,
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
        san: &str,
    ) -> Result<CiProvider, CiConfigError> {
        let parse = |text: &str| {
            let text = if text.contains("{{") { text.to_string() } else { format!("{{{{ index . {:?} }}}}", text.trim()) };
            Template::parse(&text).map_err(|error| CiConfigError::Template { provider: name.to_string(), error })
        };
        if san.trim().is_empty() {
            return Err(CiConfigError::NoSan(name.to_string()));
        }
        let mut parsed = Vec::new();
        for (field_name, text) in fields {
            let field = field_named(field_name)
                .ok_or_else(|| CiConfigError::UnknownField { provider: name.to_string(), name: field_name.to_string() })?;
            if !text.trim().is_empty() {
                parsed.push((field, parse(text)?));
            }
        }
        parsed.sort_by_key(|(f, _)| FIELDS.iter().position(|g| std::ptr::eq(g, *f)));
        Ok(CiProvider {
            name: name.to_string(),
            defaults: defaults.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            fields: parsed,
            san: parse(san)?,
        })
    }

    /// The same provider with one default replaced (GitHub Enterprise's base URL).
    pub fn with_default(mut self, key: &str, value: &str) -> CiProvider {
        self.defaults.insert(key.to_string(), value.to_string());
        self
    }

    /// The SAN and the extensions for a token's claims. Claims take precedence over the
    /// defaults, as in Fulcio; a field that renders empty is left out.
    pub fn render(&self, claims: &Map<String, Value>) -> Result<Rendered, MissingValue> {
        let mut values = self.defaults.clone();
        values.extend(claims.iter().filter_map(|(k, v)| claim_text(v).map(|t| (k.clone(), t))));
        let san = self.san.render(&values)?;
        let mut extensions = Vec::with_capacity(self.fields.len());
        for (field, template) in &self.fields {
            let value = template.render(&values)?;
            if !value.is_empty() {
                extensions.push(CiExtension { oid: field.oid, encoding: field.encoding, value });
            }
        }
        Ok(Rendered { san, extensions })
    }
}

/// A claim as text, as Fulcio prints it: strings as they are, booleans as `true`/`false`,
/// numbers without a fractional part as integers. Objects, arrays and null are not values a
/// template can use; they count as absent.
pub fn claim_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
            _ => n.to_string(),
        }),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(provider: &str, claims: Value) -> Result<Rendered, MissingValue> {
        providers::builtin(provider).unwrap().unwrap().render(claims.as_object().unwrap())
    }

    fn get<'a>(r: &'a Rendered, arc: &str) -> Option<(Encoding, &'a str)> {
        r.extensions.iter().find(|e| e.oid == oid(arc)).map(|e| (e.encoding, e.value.as_str()))
    }

    #[test]
    fn maps_github_actions_claims_like_fulcio() {
        let claims = json!({
            "job_workflow_ref": "octo/app/.github/workflows/release.yml@refs/tags/v1",
            "job_workflow_sha": "aaa", "repository": "octo/app", "repository_id": 42, "repository_owner": "octo",
            "repository_owner_id": "7", "sha": "bbb", "ref": "refs/tags/v1", "event_name": "push",
            "workflow": "release", "workflow_ref": "octo/app/.github/workflows/release.yml@refs/tags/v1", "workflow_sha": "ccc",
            "run_id": "99", "run_attempt": "2", "runner_environment": "github-hosted", "repository_visibility": "public",
        });
        let r = render("github-workflow", claims.clone()).unwrap();
        assert_eq!(r.san, "https://github.com/octo/app/.github/workflows/release.yml@refs/tags/v1");
        assert_eq!(r.extensions.len(), 19, "no environment claim: 1.23 is left out");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.5"), Some((Encoding::Raw, "octo/app")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.12"), Some((Encoding::Utf8String, "https://github.com/octo/app")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.15"), Some((Encoding::Utf8String, "42")), "numeric claims become decimal text");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.21"), Some((Encoding::Utf8String, "https://github.com/octo/app/actions/runs/99/attempts/2")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.23"), None);
        let oids: Vec<_> = r.extensions.iter().map(|e| e.oid).collect();
        let mut sorted = oids.clone();
        sorted.sort_by_key(|o| o.arcs().collect::<Vec<_>>());
        assert_eq!(oids, sorted, "in OID order");

        let mut with_env = claims;
        with_env["environment"] = json!("production");
        let r = render("github-workflow", with_env).unwrap();
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.23"), Some((Encoding::Utf8String, "production")));
    }

    #[test]
    fn github_enterprise_takes_its_base_url_from_the_issuer() {
        let provider = providers::builtin("github-workflow").unwrap().unwrap().with_default("url", &providers::github_base_url("https://ghes.example.com/_services/token"));
        let claims = json!({"job_workflow_ref": "o/r/.github/workflows/w.yml@refs/heads/main", "repository": "o/r"});
        let r = provider.render(claims.as_object().unwrap());
        assert!(r.is_err(), "Fulcio's GitHub templates need every claim a GitHub token has");
        let full = json!({
            "job_workflow_ref": "o/r/.github/workflows/w.yml@refs/heads/main", "job_workflow_sha": "a", "repository": "o/r",
            "repository_id": "1", "repository_owner": "o", "repository_owner_id": "2", "sha": "b", "ref": "refs/heads/main",
            "event_name": "push", "workflow": "w", "workflow_ref": "o/r/.github/workflows/w.yml@refs/heads/main", "workflow_sha": "c",
            "run_id": "3", "run_attempt": "1", "runner_environment": "self-hosted", "repository_visibility": "internal",
        });
        let r = provider.render(full.as_object().unwrap()).unwrap();
        assert_eq!(r.san, "https://ghes.example.com/o/r/.github/workflows/w.yml@refs/heads/main");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.16"), Some((Encoding::Utf8String, "https://ghes.example.com/o")));
    }

    #[test]
    fn gitlab_claims_as_fulcio_maps_them() {
        // Claims as GitLab documents its ID tokens (docs.gitlab.com, "ID token authentication").
        let claims = json!({
            "namespace_id": "72", "namespace_path": "my-group", "project_id": "20", "project_path": "my-group/my-project",
            "user_id": "1", "user_login": "sample-user", "user_email": "sample-user@example.com", "pipeline_id": "574",
            "pipeline_source": "push", "job_id": "302", "ref": "feature-branch-1", "ref_type": "branch", "ref_path": "refs/heads/feature-branch-1",
            "ref_protected": "false", "environment": "test-environment2", "environment_protected": "false", "deployment_tier": "testing",
            "runner_id": 1, "runner_environment": "self-hosted", "sha": "714a629c0b401fdce83e847fc9589983fc6f46bc",
            "project_visibility": "public", "ci_config_ref_uri": "gitlab.example.com/my-group/my-project//.gitlab-ci.yml@refs/heads/main",
            "ci_config_sha": "714a629c0b401fdce83e847fc9589983fc6f46bc",
            "sub": "project_path:my-group/my-project:ref_type:branch:ref:feature-branch-1",
        });
        let r = render("gitlab-pipeline", claims.clone()).unwrap();
        assert_eq!(r.san, "https://gitlab.example.com/my-group/my-project//.gitlab-ci.yml@refs/heads/main");
        let want = [
            ("1.3.6.1.4.1.57264.1.9", "https://gitlab.example.com/my-group/my-project//.gitlab-ci.yml@refs/heads/main"),
            ("1.3.6.1.4.1.57264.1.10", "714a629c0b401fdce83e847fc9589983fc6f46bc"),
            ("1.3.6.1.4.1.57264.1.11", "self-hosted"),
            ("1.3.6.1.4.1.57264.1.12", "https://gitlab.com/my-group/my-project"),
            ("1.3.6.1.4.1.57264.1.13", "714a629c0b401fdce83e847fc9589983fc6f46bc"),
            ("1.3.6.1.4.1.57264.1.14", "refs/heads/feature-branch-1"),
            ("1.3.6.1.4.1.57264.1.15", "20"),
            ("1.3.6.1.4.1.57264.1.16", "https://gitlab.com/my-group"),
            ("1.3.6.1.4.1.57264.1.17", "72"),
            ("1.3.6.1.4.1.57264.1.18", "https://gitlab.example.com/my-group/my-project//.gitlab-ci.yml@refs/heads/main"),
            ("1.3.6.1.4.1.57264.1.19", "714a629c0b401fdce83e847fc9589983fc6f46bc"),
            ("1.3.6.1.4.1.57264.1.20", "push"),
            ("1.3.6.1.4.1.57264.1.21", "https://gitlab.com/my-group/my-project/-/jobs/302"),
            ("1.3.6.1.4.1.57264.1.22", "public"),
            ("1.3.6.1.4.1.57264.1.23", "test-environment2"),
        ];
        let got: Vec<(String, &str)> = r.extensions.iter().map(|e| (e.oid.to_string(), e.value.as_str())).collect();
        let want: Vec<(String, &str)> = want.iter().map(|(o, v)| (o.to_string(), *v)).collect();
        assert_eq!(got, want);
        let mut tag = claims;
        tag["ref_type"] = json!("tag");
        tag["ref"] = json!("v1.0");
        assert_eq!(get(&render("gitlab-pipeline", tag).unwrap(), "1.3.6.1.4.1.57264.1.14"), Some((Encoding::Utf8String, "refs/tags/v1.0")));
    }

    #[test]
    fn buildkite_circleci_codefresh_and_buddy() {
        let r = render("buildkite-job", json!({
            "organization_slug": "acme", "pipeline_slug": "release", "build_number": 1234, "job_id": "0184990a-477b-4fa8-9968-496074483cee",
            "build_commit": "c0ffee", "build_source": "webhook", "runner_environment": "buildkite-hosted",
        })).unwrap();
        assert_eq!(r.san, "https://buildkite.com/acme/release");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.21"), Some((Encoding::Utf8String, "https://buildkite.com/acme/release/builds/1234#0184990a-477b-4fa8-9968-496074483cee")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.13"), Some((Encoding::Utf8String, "c0ffee")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.20"), Some((Encoding::Utf8String, "webhook")));

        let circle = json!({
            "oidc.circleci.com/project-id": "p-1", "oidc.circleci.com/pipeline-definition-id": "d-2", "oidc.circleci.com/pipeline-id": "pl-3",
            "oidc.circleci.com/workflow-id": "w-4", "oidc.circleci.com/job-id": "j-5", "oidc.circleci.com/ssh-rerun": false,
            "oidc.circleci.com/vcs-ref": "refs/heads/main", "oidc.circleci.com/vcs-origin": "github.com/acme/app",
        });
        let r = render("circleci-job", circle).unwrap();
        assert_eq!(r.san, "https://circleci.com/api/v2/projects/p-1/pipeline-definitions/d-2");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.18"), Some((Encoding::Utf8String, "https://circleci.com/api/v2/pipeline/pl-3/config")));
        // Fulcio's default platform URL ends in a slash, and its template adds another.
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.21"), Some((Encoding::Utf8String, "https://app.circleci.com//workflow/w-4/job/j-5")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.11"), Some((Encoding::Utf8String, "\"\"")), "Fulcio's template writes two quote marks");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.12"), Some((Encoding::Utf8String, "github.com/acme/app")));

        let r = render("codefresh-workflow", json!({
            "account_id": "628a80b693a15c0f9c13ab75", "account_name": "acme", "pipeline_id": "65e5a53e52853dc51a5b0cc1",
            "pipeline_name": "oidc-test/get-token", "workflow_id": "65e6d5551e2d7cd1ff8ac9e8",
        })).unwrap();
        assert_eq!(r.san, "https://g.codefresh.io/acme/oidc-test/get-token:628a80b693a15c0f9c13ab75/65e5a53e52853dc51a5b0cc1");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.9"), Some((Encoding::Utf8String, "https://g.codefresh.io/build/65e6d5551e2d7cd1ff8ac9e8")));
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.12"), None, "an empty default leaves the field out");

        let r = render("buddy-pipeline", json!({
            "workspace_domain": "acme", "project_name": "app", "pipeline_id": 7, "execution_id": 99, "triggered_on": "PUSH",
            "runner_environment": "platform-hosted", "revision": "abc", "ref": "refs/heads/main",
        })).unwrap();
        assert_eq!(r.san, "https://app.buddy.works/acme/app/pipelines/pipeline/7");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.21"), Some((Encoding::Utf8String, "https://app.buddy.works/acme/app/pipelines/pipeline/7/execution/99")));
    }

    #[test]
    fn a_claim_a_template_needs_is_named_when_missing() {
        let err = render("buildkite-job", json!({"organization_slug": "acme"})).unwrap_err();
        assert_eq!(err, MissingValue("pipeline_slug".into()));
    }

    #[test]
    fn claims_print_as_fulcio_prints_them() {
        assert_eq!(claim_text(&json!(42)), Some("42".into()));
        assert_eq!(claim_text(&json!(42.0)), Some("42".into()));
        assert_eq!(claim_text(&json!(1.5)), Some("1.5".into()));
        assert_eq!(claim_text(&json!(true)), Some("true".into()));
        assert_eq!(claim_text(&json!(null)), None);
        assert_eq!(claim_text(&json!({"a": 1})), None);
    }

    #[test]
    fn provider_configs_are_checked() {
        let err = CiProvider::new("x", [], [("build-signer-url", "a")], "{{ .a }}").unwrap_err();
        assert!(err.to_string().contains("build-signer-url"), "{err}");
        assert!(matches!(CiProvider::new("x", [], [], " "), Err(CiConfigError::NoSan(_))));
        assert!(CiProvider::new("x", [], [("BuildSignerURI", "{{ .a ")], "{{ .a }}").is_err());
        let p = CiProvider::new("x", [("d", "D")], [("BuildSignerURI", "{{ .d }}/{{ .a }}"), ("build-trigger", "t")], "{{ .a }}").unwrap();
        let r = p.render(json!({"a": "A", "t": "T", "d": "claimed"}).as_object().unwrap()).unwrap();
        assert_eq!(r.san, "A");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.9"), Some((Encoding::Utf8String, "claimed/A")), "a claim wins over a default");
        assert_eq!(get(&r, "1.3.6.1.4.1.57264.1.20"), Some((Encoding::Utf8String, "T")), "a bare name is a claim");
    }
}
