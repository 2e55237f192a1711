//! The HTTP surface: one router whose routes a tower layer stack can wrap.
//!
//! - [`fulcio`]: the Fulcio v2 CA API, REST and gRPC.
//! - [`ct`]: the RFC 6962 CT log read API.
//! - [`rekor_v1`]: the Rekor v1 JSON API.
//! - [`rekor_v2`]: the Rekor v2 API and C2SP tiles.
//! - [`tsa`]: the RFC 3161 timestamp API.
//! - [`trust`]: the trust documents.
//! - [`admin`]: `/api/admin/…`, behind an admin API token whatever the config.
//! - [`ui`]: the web log explorer.
//! - [`openapi`]: the OpenAPI description, made from this module's route table.
//! - [`ops`]: health, metrics, and the dev OIDC issuer's documents.
//! - [`ready`]: readiness, and the router that answers while the instance opens.
//! - [`error`] and [`input`]: JSON errors and strict input reading.

pub mod admin;
pub mod ct;
pub mod error;
pub mod fulcio;
pub mod input;
pub mod openapi;
pub mod ops;
pub mod ready;
pub mod rekor_v1;
pub mod rekor_v2;
pub mod trust;
pub mod tsa;
pub mod ui;

use std::sync::Arc;

use std::collections::HashMap;

use axum::http::{Method, StatusCode};
use axum::routing::MethodRouter;
use axum::Router;
use signet_guard::permission::Permission::{self, *};
use signet_guard::Needs;

use crate::config::Surface;
use crate::state::AppState;
use error::ApiError;

/// Every route: its path, and for each method the handler and the one permission it needs
/// (docs/guard.md). The router is built from this list and the guard's route table is read
/// from it, so a route cannot exist without declaring what it needs.
macro_rules! routes {
    ($($path:literal $(in $log:literal)? => { $($method:ident $handler:path => $needs:expr),+ $(,)? })+) => {
        /// (method, path template, what it needs) for every route.
        pub fn route_list() -> Vec<(Method, &'static str, Needs)> {
            vec![$($((method_named(stringify!($method)), $path, $needs)),+),+]
        }

        /// The log a route template belongs to (for token scopes), if any.
        pub fn route_log(template: &str) -> Option<&'static str> {
            match template {
                $($($path => Some($log),)?)+
                _ => None,
            }
        }

        /// The routes of `serves` (and the probes, which every listener answers).
        fn with_routes(mut app: Router<Arc<AppState>>, admin: &signet_guard::AuthnLayer, serves: &[Surface]) -> Router<Arc<AppState>> {
            $(
                if serves.contains(&Surface::of($path)) || matches!($path, "/healthz" | "/readyz") {
                    let methods = MethodRouter::new()$(.$method($handler))+;
                    // Admin routes check their permission whatever `[guard]` says.
                    let methods = if $path.starts_with("/api/admin/") { methods.layer(admin.clone()) } else { methods };
                    app = app.route($path, methods);
                }
            )+
            app
        }
    };
}

