//! gRPC on the HTTP port: unary calls read and answered as gRPC, and every refusal turned into
//! a gRPC status at the edge.
//!
//! Inside signet a gRPC call is a POST like any other. Its handler answers a refusal with an
//! HTTP status and a JSON message, as every handler does, so that the access log, the audit
//! log and the metrics read it the same way. [`GrpcStatusLayer`], outermost, rewrites such an
//! answer on a gRPC path into what a gRPC client reads: HTTP 200 with `grpc-status` and
//! `grpc-message` (a trailers-only response). That covers the refusals of every layer too: an
//! unknown token, a rate limit, a body over its limit.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Version};
use axum::response::Response;
use http_body_util::BodyExt;
use tonic::Code;

use crate::api::error::ApiError;

/// The gRPC services signet serves: the paths under which an answer is written as gRPC.
const SERVICES: [&str; 1] = [signet_core::grpc::fulcio::SERVICE];

pub const CONTENT_TYPE: &str = "application/grpc";

/// The encodings this server reads, sent with a refusal of any other.
const ACCEPT_ENCODING: &str = "grpc-accept-encoding";

/// Whether `path` is a method of a gRPC service (`/{package}.{Service}/{Method}`).
pub fn is_grpc_path(path: &str) -> bool {
    SERVICES.iter().any(|s| path.strip_prefix(s).is_some_and(|rest| rest.starts_with('/')))
}

/// The request's one message, decoded. The validation layer has already bounded and buffered
/// the body (its class is [`signet_guard::BodyClass::Grpc`]).
pub async fn read_unary<M: prost::Message + Default>(version: Version, body: Body) -> Result<M, ApiError> {
    if version < Version::HTTP_2 {
        // 426, a client's mistake (505 would log as the server's).
        return Err(ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "gRPC is served over HTTP/2: h2c with prior knowledge on a plain port, h2 by ALPN over TLS",
        )
        .because("grpc_over_http1"));
    }
    let bytes = body.collect().await.map_err(|e| ApiError::bad_request(format!("the request body could not be read: {e}")))?.to_bytes();
    decode_unary(&bytes)
}

/// A unary request body's message: the part [`read_unary`] does once the bytes are in, and
/// what the fuzzer drives.
pub fn decode_unary<M: prost::Message + Default>(body: &[u8]) -> Result<M, ApiError> {
    let message = signet_core::grpc::unary_message(body).map_err(|e| match e.is_unsupported() {
        // gRPC's answer to an encoding the server lacks: UNIMPLEMENTED, naming what it accepts.
        true => ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, e.to_string()).with_header(ACCEPT_ENCODING, "identity").because("grpc_compressed"),
        false => ApiError::bad_request(format!("not one gRPC message: {e}")).because("grpc_frame"),
    })?;
    M::decode(message).map_err(|e| {
        let name = std::any::type_name::<M>().rsplit("::").next().unwrap_or("message");
        ApiError::bad_request(format!("the message is not a valid {name} (fulcio.proto): {e}")).because("grpc_message")
    })
}

/// A unary call's answer: `message`, then the trailer `grpc-status: 0`.
pub fn unary_response(message: &impl prost::Message) -> Response {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let body = http_body_util::Full::new(bytes::Bytes::from(signet_core::grpc::frame(message)))
        .with_trailers(std::future::ready(Some(Ok::<_, Infallible>(trailers))));
    let mut response = Response::new(Body::new(body));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// The gRPC status for an HTTP refusal, after gRPC's own table for HTTP statuses where it
/// has one (400 is `INVALID_ARGUMENT` here, not `INTERNAL`: signet's 400 names a bad field).
pub fn code_for(status: StatusCode) -> Code {
    match status {
        StatusCode::BAD_REQUEST
        | StatusCode::PAYLOAD_TOO_LARGE
        | StatusCode::UNSUPPORTED_MEDIA_TYPE
        | StatusCode::UNPROCESSABLE_ENTITY
        | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::FORBIDDEN => Code::PermissionDenied,
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED | StatusCode::UPGRADE_REQUIRED | StatusCode::NOT_IMPLEMENTED => {
            Code::Unimplemented
        }
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => Code::DeadlineExceeded,
        StatusCode::CONFLICT => Code::AlreadyExists,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::INSUFFICIENT_STORAGE => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::BAD_GATEWAY => Code::Unavailable,
        StatusCode::INTERNAL_SERVER_ERROR => Code::Internal,
        _ => Code::Unknown,
    }
}

/// The most of a refusal's JSON body read for its message: signet's errors are a line or two.
const MAX_REFUSAL_BYTES: usize = 16 * 1024;

/// `response`, a refusal (any status but 200), as a gRPC trailers-only response: its message
/// from the JSON body's `message`, its other headers (`x-request-id`, `retry-after`) kept.
async fn as_grpc_status(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let code = match parts.headers.contains_key(ACCEPT_ENCODING) {
        true => Code::Unimplemented,
        false => code_for(parts.status),
    };
    let bytes = axum::body::to_bytes(body, MAX_REFUSAL_BYTES).await.unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
        .unwrap_or_else(|| parts.status.canonical_reason().unwrap_or("refused").to_string());
    let mut grpc = tonic::Status::new(code, message).into_http::<Body>();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            grpc.headers_mut().append(name.clone(), value.clone());
        }
    }
    *grpc.extensions_mut() = parts.extensions;
    grpc
}

