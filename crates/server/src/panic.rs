//! The panic boundary: a bug reached by one request costs that request, not the server.
//!
//! A panic in a handler or in a layer inside this one becomes the usual JSON 500; the panic
//! is logged (its message, which names signet's own code, never request secrets) and counted
//! in `/metrics`. The same layer counts every request for `/metrics` ([`crate::metrics`]),
//! so that a panic's 500 is counted like any other answer.
//!
//! It is written by hand rather than stacked from `from_fn` and tower-http's `CatchPanicLayer`:
//! `from_fn` clones and boxes the whole service beneath it on every request. Here a request costs
//! one allocation, its future (docs/performance.md, "The measurements behind the code's shape").

use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
use crate::metrics::Metrics;

/// Counts every request and turns a panic beneath it into a 500.
pub fn layer(metrics: Arc<Metrics>) -> BoundaryLayer {
    BoundaryLayer(metrics)
}

#[derive(Clone)]
pub struct BoundaryLayer(Arc<Metrics>);

impl<S> tower::Layer<S> for BoundaryLayer {
    type Service = Boundary<S>;

    fn layer(&self, inner: S) -> Boundary<S> {
        Boundary { metrics: self.0.clone(), inner }
    }
}

#[derive(Clone)]
pub struct Boundary<S> {
    metrics: Arc<Metrics>,
    inner: S,
}

impl<S> tower::Service<Request> for Boundary<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let counting = crate::metrics::Counting::start(self.metrics.clone(), &request);
        // A layer beneath may panic before it returns its future, as well as while polled.
        let called = catch_unwind(AssertUnwindSafe(|| self.inner.call(request)));
        Box::pin(async move {
            let outcome = match called {
                Ok(future) => {
                    let mut future = std::pin::pin!(future);
                    std::future::poll_fn(|cx| match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                        Ok(Poll::Pending) => Poll::Pending,
                        Ok(Poll::Ready(Ok(response))) => Poll::Ready(Ok(response)),
                        Ok(Poll::Ready(Err(never))) => match never {},
                        Err(payload) => Poll::Ready(Err(payload)),
                    })
                    .await
                }
                Err(payload) => Err(payload),
            };
            let response = outcome.unwrap_or_else(|payload| panicked(counting.metrics(), payload));
            Ok(counting.answered(response))
        })
    }
}

/// The answer to a request whose handling panicked.
fn panicked(metrics: &Metrics, payload: Box<dyn Any + Send + 'static>) -> Response {
    metrics.panics.fetch_add(1, Ordering::Relaxed);
    let message = signet_core::cpu::panic_text(&*payload);
    tracing::error!(panic = %message, "a request handler panicked; the request got a 500 and the server goes on");
    // The JSON error shape, without the panic text: it is for the operator's log.
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error: this request hit a bug in signet; it was logged").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_costs_one_request() {
        let metrics = Arc::new(Metrics::default());
        let app = Router::new()
            .route("/boom", get(|| async { if true { panic!("boom at index 7") } else { "unreachable" } }))
            .route("/ok", get(|| async { "ok" }))
            .layer(layer(metrics.clone()));
        let request = |p: &str| axum::http::Request::get(p).body(Body::empty()).unwrap();
        let r = app.clone().oneshot(request("/boom")).await.unwrap();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["code"], 500);
        assert!(!json["message"].as_str().unwrap().contains("index 7"), "the panic text stays in the log");
        assert_eq!(metrics.panics.load(Ordering::Relaxed), 1);
        assert!(metrics.render().contains("signet_panics_total{where=\"request\"} 1"));
        assert_eq!(app.oneshot(request("/ok")).await.unwrap().status(), StatusCode::OK);
        // The panic's 500 and the 200 are both counted, under their routes.
        let text = metrics.render();
        assert!(text.contains("signet_http_responses_total{route=\"/boom\",status=\"500\"} 1\n"), "{text}");
        assert!(text.contains("signet_http_responses_total{route=\"/ok\",status=\"200\"} 1\n"), "{text}");
    }

    /// A layer that panics in `call`, before it returns a future.
    #[derive(Clone)]
    struct PanicsInCall;

    impl tower::Service<Request> for PanicsInCall {
        type Response = Response;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request) -> Self::Future {
            panic!("in call")
        }
    }

    #[tokio::test]
    async fn a_panic_before_the_future_exists_is_caught_too() {
        let metrics = Arc::new(Metrics::default());
        let service = tower::Layer::layer(&layer(metrics.clone()), PanicsInCall);
        let r = service.oneshot(axum::http::Request::get("/x").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(metrics.panics.load(Ordering::Relaxed), 1);
        assert!(metrics.render().contains("status=\"500\"} 1"));
    }
}
