//! Authentication: `Authorization: Bearer sgt_…` API tokens, and the role each route needs.
//!
//! A bearer value that is not shaped like a signet token is left alone: Fulcio clients
//! (cosign) send their OIDC identity token in the same header, and the CA verifies that.
//! Roles are checked here too, coarsely (reads, writes, admin); finer RBAC is to come.
//!
//! Two scopes use this layer:
//! - [`Scope::Public`] wraps every route when the guard is on: refuses banned IPs first,
//!   authenticates a presented token, and applies `[guard.auth] require`.
//! - [`Scope::Admin`] wraps `/api/admin/…` always, whatever the config: admin role or nothing.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use futures_util::future::{Either, Ready};
use http::{Request, StatusCode};
use tower::{Layer, Service};

use crate::client::{bearer, ClientKey};
use crate::config::Require;
use crate::guard::{AuthError, Guard};
use crate::ratelimit::is_write;
use crate::refuse::refuse;
use crate::store;
use crate::token::{Role, TokenId};

/// An authenticated caller, put in the request's extensions for the layers and handlers
/// after this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub id: TokenId,
    pub role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Public,
    Admin,
}

#[derive(Clone)]
pub struct AuthnLayer {
    guard: Arc<Guard>,
    scope: Scope,
}

impl AuthnLayer {
    pub fn new(guard: Arc<Guard>, scope: Scope) -> Self {
        AuthnLayer { guard, scope }
    }
}

impl<S> Layer<S> for AuthnLayer {
    type Service = Authn<S>;
    fn layer(&self, inner: S) -> Authn<S> {
        Authn { guard: self.guard.clone(), scope: self.scope, inner }
    }
}

#[derive(Clone)]
pub struct Authn<S> {
    guard: Arc<Guard>,
    scope: Scope,
    inner: S,
}

impl<S> Service<Request<Body>> for Authn<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        match self.admit(&mut request) {
            Ok(()) => Either::Right(self.inner.call(request)),
            Err(refusal) => Either::Left(futures_util::future::ready(Ok(refusal))),
        }
    }
}

impl<S> Authn<S> {
    fn admit(&self, request: &mut Request<Body>) -> Result<(), Response> {
        let ip = self.guard.keying.key_of(request);
        if self.scope == Scope::Public {
            if let Some(until) = self.guard.banned_until(&ip) {
                return Err(banned(&ip, until));
            }
        }
        let mut who = request.extensions().get::<Identity>().copied();
        if who.is_none() {
            match bearer(request).and_then(|t| self.guard.authenticate(t)) {
                Some(Ok(identity)) => {
                    request.extensions_mut().insert(identity);
                    who = Some(identity);
                }
                Some(Err(e)) => {
                    // Guessing tokens is misbehaviour like any other: it counts towards a ban.
                    self.guard.strike(ip, "bad API token");
                    let reason = match e {
                        AuthError::Invalid => "token_invalid",
                        AuthError::Expired => "token_expired",
                        AuthError::Revoked => "token_revoked",
                    };
                    return Err(refuse(StatusCode::UNAUTHORIZED, reason, &e.to_string(), None));
                }
                None => {}
            }
        }
        let path = request.uri().path();
        let needed = match self.scope {
            Scope::Admin => Some(Role::Admin),
            // The admin scope judges its own routes; probes stay open for load balancers.
            Scope::Public if path.starts_with("/api/admin/") || path == "/healthz" || path == "/readyz" => None,
            Scope::Public => {
                let write = is_write(request.method());
                match self.guard.config.auth.require {
                    Require::None => None,
                    Require::Writes => write.then_some(Role::Signer),
                    Require::All => Some(if write { Role::Signer } else { Role::Reader }),
                }
            }
        };
        let Some(needed) = needed else { return Ok(()) };
        match who {
            None => Err(refuse(
                StatusCode::UNAUTHORIZED,
                "token_missing",
                &format!("{} {path} needs an API token with role {needed} or above: Authorization: Bearer sgt_…", request.method()),
                None,
            )),
            Some(w) if w.role < needed => Err(refuse(
                StatusCode::FORBIDDEN,
                "role_insufficient",
                &format!("{} {path} needs role {needed} or above; this token (id {}) has role {}", request.method(), w.id, w.role),
                None,
            )),
            Some(_) => Ok(()),
        }
    }
}

/// The 403 a banned client gets, with how long the ban still runs.
pub fn banned(client: &ClientKey, until: u64) -> Response {
    let left = until.saturating_sub(store::now()).max(1);
    let message = format!(
        "client {client} is banned for another {left} s after repeated refused requests; an operator can lift it with `signet admin ban lift {client}`"
    );
    refuse(StatusCode::FORBIDDEN, "banned", &message, Some(left))
}
