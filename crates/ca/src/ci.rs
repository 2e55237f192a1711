//! Fulcio's CI extensions (OIDs 1.3.6.1.4.1.57264.1.2–.6 and .9–.22): what a CI token says
//! about the build, copied into the certificate so a verifier can hold a signature to a
//! repository, ref, workflow and run, not just to an identity.
//!
//! Only GitHub Actions tokens are mapped, as Fulcio maps them: the claim names and the
//! `https://github.com/...` URIs follow Fulcio's GitHub principal. Extensions are written only
//! for claims the token has; a token without them simply gets none.

use der::asn1::ObjectIdentifier;
use serde_json::{Map, Value};

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

/// GitHub's server for the URIs below. GitHub Enterprise Server tokens would need another.
pub const GITHUB: &str = "https://github.com";

/// The certificate SAN of a GitHub Actions token: the URI of the workflow that ran.
pub fn github_subject(claims: &Map<String, Value>) -> Option<String> {
    claims.get("job_workflow_ref").and_then(Value::as_str).map(|r| format!("{GITHUB}/{r}"))
}

/// Every extension the token's claims support, in OID order.
pub fn github_extensions(claims: &Map<String, Value>) -> Vec<CiExtension> {
    let claim = |name: &str| claims.get(name).and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    let url = |path: Option<String>| path.map(|p| format!("{GITHUB}/{p}"));
    let run = match (claim("repository"), claim("run_id"), claim("run_attempt")) {
        (Some(repo), Some(id), Some(attempt)) => Some(format!("{GITHUB}/{repo}/actions/runs/{id}/attempts/{attempt}")),
        _ => None,
    };
    let table: [(&str, Encoding, Option<String>); 19] = [
        ("1.3.6.1.4.1.57264.1.2", Encoding::Raw, claim("event_name")),
        ("1.3.6.1.4.1.57264.1.3", Encoding::Raw, claim("sha")),
        ("1.3.6.1.4.1.57264.1.4", Encoding::Raw, claim("workflow")),
        ("1.3.6.1.4.1.57264.1.5", Encoding::Raw, claim("repository")),
        ("1.3.6.1.4.1.57264.1.6", Encoding::Raw, claim("ref")),
        ("1.3.6.1.4.1.57264.1.9", Encoding::Utf8String, url(claim("job_workflow_ref"))),
        ("1.3.6.1.4.1.57264.1.10", Encoding::Utf8String, claim("job_workflow_sha")),
        ("1.3.6.1.4.1.57264.1.11", Encoding::Utf8String, claim("runner_environment")),
        ("1.3.6.1.4.1.57264.1.12", Encoding::Utf8String, url(claim("repository"))),
        ("1.3.6.1.4.1.57264.1.13", Encoding::Utf8String, claim("sha")),
        ("1.3.6.1.4.1.57264.1.14", Encoding::Utf8String, claim("ref")),
        ("1.3.6.1.4.1.57264.1.15", Encoding::Utf8String, claim("repository_id")),
        ("1.3.6.1.4.1.57264.1.16", Encoding::Utf8String, url(claim("repository_owner"))),
        ("1.3.6.1.4.1.57264.1.17", Encoding::Utf8String, claim("repository_owner_id")),
        ("1.3.6.1.4.1.57264.1.18", Encoding::Utf8String, url(claim("workflow_ref"))),
        ("1.3.6.1.4.1.57264.1.19", Encoding::Utf8String, claim("workflow_sha")),
        ("1.3.6.1.4.1.57264.1.20", Encoding::Utf8String, claim("event_name")),
        ("1.3.6.1.4.1.57264.1.21", Encoding::Utf8String, run),
        ("1.3.6.1.4.1.57264.1.22", Encoding::Utf8String, claim("repository_visibility")),
    ];
    table
        .into_iter()
        .filter_map(|(arc, encoding, value)| value.map(|value| CiExtension { oid: oid(arc), encoding, value }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_github_actions_claims_like_fulcio() {
        let claims = json!({
            "job_workflow_ref": "octo/app/.github/workflows/release.yml@refs/tags/v1",
            "job_workflow_sha": "aaa", "repository": "octo/app", "repository_id": 42, "repository_owner": "octo",
            "repository_owner_id": "7", "sha": "bbb", "ref": "refs/tags/v1", "event_name": "push",
            "workflow": "release", "workflow_ref": "octo/app/.github/workflows/release.yml@refs/tags/v1", "workflow_sha": "ccc",
            "run_id": "99", "run_attempt": "2", "runner_environment": "github-hosted", "repository_visibility": "public",
        });
        let claims = claims.as_object().unwrap();
        assert_eq!(github_subject(claims).unwrap(), "https://github.com/octo/app/.github/workflows/release.yml@refs/tags/v1");
        let ext = github_extensions(claims);
        assert_eq!(ext.len(), 19);
        let get = |arc: &str| ext.iter().find(|e| e.oid == oid(arc)).map(|e| (e.encoding, e.value.as_str()));
        assert_eq!(get("1.3.6.1.4.1.57264.1.5"), Some((Encoding::Raw, "octo/app")));
        assert_eq!(get("1.3.6.1.4.1.57264.1.12"), Some((Encoding::Utf8String, "https://github.com/octo/app")));
        assert_eq!(get("1.3.6.1.4.1.57264.1.15"), Some((Encoding::Utf8String, "42")), "numeric claims become decimal text");
        assert_eq!(get("1.3.6.1.4.1.57264.1.21"), Some((Encoding::Utf8String, "https://github.com/octo/app/actions/runs/99/attempts/2")));
    }

    #[test]
    fn absent_claims_give_no_extension() {
        let claims = json!({"sub": "x", "repository": "octo/app"});
        let ext = github_extensions(claims.as_object().unwrap());
        let oids: Vec<String> = ext.iter().map(|e| e.oid.to_string()).collect();
        assert_eq!(oids, ["1.3.6.1.4.1.57264.1.5", "1.3.6.1.4.1.57264.1.12"]);
        assert_eq!(github_subject(claims.as_object().unwrap()), None);
    }
}
