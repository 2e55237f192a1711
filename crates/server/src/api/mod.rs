//! The HTTP surface: one router whose routes a tower layer stack can wrap.
//!
//! - [`fulcio`]: the Fulcio v2 CA API.
//! - [`ct`]: the RFC 6962 CT log read API.
//! - [`rekor_v1`]: the Rekor v1 JSON API.
//! - [`rekor_v2`]: the Rekor v2 API and C2SP tiles.
//! - [`tsa`]: the RFC 3161 timestamp API.
//! - [`trust`]: the trust documents.
//! - [`admin`]: `/api/admin/…`, behind an admin API token whatever the config.
//! - [`ops`]: health, metrics, and the dev OIDC issuer's documents.
//! - [`ready`]: readiness, and the router that answers while the instance opens.
//! - [`error`] and [`input`]: JSON errors and strict input reading.

pub mod admin;
pub mod ct;
pub mod error;
pub mod fulcio;
pub mod input;
pub mod ops;
pub mod ready;
pub mod rekor_v1;
pub mod rekor_v2;
pub mod trust;
pub mod tsa;

use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;
use error::ApiError;

pub fn router(state: Arc<AppState>) -> Router {
    let metrics = state.metrics.clone();
    let guard = state.guard.clone();
    let (audit, audit_guard) = (state.audit.clone(), state.guard.clone());
    let admin_only = signet_guard::AuthnLayer::new(guard.clone(), signet_guard::authn::Scope::Admin);
    let mut app = Router::new()
        .route("/api/admin/tokens", get(admin::tokens).layer(admin_only.clone()))
        .route("/api/admin/log/rotate", post(admin::rotate_log).layer(admin_only))
        .route("/healthz", get(ops::healthz))
        .route("/metrics", get(ops::metrics))
        .route("/readyz", get(ready::readyz))
        .route("/oidc/.well-known/openid-configuration", get(ops::oidc_discovery))
        .route("/oidc/jwks", get(ops::oidc_jwks))
        .route("/api/v2/signingCert", post(fulcio::signing_cert))
        .route("/api/v2/trustBundle", get(fulcio::trust_bundle))
        .route("/api/v2/configuration", get(fulcio::configuration))
        .route("/trust/{name}", get(trust::document))
        .route("/ct/v1/get-sth", get(ct::get_sth))
        .route("/ct/v1/get-sth-consistency", get(ct::get_sth_consistency))
        .route("/ct/v1/get-proof-by-hash", get(ct::get_proof_by_hash))
        .route("/ct/v1/get-entries", get(ct::get_entries))
        .route("/api/v1/timestamp", post(tsa::timestamp))
        .route("/api/v1/timestamp/certchain", get(tsa::certchain))
        .route("/api/v1/log", get(rekor_v1::log_info))
        .route("/api/v1/log/publicKey", get(rekor_v1::public_key))
        .route("/api/v1/log/proof", get(rekor_v1::consistency_proof))
        .route("/api/v1/log/entries", post(rekor_v1::create_entry).get(rekor_v1::get_entry_by_index))
        .route("/api/v1/log/entries/retrieve", post(rekor_v1::retrieve_entries))
        .route("/api/v1/log/entries/{uuid}", get(rekor_v1::get_entry_by_uuid))
        .route("/api/v1/index/retrieve", post(rekor_v1::search_index))
        .route("/api/v2/log/entries", post(rekor_v2::create_entry))
        .route("/api/v2/checkpoint", get(rekor_v2::checkpoint))
        .route("/api/v2/tile/{*path}", get(rekor_v2::tile))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this endpoint")
        })
        .with_state(state);
    // The guard (docs/guard.md), when configured: authn outside, so that the rate limiter
    // keys authenticated clients by token. Off, the router carries no guard layer at all.
    if guard.config.active() {
        app = app
            .layer(signet_guard::RateLimitLayer::new(guard.clone()))
            .layer(signet_guard::AuthnLayer::new(guard, signet_guard::authn::Scope::Public));
    }
    // Inside the metrics and audit layers, so that a panic's 500 is counted and audited too.
    app = app.layer(crate::panic::layer(metrics.clone()));
    app = app.layer(axum::middleware::from_fn_with_state(metrics, crate::metrics::count));
    // The audit layer outermost, so that it records what the layers inside refuse.
    match audit {
        Some(log) => app.layer(signet_guard::audit::AuditLayer { log, guard: audit_guard }),
        None => app,
    }
}