/// Rewrites every answer but a 200 on a gRPC path as a gRPC status (see the module's doc).
/// Any other path costs one prefix comparison.
#[derive(Clone, Copy)]
pub struct GrpcStatusLayer;

impl<S> tower::Layer<S> for GrpcStatusLayer {
    type Service = GrpcStatusService<S>;

    fn layer(&self, inner: S) -> GrpcStatusService<S> {
        GrpcStatusService { inner }
    }
}

#[derive(Clone)]
pub struct GrpcStatusService<S> {
    inner: S,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S> tower::Service<Request> for GrpcStatusService<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = futures_util::future::Either<S::Future, Answer>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if !is_grpc_path(request.uri().path()) {
            return futures_util::future::Either::Left(self.inner.call(request));
        }
        let answer = self.inner.call(request);
        futures_util::future::Either::Right(Box::pin(async move {
            let response = answer.await?;
            Ok(match response.status() {
                StatusCode::OK => response,
                _ => as_grpc_status(response).await,
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;
    use signet_core::grpc::fulcio;

    #[test]
    fn only_methods_of_a_served_service_are_grpc_paths() {
        assert!(is_grpc_path(fulcio::CREATE_SIGNING_CERTIFICATE));
        assert!(is_grpc_path("/dev.sigstore.fulcio.v2.CA/NoSuchMethod"));
        assert!(!is_grpc_path("/dev.sigstore.fulcio.v2.CAX/GetTrustBundle"));
        assert!(!is_grpc_path("/dev.sigstore.fulcio.v2.CA"));
        assert!(!is_grpc_path("/api/v2/signingCert"));
    }

    #[test]
    fn refusals_map_to_the_grpc_code_a_client_acts_on() {
        assert_eq!(code_for(StatusCode::UNAUTHORIZED), Code::Unauthenticated);
        assert_eq!(code_for(StatusCode::FORBIDDEN), Code::PermissionDenied);
        assert_eq!(code_for(StatusCode::BAD_REQUEST), Code::InvalidArgument);
        assert_eq!(code_for(StatusCode::TOO_MANY_REQUESTS), Code::ResourceExhausted);
        assert_eq!(code_for(StatusCode::SERVICE_UNAVAILABLE), Code::Unavailable);
        assert_eq!(code_for(StatusCode::NOT_FOUND), Code::Unimplemented);
        assert_eq!(code_for(StatusCode::INTERNAL_SERVER_ERROR), Code::Internal);
        assert_eq!(code_for(StatusCode::IM_A_TEAPOT), Code::Unknown);
    }

    #[tokio::test]
    async fn a_refusal_becomes_a_trailers_only_status_with_its_message_and_headers() {
        let refusal = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "slow down: 10 requests/s").with_header("retry-after", "2").into_response();
        let grpc = as_grpc_status(refusal).await;
        assert_eq!(grpc.status(), StatusCode::OK);
        assert_eq!(grpc.headers()["content-type"], CONTENT_TYPE);
        assert_eq!(grpc.headers()["grpc-status"], "8");
        let status = tonic::Status::from_header_map(grpc.headers()).unwrap();
        assert_eq!(status.message(), "slow down: 10 requests/s");
        assert_eq!(grpc.headers()["retry-after"], "2");
        assert!(axum::body::to_bytes(grpc.into_body(), 1024).await.unwrap().is_empty());

        let compressed = decode_unary::<fulcio::GetTrustBundleRequest>(&[1, 0, 0, 0, 0]).unwrap_err().into_response();
        let grpc = as_grpc_status(compressed).await;
        assert_eq!(grpc.headers()["grpc-status"], "12", "UNIMPLEMENTED, as gRPC says for an encoding the server lacks");
        assert_eq!(grpc.headers()[ACCEPT_ENCODING], "identity");
    }

    #[tokio::test]
    async fn an_answer_carries_its_message_then_status_zero() {
        let response = unary_response(&fulcio::CertificateChain { certificates: vec!["x".into()] });
        assert_eq!(response.headers()["content-type"], CONTENT_TYPE);
        let collected = response.into_body().collect().await.unwrap();
        assert_eq!(collected.trailers().unwrap()["grpc-status"], "0");
        assert_eq!(collected.to_bytes().as_ref(), [0, 0, 0, 0, 3, 0x0a, 1, b'x']);
    }

    #[test]
    fn request_bodies_that_are_not_one_message_are_named() {
        let compressed = decode_unary::<fulcio::GetTrustBundleRequest>(&[1, 0, 0, 0, 0]).unwrap_err();
        assert_eq!(compressed.headers[ACCEPT_ENCODING], "identity");
        let bad = decode_unary::<fulcio::CreateSigningCertificateRequest>(&[0, 0, 0, 0, 2, 0x0a, 5]).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert!(bad.message.contains("CreateSigningCertificateRequest"), "{}", bad.message);
        assert!(decode_unary::<fulcio::GetTrustBundleRequest>(&[0, 0, 0, 0, 0]).is_ok());
    }
}
