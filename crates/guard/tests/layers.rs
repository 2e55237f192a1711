//! The guard's layers stacked as the server stacks them (bans, authn, rate limits), each
//! knowing nothing of the others: strikes travel out as marks on the answer, the identity as
//! an extension, and the ban layer alone counts and enforces bans.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use http::{Method, Request, StatusCode};
use signet_guard::authn::Scope;
use signet_guard::config::{BanConfig, RateLimitConfig};
use signet_guard::scope::TokenScope;
use signet_guard::{AuthnLayer, BanLayer, Guard, GuardConfig, Identity, RateLimitLayer, Refusal, Role, Route, Store};
use tower::{Service, ServiceBuilder, ServiceExt};

fn no_routes(_: &Method, _: &str) -> Option<Route> {
    None
}

/// The stack, around a handler that counts its calls and answers 200.
fn stack(guard: &Arc<Guard>, calls: Arc<AtomicUsize>) -> impl Service<Request<Body>, Response = Response, Error = Infallible> + Clone {
    ServiceBuilder::new()
        .layer(BanLayer::new(guard.clone()))
        .layer(AuthnLayer::new(guard.clone(), Scope::Public, no_routes))
        .layer(RateLimitLayer::new(guard.clone(), no_routes))
        .service(tower::service_fn(move |_request: Request<Body>| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, Infallible>(Response::new(Body::empty())) }
        }))
}

fn request(from: &str, token: Option<&str>) -> Request<Body> {
    let mut request = Request::get("/x").body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo(from.parse::<SocketAddr>().unwrap()));
    if let Some(token) = token {
        request.headers_mut().insert(http::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    }
    request
}

async fn send(service: &mut (impl Service<Request<Body>, Response = Response, Error = Infallible> + Clone), request: Request<Body>) -> Response {
    service.ready().await.unwrap().call(request).await.unwrap()
}

fn reason(response: &Response) -> Option<&'static str> {
    response.extensions().get::<Refusal>().map(|r| r.0)
}

fn config(rate_limit: bool) -> GuardConfig {
    let mut config = GuardConfig::default();
    config.ban = BanConfig { enabled: true, max_refusals: 2, window_secs: 60, duration_secs: 600 };
    config.rate_limit = RateLimitConfig { enabled: rate_limit, per_second: 1, burst: 1, write_per_second: None, write_burst: None };
    config
}

#[tokio::test]
async fn bad_tokens_ban_their_address_and_a_banned_address_never_reaches_authn_or_the_handler() {
    let dir = tempfile::tempdir().unwrap();
    let guard = Guard::open(dir.path(), config(false)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = stack(&guard, calls.clone());
    let forged = format!("sgt_00112233445566ff_{}", "A".repeat(43));

    // Two refusals are allowed; the third crosses the threshold.
    for _ in 0..3 {
        let answer = send(&mut service, request("192.0.2.7:1000", Some(&forged))).await;
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(reason(&answer), Some("token_invalid"));
    }
    let answer = send(&mut service, request("192.0.2.7:1001", None)).await;
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert_eq!(reason(&answer), Some("banned"));
    assert_eq!(calls.load(Ordering::Relaxed), 0, "a banned address reaches no handler");

    // Another address is someone else.
    let answer = send(&mut service, request("192.0.2.8:1000", None)).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_rate_limited_token_is_banned_under_its_id_not_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let (token, _) = Store::open(dir.path()).unwrap().create_token(Some("ci"), Role::reader(), None, TokenScope::default()).unwrap();
    let guard = Guard::open(dir.path(), config(true)).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut service = stack(&guard, calls.clone());

    // The burst of one passes; the next three are rate limited, the third of them a ban.
    let answer = send(&mut service, request("192.0.2.7:1000", Some(&token.plaintext))).await;
    assert_eq!(answer.status(), StatusCode::OK);
    let who = answer.extensions().get::<Identity>().expect("authn names the caller on the answer");
    assert_eq!(who.principal.client_key(), signet_guard::client::ClientKey::Token(token.id));
    for _ in 0..3 {
        let answer = send(&mut service, request("192.0.2.7:1000", Some(&token.plaintext))).await;
        assert_eq!(answer.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(answer.extensions().get::<Identity>().is_some(), "a refusal inside authn still names the caller");
    }
    let answer = send(&mut service, request("192.0.2.7:1000", Some(&token.plaintext))).await;
    assert_eq!(reason(&answer), Some("banned"));
    let body = axum::body::to_bytes(answer.into_body(), 4096).await.unwrap();
    assert!(String::from_utf8_lossy(&body).contains(&format!("client token:{} is banned", token.id)), "{}", String::from_utf8_lossy(&body));

    // The token's id is banned whatever secret comes with it (the claim is checked before any hash)...
    let forged = format!("sgt_{}_{}", token.id, "B".repeat(43));
    let answer = send(&mut service, request("192.0.2.9:1000", Some(&forged))).await;
    assert_eq!(reason(&answer), Some("banned"));
    // ...and its address is not: without the token it is an anonymous client like any other.
    let answer = send(&mut service, request("192.0.2.7:1000", None)).await;
    assert_eq!((answer.status(), reason(&answer)), (StatusCode::OK, None));
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}