routes! {
    "/api/admin/tokens" => { get admin::tokens => Perm(AdminTokens) }
    "/api/admin/roles" => { get admin::roles => Perm(AdminTokens) }
    "/api/admin/log/rotate" => { post admin::rotate_log => Perm(AdminLog) }
    "/api/admin/log/reindex" => { post admin::reindex_log => Perm(AdminLog), get admin::reindex_status => Perm(AdminLog) }
    "/api/admin/bans" => { get admin::bans => Perm(AdminBans) }
    "/api/admin/bans/lift" => { post admin::lift_ban => Perm(AdminBans) }
    "/api/admin/audit/verify" => { get admin::verify_audit => Perm(AuditRead) }
    "/healthz" => { get ready::healthz => Needs::Open }
    "/readyz" => { get ready::readyz => Needs::Open }
    "/metrics" => { get ops::metrics => Perm(Read) }
    "/api/openapi.json" => { get openapi::openapi_json => Perm(Read) }
    "/oidc/.well-known/openid-configuration" => { get ops::oidc_discovery => Perm(Read) }
    "/oidc/jwks" => { get ops::oidc_jwks => Perm(Read) }
    "/api/v2/signingCert" => { post fulcio::signing_cert => Perm(CertIssue) }
    "/api/v2/trustBundle" => { get fulcio::trust_bundle => Perm(Read) }
    "/api/v2/configuration" => { get fulcio::configuration => Perm(Read) }
    "/api/v1/signingCert" => { post fulcio::legacy_signing_cert => Perm(CertIssue) }
    "/api/v1/rootCert" => { get fulcio::legacy_root_cert => Perm(Read) }
    // The same CA as Fulcio's gRPC service (signet_core::grpc::fulcio): every call is a POST.
    "/dev.sigstore.fulcio.v2.CA/CreateSigningCertificate" => { post fulcio::grpc::create_signing_certificate => Perm(CertIssue) }
    "/dev.sigstore.fulcio.v2.CA/GetTrustBundle" => { post fulcio::grpc::get_trust_bundle => Perm(Read) }
    "/dev.sigstore.fulcio.v2.CA/GetConfiguration" => { post fulcio::grpc::get_configuration => Perm(Read) }
    "/trust/{name}" => { get trust::document => Perm(Read) }
    "/tuf/{*file}" => { get trust::tuf_file => Perm(Read) }
    "/ui" => { get ui::index => Perm(Read) }
    "/ui/{file}" => { get ui::asset => Perm(Read) }
    "/ui/reports/{name}" => { get ui::report => Perm(Read) }
    "/ct/v1/get-sth" in "ct" => { get ct::get_sth => Perm(Read) }
    "/ct/v1/get-sth-consistency" in "ct" => { get ct::get_sth_consistency => Perm(Read) }
    "/ct/v1/get-proof-by-hash" in "ct" => { get ct::get_proof_by_hash => Perm(Read) }
    "/ct/v1/get-entries" in "ct" => { get ct::get_entries => Perm(Read) }
    "/ct/v1/get-roots" in "ct" => { get ct::get_roots => Perm(Read) }
    "/ct/v1/get-entry-and-proof" in "ct" => { get ct::get_entry_and_proof => Perm(Read) }
    "/ct/v1/add-chain" in "ct" => { post ct::add::add_chain => Perm(LogAppend) }
    "/ct/v1/add-pre-chain" in "ct" => { post ct::add::add_pre_chain => Perm(LogAppend) }
    "/api/v1/timestamp" => { post tsa::timestamp => Perm(TsaStamp) }
    "/api/v1/timestamp/certchain" => { get tsa::certchain => Perm(Read) }
    "/api/v1/log" in "rekor-v1" => { get rekor_v1::log_info => Perm(Read) }
    "/api/v1/log/publicKey" in "rekor-v1" => { get rekor_v1::public_key => Perm(Read) }
    "/api/v1/log/proof" in "rekor-v1" => { get rekor_v1::consistency_proof => Perm(Read) }
    "/api/v1/log/entries" in "rekor-v1" => { post rekor_v1::create_entry => Perm(LogAppend), get rekor_v1::get_entry_by_index => Perm(Read) }
    // Searches are POSTs that write nothing.
    "/api/v1/log/entries/retrieve" in "rekor-v1" => { post rekor_v1::retrieve_entries => Perm(Read) }
    "/api/v1/log/entries/{uuid}" in "rekor-v1" => { get rekor_v1::get_entry_by_uuid => Perm(Read) }
    "/api/v1/index/retrieve" in "rekor-v1" => { post rekor_v1::search_index => Perm(Read) }
    "/api/v2/log/entries" in "rekor-v2" => { post rekor_v2::create_entry => Perm(LogAppend) }
    "/api/v2/checkpoint" in "rekor-v2" => { get rekor_v2::checkpoint => Perm(Read) }
    "/api/v2/tile/{*path}" in "rekor-v2" => { get rekor_v2::tile => Perm(Read) }
    // c2sp.org/tlog-witness: the log's signature on the checkpoint is the authentication.
    "/add-checkpoint" => { post crate::witnessing::add_checkpoint => Needs::Open }
    "/witness/checkpoint" => { get crate::witnessing::latest_cosigned => Perm(Read) }
}

/// Whether `path` is one `template` (a route of [`route_list`]) matches: literal segments
/// equal, `{name}` any one segment, `{*rest}` the rest.
fn path_matches(template: &str, path: &str) -> bool {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(seg), Some(_)) if seg.starts_with("{*") => return true,
            (Some(seg), Some(got)) if seg.starts_with('{') || seg == got => {}
            _ => return false,
        }
    }
}

#[allow(non_snake_case)]
fn Perm(p: Permission) -> Needs {
    Needs::Permission(p)
}

/// The name of a method a `MethodRouter` can route (the standard ones), as a `'static` str.
fn standard_name(m: &Method) -> &'static str {
    [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH, Method::HEAD, Method::OPTIONS, Method::TRACE, Method::CONNECT]
        .into_iter()
        .zip(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT"])
        .find(|(s, _)| s == m)
        .map_or("", |(_, name)| name)
}

fn method_named(name: &str) -> Method {
    Method::from_bytes(name.to_ascii_uppercase().as_bytes()).unwrap_or(Method::GET)
}

/// What the route matched as `(method, template)` needs, and its log: the guard's
/// [`signet_guard::RouteTable`]. A lookup in a table made once, that allocates nothing.
pub fn route_info(method: &Method, template: &str) -> Option<signet_guard::Route> {
    route_needs(method, template).map(|needs| signet_guard::Route { needs, log: route_log(template), admin: template.starts_with("/api/admin/") })
}

