//! Who a request comes from and what its route needs: the typed extensions that the layers
//! hand on ([`Identity`], [`Principal`]) and the route table they read ([`RouteTable`]).
//! Plain types: no layer's logic, so every layer can read them without reaching into another.

use std::sync::Arc;

use http::Method;

use crate::client::ClientKey;
use crate::permission::{Permission, Permissions};
use crate::roles::Role;
use crate::scope::TokenScope;
use crate::token::TokenId;

/// An authenticated caller, put in the request's extensions for the layers and handlers
/// after this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub principal: Principal,
    pub role: Role,
    /// What the role granted when the token was checked (this request).
    pub permissions: Permissions,
    /// Where the token may be used ([`crate::scope`]); the CA reads its identity patterns.
    pub scope: Arc<TokenScope>,
}

/// Who an [`Identity`] is: an API token, or a client certificate's SAN (mTLS, [`crate::mtls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Token(TokenId),
    Certificate(Arc<str>),
}

impl Principal {
    /// The key its rate limits and bans are kept under.
    pub fn client_key(&self) -> ClientKey {
        match self {
            Principal::Token(id) => ClientKey::Token(*id),
            Principal::Certificate(san) => ClientKey::certificate(san),
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Principal::Token(id) => write!(f, "token {id}"),
            Principal::Certificate(san) => write!(f, "client certificate {san}"),
        }
    }
}

/// What a route needs, as the server's route table declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing, ever: health probes for load balancers.
    Open,
    Permission(Permission),
}

/// A route as the server's table declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub needs: Needs,
    /// The log it reads or writes (`rekor-v1`, `rekor-v2`, `ct`), for token scopes.
    pub log: Option<&'static str>,
    /// An operator's route: the admin scope's authn judges it, whatever the public one says.
    pub admin: bool,
}

/// The server's route table: the route matched as (method, path template); `None` for no
/// route (the router's 404 or 405 follows).
pub type RouteTable = fn(&Method, &str) -> Option<Route>;
