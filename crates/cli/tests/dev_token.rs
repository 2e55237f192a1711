//! `signet dev-token` against a running `serve --dev`: the token verifies under the JWKS the
//! server publishes, for the issuer its discovery document names.

use crate::common;

use std::process::Command;
use std::sync::Arc;

use common::*;
use signet_ca::oidc::jwks::KeySet;
use signet_ca::oidc::{IssuerConfig, IssuerKind, TokenVerifier};

fn dev_token(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).arg("dev-token").args(args).output().unwrap()
}

#[test]
fn tokens_verify_against_the_served_jwks() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let agent = agent();
    let discovery = get(&agent, &format!("{}/oidc/.well-known/openid-configuration", server.url)).unwrap().json();
    let issuer = discovery["issuer"].as_str().unwrap().to_string();
    assert_eq!(issuer, format!("{}/oidc", server.url));
    let jwks = get(&agent, discovery["jwks_uri"].as_str().unwrap()).unwrap().text();

    let out = dev_token(&["--data-dir", dir.path().to_str().unwrap(), "--subject", "alice@example.com"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap();
    assert_eq!(token.lines().count(), 1, "the token alone on stdout");

    let keys = KeySet::from_json(&jwks).unwrap();
    let verifier = TokenVerifier::new([IssuerConfig {
        issuer: issuer.clone(),
        audience: "sigstore".into(),
        kind: IssuerKind::Email { skip_email_verification: false },
        keys: Arc::new(move || Ok(keys.clone())),
    }]);
    let id = verifier.verify(token.trim()).unwrap();
    assert_eq!((id.subject.as_str(), id.issuer.as_str()), ("alice@example.com", issuer.as_str()));
}

#[test]
fn usage_errors_exit_2_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for (args, needle) in [
        (vec!["--data-dir", d, "--subject", "alice@example.com"], "serve --dev"),
        (vec!["--data-dir", d, "--subject", "not-an-email"], "not an email"),
        (vec!["--data-dir", d, "--subject", "a@b.c", "--ttl", "0"], "--ttl"),
    ] {
        let out = dev_token(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
}