/// What the route matched as `(method, template)` needs.
pub fn route_needs(method: &Method, template: &str) -> Option<Needs> {
    static TABLE: std::sync::LazyLock<HashMap<(&'static str, &'static str), Needs>> = std::sync::LazyLock::new(|| {
        route_list().into_iter().map(|(m, p, n)| ((standard_name(&m), p), n)).collect()
    });
    // HEAD is answered by the GET route.
    let method = if method == Method::HEAD { "GET" } else { method.as_str() };
    let table: &HashMap<(&str, &str), Needs> = &TABLE;
    table.get(&(method, template)).copied()
}

/// What a route takes as a body: the validation layer's [`signet_guard::validate::BodyTable`].
pub fn body_class(method: &Method, template: &str) -> Option<signet_guard::BodyClass> {
    use signet_guard::BodyClass::*;
    if method == Method::GET || method == Method::HEAD {
        return Some(Empty);
    }
    // No route takes another method: the router's 405 follows.
    if method != Method::POST {
        return None;
    }
    Some(match template {
        "/api/v1/log/entries" | "/api/v2/log/entries" => Entry,
        "/api/v1/timestamp" => Stamp,
        "/add-checkpoint" => Note,
        t if crate::grpc::is_grpc_path(t) => Grpc,
        _ => Small,
    })
}

/// The router of a listener that serves `serves` ([`crate::config::HttpSettings::surfaces`]).
pub fn router(state: Arc<AppState>, access: Arc<crate::access::Access>, serves: &[Surface]) -> Router {
    let metrics = state.metrics.clone();
    let input = state.input_limits;
    let guard = state.guard.clone();
    let audit = state.audit.clone().map(|log| signet_guard::audit::AuditLayer { log, keying: Arc::new(guard.keying.clone()) });
    // The guard (docs/guard.md), when configured: bans outside authn, so that a banned client
    // costs no token check; authn outside the rate limiter, so that it keys authenticated
    // clients by token. Off, the stack carries no guard layer at all.
    let active = guard.config.active();
    let bans = active.then(|| signet_guard::BanLayer::new(guard.clone()));
    let authn = active.then(|| signet_guard::AuthnLayer::new(guard.clone(), signet_guard::authn::Scope::Public, route_info));
    let limits = active.then(|| signet_guard::RateLimitLayer::new(guard.clone(), route_info));
    let admin_only = signet_guard::AuthnLayer::new(guard, signet_guard::authn::Scope::Admin, route_info);
    // One stack, applied once. Each `Router::layer` call wraps every route in a boxed service
    // that clones the boxes beneath it on each request; one stack costs one allocation
    // (docs/performance.md, "The measurements behind the code's shape"). Outermost first:
    // - on gRPC paths, refusals rewritten as gRPC statuses (crate::grpc), after everything
    //   inside has logged, audited and counted them as HTTP statuses;
    // - access: the request id, the access line and the trace span, around everything;
    // - audit: records what the layers inside refuse, as well as what they let through;
    // - metrics and the panic boundary, in one layer: a panic's 500 is counted and audited;
    // - validation, before any other layer reads the request;
    // - bans, authn, then rate limits; the inner two mark refusals that count as strikes,
    //   which the ban layer counts on the way out.
    let stack = tower::ServiceBuilder::new()
        .layer(crate::grpc::GrpcStatusLayer)
        .layer(crate::access::AccessLayer(access))
        .option_layer(audit)
        .layer(crate::panic::layer(metrics))
        .layer(signet_guard::ValidateLayer::new(input, body_class))
        .option_layer(bans)
        .option_layer(authn)
        .option_layer(limits);
    let serves = serves.to_vec();
    let elsewhere = [Surface::Metrics, Surface::Admin].into_iter().filter(|s| !serves.contains(s)).collect::<Vec<_>>();
    with_routes(Router::new(), &admin_only, &serves)
        .fallback(move |uri: axum::http::Uri| async move {
            // A route of a surface this port does not serve: say where it is, or how to serve it.
            match elsewhere.iter().find(|s| route_list().iter().any(|(_, p, _)| Surface::of(p) == **s && path_matches(p, uri.path()))) {
                Some(s) => ApiError::not_found(format!("{} is not served on this port: it is served where {} says (unset: nowhere but under --dev)", uri.path(), s.setting())),
                None => ApiError::not_found("no such endpoint"),
            }
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this endpoint")
        })
        .with_state(state)
        .layer(stack)
}

#[cfg(test)]
mod tests {
    use super::path_matches;

    #[test]
    fn a_path_matches_its_route_template() {
        assert!(path_matches("/metrics", "/metrics"));
        assert!(!path_matches("/metrics", "/metrics/x"));
        assert!(path_matches("/api/admin/bans", "/api/admin/bans"));
        assert!(path_matches("/api/v1/log/entries/{uuid}", "/api/v1/log/entries/abc"));
        assert!(!path_matches("/api/v1/log/entries/{uuid}", "/api/v1/log/entries"));
        assert!(path_matches("/tuf/{*file}", "/tuf/targets/a.json"));
        assert!(!path_matches("/api/admin/bans", "/api/admin/tokens"));
    }
}
