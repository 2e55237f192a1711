//! The CI providers Fulcio ships templates for, under the names its config gives them
//! (`ci-provider: gitlab-pipeline`, …). Their claim mappings follow each provider's
//! published token format and Fulcio's `config/identity/config.yaml`, so that a
//! certificate from signet carries the same fields, byte for byte, as one from Fulcio for
//! the same token. A config may still define its own provider, or override one of these.

use super::{CiConfigError, CiProvider};

/// The provider names this module knows.
pub const NAMES: [&str; 6] =
    ["github-workflow", "gitlab-pipeline", "buildkite-job", "circleci-job", "codefresh-workflow", "buddy-pipeline"];

/// GitHub's public base URL. A GitHub Enterprise issuer gets its own ([`github_base_url`]).
pub const GITHUB: &str = "https://github.com";

/// Name–value pairs: template defaults, or certificate fields and their templates.
type Pairs = &'static [(&'static str, &'static str)];

/// The provider called `name`, or `None` if there is no built-in one.
pub fn builtin(name: &str) -> Option<Result<CiProvider, CiConfigError>> {
    let (defaults, fields, san): (Pairs, Pairs, &str) = match name {
        "github-workflow" => (
            &[("url", GITHUB), ("environment", "")],
            &[
                ("github-workflow-trigger", "event_name"),
                ("github-workflow-sha", "sha"),
                ("github-workflow-name", "workflow"),
                ("github-workflow-repository", "repository"),
                ("github-workflow-ref", "ref"),
                ("build-signer-uri", "{{ .url }}/{{ .job_workflow_ref }}"),
                ("build-signer-digest", "job_workflow_sha"),
                ("runner-environment", "runner_environment"),
                ("source-repository-uri", "{{ .url }}/{{ .repository }}"),
                ("source-repository-digest", "sha"),
                ("source-repository-ref", "ref"),
                ("source-repository-identifier", "repository_id"),
                ("source-repository-owner-uri", "{{ .url }}/{{ .repository_owner }}"),
                ("source-repository-owner-identifier", "repository_owner_id"),
                ("build-config-uri", "{{ .url }}/{{ .workflow_ref }}"),
                ("build-config-digest", "workflow_sha"),
                ("build-trigger", "event_name"),
                ("run-invocation-uri", "{{ .url }}/{{ .repository }}/actions/runs/{{ .run_id }}/attempts/{{ .run_attempt }}"),
                ("source-repository-visibility-at-signing", "repository_visibility"),
                ("deployment-environment", "environment"),
            ],
            "{{ .url }}/{{ .job_workflow_ref }}",
        ),
        "gitlab-pipeline" => (
            &[("url", "https://gitlab.com"), ("environment", "")],
            &[
                ("build-signer-uri", "https://{{ .ci_config_ref_uri }}"),
                ("build-signer-digest", "ci_config_sha"),
                ("runner-environment", "runner_environment"),
                ("source-repository-uri", "{{ .url }}/{{ .project_path }}"),
                ("source-repository-digest", "sha"),
                ("source-repository-ref", r#"refs/{{if eq .ref_type "branch"}}heads/{{ else }}tags/{{end}}{{ .ref }}"#),
                ("source-repository-identifier", "project_id"),
                ("source-repository-owner-uri", "{{ .url }}/{{ .namespace_path }}"),
                ("source-repository-owner-identifier", "namespace_id"),
                ("build-config-uri", "https://{{ .ci_config_ref_uri }}"),
                ("build-config-digest", "ci_config_sha"),
                ("build-trigger", "pipeline_source"),
                ("run-invocation-uri", "{{ .url }}/{{ .project_path }}/-/jobs/{{ .job_id }}"),
                ("source-repository-visibility-at-signing", "project_visibility"),
                ("deployment-environment", "environment"),
            ],
            "https://{{ .ci_config_ref_uri }}",
        ),
        "buildkite-job" => (
            &[("url", "https://buildkite.com")],
            &[
                ("run-invocation-uri", "{{.url}}/{{.organization_slug}}/{{.pipeline_slug}}/builds/{{.build_number}}#{{.job_id}}"),
                ("runner-environment", "runner_environment"),
                ("source-repository-digest", "build_commit"),
                ("build-trigger", "build_source"),
            ],
            "{{.url}}/{{.organization_slug}}/{{.pipeline_slug}}",
        ),
        "circleci-job" => (
            &[("api_url", "https://circleci.com/api/v2"), ("platform_url", "https://app.circleci.com/")],
            &[
                ("build-config-uri", r#"{{.api_url}}/pipeline/{{(index . "oidc.circleci.com/pipeline-id")}}/config"#),
                (
                    "build-signer-uri",
                    r#"{{.api_url}}/projects/{{(index . "oidc.circleci.com/project-id")}}/pipeline-definitions/{{(index . "oidc.circleci.com/pipeline-definition-id")}}"#,
                ),
                (
                    "run-invocation-uri",
                    r#"{{.platform_url}}/workflow/{{(index . "oidc.circleci.com/workflow-id")}}/job/{{(index . "oidc.circleci.com/job-id")}}"#,
                ),
                ("runner-environment", r#"{{if eq (index . "oidc.circleci.com/ssh-rerun") "true"}}ssh-rerun{{ else }}""{{end}}"#),
                ("source-repository-ref", r#"{{index . "oidc.circleci.com/vcs-ref"}}"#),
                ("source-repository-uri", r#"{{index . "oidc.circleci.com/vcs-origin"}}"#),
            ],
            r#"{{.api_url}}/projects/{{(index . "oidc.circleci.com/project-id")}}/pipeline-definitions/{{(index . "oidc.circleci.com/pipeline-definition-id")}}"#,
        ),
        "codefresh-workflow" => (
            &[("platform_url", "https://g.codefresh.io"), ("scm_repo_url", ""), ("scm_ref", ""), ("runner_environment", "")],
            &[
                ("build-signer-uri", "{{.platform_url}}/build/{{ .workflow_id }}"),
                ("runner-environment", "runner_environment"),
                ("source-repository-uri", "scm_repo_url"),
                ("source-repository-ref", "scm_ref"),
                ("build-config-uri", "{{.platform_url}}/api/pipelines/{{ .pipeline_id }}"),
                ("run-invocation-uri", "{{.platform_url}}/build/{{ .workflow_id }}"),
            ],
            "{{.platform_url}}/{{.account_name}}/{{.pipeline_name}}:{{.account_id}}/{{.pipeline_id}}",
        ),
        "buddy-pipeline" => (
            &[("base_url", "https://app.buddy.works"), ("revision", ""), ("ref", "")],
            &[
                ("build-signer-uri", "{{.base_url}}/{{.workspace_domain}}/{{.project_name}}/pipelines/pipeline/{{.pipeline_id}}"),
                ("build-trigger", "triggered_on"),
                ("runner-environment", "runner_environment"),
                ("source-repository-uri", "{{.base_url}}/{{.workspace_domain}}/{{.project_name}}"),
                ("source-repository-digest", "revision"),
                ("source-repository-ref", "ref"),
                ("source-repository-owner-uri", "{{.base_url}}/{{.workspace_domain}}"),
                (
                    "run-invocation-uri",
                    "{{.base_url}}/{{.workspace_domain}}/{{.project_name}}/pipelines/pipeline/{{.pipeline_id}}/execution/{{.execution_id}}",
                ),
            ],
            "{{.base_url}}/{{.workspace_domain}}/{{.project_name}}/pipelines/pipeline/{{.pipeline_id}}",
        ),
        _ => return None,
    };
    Some(CiProvider::new(name, defaults.iter().copied(), fields.iter().copied(), san))
}

/// The web base URL of the GitHub that issues tokens at `issuer`: github.com for GitHub's
/// own issuer, `https://NAME.ghe.com` for GitHub Enterprise Cloud with data residency
/// (`https://token.actions.NAME.ghe.com`), and the issuer's own host for GitHub Enterprise
/// Server (`https://HOST/_services/token`).
pub fn github_base_url(issuer: &str) -> String {
    let host = issuer
        .strip_prefix("https://")
        .or_else(|| issuer.strip_prefix("http://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(rest))
        .unwrap_or(issuer);
    if host == "token.actions.githubusercontent.com" {
        return GITHUB.to_string();
    }
    let scheme = if issuer.starts_with("http://") { "http" } else { "https" };
    format!("{scheme}://{}", host.strip_prefix("token.actions.").unwrap_or(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_provider_parses() {
        for name in NAMES {
            let provider = builtin(name).expect("listed").expect("parses");
            assert_eq!(provider.name, name);
        }
        assert!(builtin("jenkins").is_none());
    }

    #[test]
    fn github_enterprise_base_urls() {
        assert_eq!(github_base_url("https://token.actions.githubusercontent.com"), "https://github.com");
        assert_eq!(github_base_url("https://token.actions.githubusercontent.com/octo-enterprise"), "https://github.com");
        assert_eq!(github_base_url("https://token.actions.octo.ghe.com"), "https://octo.ghe.com");
        assert_eq!(github_base_url("https://ghes.example.com/_services/token"), "https://ghes.example.com");
    }
}
