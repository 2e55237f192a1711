//! The panic boundary: a bug reached by one request costs that request, not the server.
//!
//! tower-http's `CatchPanicLayer` turns a panic in a handler or in a layer inside it into a
//! response. Ours is the usual JSON 500, and the panic is logged (its message, which names
//! signet's own code, never request secrets) and counted in `/metrics`.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Response, StatusCode};
use axum::response::IntoResponse;
use tower_http::catch_panic::{CatchPanicLayer, ResponseForPanic};

use crate::api::error::ApiError;
use crate::metrics::Metrics;

pub fn layer(metrics: Arc<Metrics>) -> CatchPanicLayer<Answer> {
    CatchPanicLayer::custom(Answer(metrics))
}

#[derive(Clone)]
pub struct Answer(Arc<Metrics>);

impl ResponseForPanic for Answer {
    type ResponseBody = Body;

    fn response_for_panic(&mut self, err: Box<dyn Any + Send + 'static>) -> Response<Body> {
        self.0.panics.fetch_add(1, Ordering::Relaxed);
        let message = signet_core::cpu::panic_text(&*err);
        tracing::error!(panic = %message, "a request handler panicked; the request got a 500 and the server goes on");
        // The JSON error shape, without the panic text: it is for the operator's log.
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error: this request hit a bug in signet; it was logged").into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    }
}
