//! The ban layer: a banned client is refused before anything reads its credentials, and a
//! refusal that the layers inside mark as a [`Strike`] counts towards its client's ban.
//!
//! Outside authn, so that a banned client costs a map lookup and no token hash. A request is
//! checked under its address and under the principal it claims (a token's id, or a client
//! certificate that `[guard.mtls]` maps), unauthenticated: a claim can only add a refusal,
//! never lift one. On the way out a strike counts against the address, or against the
//! [`Identity`] that authn put on the answer (the key the rate limiter counts).
//!
//! With Redis (`[guard.redis]`) the shared limiter counts its own strikes and keeps its own
//! bans, in the same atomic step as the bucket ([`crate::shared`]); this layer keeps the
//! instance's.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use futures_util::future::Ready;
use http::Request;
use tower::{Layer, Service};

use crate::client::{bearer, ClientKey};
use crate::guard::Guard;
use crate::identity::Identity;
use crate::mtls::ClientCertificate;
use crate::refuse::{banned, Strike, Struck};
use crate::store;
use crate::token;

#[derive(Clone)]
pub struct BanLayer {
    guard: Arc<Guard>,
}

impl BanLayer {
    pub fn new(guard: Arc<Guard>) -> Self {
        BanLayer { guard }
    }
}

impl<S> Layer<S> for BanLayer {
    type Service = Banning<S>;
    fn layer(&self, inner: S) -> Banning<S> {
        Banning { guard: self.guard.clone(), inner }
    }
}

#[derive(Clone)]
pub struct Banning<S> {
    guard: Arc<Guard>,
    inner: S,
}

impl<S> Service<Request<Body>> for Banning<S>
where
    S: Service<Request<Body>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Striking<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let address = self.guard.keying.key_of(&request);
        if let Some((client, until)) = self.banned(&address, &request) {
            return Striking::Refused { answer: futures_util::future::ready(Ok(banned(&client, until))) };
        }
        Striking::Inner { inner: self.inner.call(request), guard: Some(self.guard.clone()), address }
    }
}

impl<S> Banning<S> {
    /// The banned key among the request's address and its claimed principal, with until when.
    fn banned(&self, address: &ClientKey, request: &Request<Body>) -> Option<(ClientKey, u64)> {
        let bans = &self.guard.bans;
        if bans.is_empty() {
            return None;
        }
        let now = store::now();
        if let Some(until) = bans.banned_until(address, now) {
            return Some((*address, until));
        }
        let claimed = match bearer(request).and_then(token::claimed_id) {
            Some(id) => ClientKey::Token(id),
            None => {
                let certificate = request.extensions().get::<ClientCertificate>()?;
                ClientKey::certificate(self.guard.config.mtls.principal(certificate)?.0)
            }
        };
        bans.banned_until(&claimed, now).map(|until| (claimed, until))
    }
}

pin_project_lite::pin_project! {
    /// The inner answer, then the strike it carries, if any.
    #[project = StrikingProj]
    pub enum Striking<F> {
        Refused { #[pin] answer: Ready<Result<Response, Infallible>> },
        Inner { #[pin] inner: F, guard: Option<Arc<Guard>>, address: ClientKey },
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Striking<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            StrikingProj::Refused { answer } => answer.poll(cx),
            StrikingProj::Inner { inner, guard, address } => {
                let Ok(response) = std::task::ready!(inner.poll(cx));
                if let (Some(strike), Some(guard)) = (response.extensions().get::<Strike>(), guard.take()) {
                    let client = match strike.on {
                        Struck::Address => *address,
                        Struck::Caller => response.extensions().get::<Identity>().map_or(*address, |who| who.principal.client_key()),
                    };
                    guard.strike(client, strike.why);
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}
