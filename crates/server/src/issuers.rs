//! The configured OIDC issuers, and where each one's keys come from: a JWKS file, or
//! OIDC discovery over HTTPS ([`crate::discovery`]).
//!
//! Discovery is lazy: the verifier fetches an issuer's keys at the first token it sees
//! from it. A background check at startup fetches once and logs the outcome, so that an
//! unreachable issuer shows in the log early; it never stops the server from starting.
//! While an issuer is unreachable its tokens are refused (401) with the fetch error.

use std::sync::Arc;
use std::time::Duration;

use signet_ca::oidc::jwks::KeySet;
use signet_ca::oidc::refresh::rate_limited;
use signet_ca::oidc::verify::KeySource;
use signet_ca::oidc::{IssuerConfig, SubjectKind};
use signet_tls::{Fetcher, Trust};

use crate::config::{ConfigError, IssuerSettings};
use crate::discovery::Discovery;

/// The verifier's view of every `[[oidc.issuers]]` entry.
pub fn configured(settings: &[IssuerSettings]) -> Result<Vec<IssuerConfig>, ConfigError> {
    let mut issuers = Vec::with_capacity(settings.len());
    for i in settings {
        let keys = match &i.jwks_file {
            Some(path) => file_source(path.clone()),
            None => {
                let source = discovery_source(i)?;
                startup_check(i.url.clone(), source.clone());
                source
            }
        };
        issuers.push(IssuerConfig { issuer: i.url.clone(), audience: i.audience.clone(), subject: subject_kind(&i.subject), keys });
    }
    Ok(issuers)
}

fn subject_kind(name: &str) -> SubjectKind {
    match name {
        "email" => SubjectKind::Email,
        "uri" => SubjectKind::Uri,
        "github-workflow" => SubjectKind::GithubWorkflow,
        // Config::validate admits no other names.
        _ => SubjectKind::Spiffe,
    }
}

/// A local file: rereading it costs nothing, so every unknown key ID rereads it.
fn file_source(path: std::path::PathBuf) -> KeySource {
    Arc::new(move || {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        KeySet::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    })
}

/// Discovery, at most once per `min_refresh_interval_secs`, off the async runtime.
fn discovery_source(i: &IssuerSettings) -> Result<KeySource, ConfigError> {
    let trust = i.ca_file.clone().map_or(Trust::Platform, Trust::PemFile);
    let tls = signet_tls::client_config(&trust).map_err(|e| ConfigError::Invalid(format!("oidc issuer {}: {e}", i.url)))?;
    let discovery = Discovery::new(&i.url, Fetcher::new(tls));
    let fetch: KeySource = Arc::new(move || discovery.key_set());
    Ok(off_runtime(rate_limited(fetch, Duration::from_secs(i.min_refresh_interval_secs))))
}

/// The verifier calls key sources synchronously from request handlers. A network fetch
/// there must not stall the other tasks of the tokio worker it runs on.
fn off_runtime(source: KeySource) -> KeySource {
    Arc::new(move || match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| source())
        }
        _ => source(),
    })
}

/// Fetches once in the background and logs the outcome.
fn startup_check(issuer: String, source: KeySource) {
    let name = issuer.clone();
    let spawned = std::thread::Builder::new().name("oidc-discovery".into()).spawn(move || match source() {
        Ok(keys) => tracing::info!(issuer, keys = keys.len(), "OIDC discovery: key set fetched"),
        Err(e) => tracing::warn!(issuer, "OIDC discovery failed; tokens of this issuer are refused until it succeeds: {e}"),
    });
    if let Err(e) = spawned {
        tracing::warn!("OIDC discovery check for {name} not started: {e}");
    }
}
