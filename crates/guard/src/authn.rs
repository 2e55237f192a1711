//! Authentication: `Authorization: Bearer sgt_…` API tokens, and client certificates that
//! `[guard.mtls]` maps to a role ([`crate::mtls`]); and authorization: the [`Permission`]
//! each route declares, against what the caller's role grants, and the token's
//! [scope](crate::scope) (routes, logs, networks) against the request.
//!
//! A bearer value that is not shaped like a signet token is left alone: Fulcio clients
//! (cosign) send their OIDC identity token in the same header, and the CA verifies that. On a
//! route that needs `cert.issue`, such a token is the principal (`[guard.auth] oidc`): the
//! layer lets it through, and the CA's verification decides.
//!
//! Authentication happens here only. Its result is a typed extension, [`Identity`]: on the
//! request for the layers and handlers inside, and on the answer for the layers outside (the
//! audit log names the caller by it, the ban layer keys a strike by it). A refusal that is
//! misbehaviour (a bad token, a token used outside its networks) is marked as a [`Strike`]
//! for the ban layer to count; this layer knows nothing of bans.
//!
//! Two scopes use this layer:
//! - [`Scope::Public`] wraps every route when the guard is on: authenticates a presented
//!   token (else a mapped certificate), and applies `[guard.auth] require` to anonymous
//!   callers. It leaves the routes the table marks as admin routes to the other scope.
//! - [`Scope::Admin`] wraps the admin routes always, whatever the config: a principal (token
//!   or mapped certificate) whose role grants the route's permission, or nothing.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::response::Response;
use futures_util::future::{Either, Ready};
use http::{Request, StatusCode};
use tower::{Layer, Service};

use crate::client::bearer;
use crate::config::Require;
use crate::guard::{AuthError, Guard};
use crate::identity::{Identity, Needs, Route, RouteTable};
use crate::permission::{Permission, Permissions};
use crate::refuse::{refuse, Strike, Struck};
use crate::mtls::ClientCertificate;
use crate::token;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Public,
    Admin,
}

#[derive(Clone)]
pub struct AuthnLayer {
    guard: Arc<Guard>,
    scope: Scope,
    routes: RouteTable,
}

impl AuthnLayer {
    pub fn new(guard: Arc<Guard>, scope: Scope, routes: RouteTable) -> Self {
        AuthnLayer { guard, scope, routes }
    }
}

impl<S> Layer<S> for AuthnLayer {
    type Service = Authn<S>;
    fn layer(&self, inner: S) -> Authn<S> {
        Authn { guard: self.guard.clone(), scope: self.scope, routes: self.routes, inner }
    }
}

#[derive(Clone)]
pub struct Authn<S> {
    guard: Arc<Guard>,
    scope: Scope,
    routes: RouteTable,
    inner: S,
}

impl<S> Service<Request<Body>> for Authn<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, Named<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        // The identity this layer attached, for the answer: none when an outer authn did.
        let attached = match request.extensions().get::<Identity>() {
            Some(_) => None,
            None => match self.authenticate(&mut request) {
                Ok(found) => found,
                Err(refusal) => return Either::Left(futures_util::future::ready(Ok(refusal))),
            },
        };
        match self.admit(&request) {
            Ok(()) => Either::Right(Named { inner: self.inner.call(request), identity: attached }),
            Err(refusal) => Either::Left(futures_util::future::ready(Ok(named(refusal, attached)))),
        }
    }
}

impl<S> Authn<S> {
    /// Checks a presented token, else a mapped client certificate; puts the identity found in
    /// the request's extensions, and returns a copy for the answer.
    fn authenticate(&self, request: &mut Request<Body>) -> Result<Option<Identity>, Response> {
        let identity = match bearer(request).and_then(|t| self.guard.authenticate(t)) {
            Some(Ok(identity)) => identity,
            Some(Err(e)) => {
                let reason = match e {
                    AuthError::Invalid => "token_invalid",
                    AuthError::Expired => "token_expired",
                    AuthError::Revoked => "token_revoked",
                };
                // Guessing tokens is misbehaviour like any other: it counts towards a ban.
                let strike = Strike { why: "bad API token", on: Struck::Address };
                return Err(strike.on(refuse(StatusCode::UNAUTHORIZED, reason, &e.to_string(), None)));
            }
            None => match request.extensions().get::<ClientCertificate>().and_then(|c| self.guard.certificate_identity(c)) {
                Some(identity) => identity,
                None => return Ok(None),
            },
        };
        request.extensions_mut().insert(identity.clone());
        Ok(Some(identity))
    }

    /// Whether the request's caller (authenticated or not) may use its route.
    fn admit(&self, request: &Request<Body>) -> Result<(), Response> {
        let path = request.uri().path();
        let template = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
        let route = template.and_then(|t| Some((t, (self.routes)(request.method(), t)?)));
        // The admin scope judges its own routes, whatever the public layer would say.
        if self.scope == Scope::Public && route.is_some_and(|(_, r)| r.admin) {
            return Ok(());
        }
        let needed = match route {
            Some((_, Route { needs: Needs::Permission(p), .. })) => p,
            Some((_, Route { needs: Needs::Open, .. })) => return Ok(()),
            // No route: the router answers 404 or 405. An admin route always has an entry.
            None if self.scope == Scope::Public => return Ok(()),
            None => {
                let message = format!("{} {path} is not an admin route that declares a permission", request.method());
                return Err(refuse(StatusCode::FORBIDDEN, "permission_denied", &message, None));
            }
        };
        // A token presented outside its scope is refused, even where no token is needed
        // (see crate::scope for why).
        if let (Some(who), Some((template, route))) = (request.extensions().get::<Identity>(), route) {
            if !who.scope.is_unlimited() {
                if let Err(out) = who.scope.admits(request.method(), template, route.log, self.guard.keying.client_ip(request)) {
                    let message = format!("{} {path}: {} is out of scope: {}", request.method(), who.principal, out.message);
                    let refusal = refuse(StatusCode::FORBIDDEN, "token_out_of_scope", &message, None);
                    return Err(match out.network {
                        true => Strike { why: "API token used outside its networks", on: Struck::Address }.on(refusal),
                        false => refusal,
                    });
                }
            }
        }
        // What anyone may do, a token holder may too: a token never narrows access.
        if self.anonymous_may(needed) {
            return Ok(());
        }
        // An identity token on a signing route is the principal: the handler verifies it (a
        // forged one gets the CA's 401) and applies its limits and bans before signing.
        if needed == Permission::CertIssue && self.scope == Scope::Public && self.guard.config.auth.oidc
            && request.extensions().get::<Identity>().is_none()
            && bearer(request).is_some_and(|t| !t.is_empty() && !token::is_api_token(t))
        {
            return Ok(());
        }
        let who = request.extensions().get::<Identity>();
        match who {
            None => Err(refuse(
                StatusCode::UNAUTHORIZED,
                "token_missing",
                &format!(
                    "{} {path} needs an API token whose role grants {needed} (Authorization: Bearer sgt_…)",
                    request.method()
                ),
                None,
            )),
            Some(w) if !w.permissions.contains(needed) => {
                let has = match self.guard.roles().defines(&w.role) {
                    true => format!("role {} grants: {}", w.role, if w.permissions == Permissions::NONE { "nothing".to_string() } else { w.permissions.to_string() }),
                    false => format!("role {} is not defined here, so it grants nothing", w.role),
                };
                Err(refuse(
                    StatusCode::FORBIDDEN,
                    "permission_denied",
                    &format!("{} {path} needs permission {needed}; this {} has {has}", request.method(), w.principal),
                    None,
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// Whether a caller without a token may use a route needing `needed`: admin and audit
    /// permissions never; the rest as `[guard.auth] require` says.
    fn anonymous_may(&self, needed: Permission) -> bool {
        if self.scope == Scope::Admin || matches!(needed.name().split('.').next(), Some("admin" | "audit")) {
            return false;
        }
        match self.guard.config.auth.require {
            Require::None => true,
            Require::Writes => needed == Permission::Read,
            Require::All => false,
        }
    }
}

/// `response`, carrying the identity that this layer attached, for the layers outside.
fn named(mut response: Response, identity: Option<Identity>) -> Response {
    if let Some(identity) = identity {
        response.extensions_mut().insert(identity);
    }
    response
}

pin_project_lite::pin_project! {
    /// The inner answer, carrying the identity this layer attached ([`named`]).
    pub struct Named<F> {
        #[pin]
        inner: F,
        identity: Option<Identity>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Named<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(response) = std::task::ready!(this.inner.poll(cx));
        Poll::Ready(Ok(named(response, this.identity.take())))
    }
}
