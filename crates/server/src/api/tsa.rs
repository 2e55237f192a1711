//! The RFC 3161 timestamp API: `POST /api/v1/timestamp`, `GET /api/v1/timestamp/certchain`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use der::asn1::ObjectIdentifier;
use serde_json::Value;
use signet_ca::tsa::{Request, Tsa, TsaError};
use signet_core::b64;

use super::error::ApiError;
use crate::state::AppState;

impl From<TsaError> for ApiError {
    fn from(e: TsaError) -> Self {
        let status = match e {
            TsaError::Ca(_) | TsaError::Build(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.to_string()).because("timestamp_request")
    }
}

/// Takes a DER `application/timestamp-query`, or the JSON form of sigstore's
/// timestamp-authority: `{artifactHash, hashAlgorithm, nonce, certificates, tsaPolicyOID}`.
pub async fn timestamp(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let request = match mime.as_str() {
        "application/timestamp-query" => {
            let bytes = axum::body::to_bytes(body, state.max_body).await.map_err(|_| {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body is larger than the {}-byte limit", state.max_body))
            })?;
            Tsa::parse_der(&bytes)?
        }
        "application/json" => {
            let v = super::input::json_body(body, state.max_body).await?;
            json_request(&v)?
        }
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("content type {other:?} is not supported; expected application/timestamp-query or application/json"),
            ))
        }
    };
    // The signature runs on the bounded CPU pool, off the async runtime.
    let signer = state.clone();
    let (resp, serial) = signet_core::cpu::run(move || signer.tsa.timestamp_with_serial(&request))
        .await
        .map_err(|p| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("timestamping failed unexpectedly (a bug): {}", p.0)))??;
    let mut response = ([(header::CONTENT_TYPE, "application/timestamp-reply")], resp).into_response();
    response.extensions_mut().insert(signet_guard::audit::Did::Stamped { serial: hex::encode(serial) });
    Ok(response)
}

fn json_request(v: &Value) -> Result<Request, ApiError> {
    let hash = v
        .get("artifactHash")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("artifactHash (base64 digest) is required"))?;
    let digest = b64::decode(hash).map_err(|e| ApiError::bad_request(format!("artifactHash is not base64: {e}")))?;
    let hash_oid = match v.get("hashAlgorithm").and_then(Value::as_str).unwrap_or("sha256") {
        "sha256" => "2.16.840.1.101.3.4.2.1",
        "sha384" => "2.16.840.1.101.3.4.2.2",
        "sha512" => "2.16.840.1.101.3.4.2.3",
        other => return Err(ApiError::bad_request(format!("hashAlgorithm {other:?} is not accepted; expected sha256, sha384 or sha512"))),
    };
    let nonce = match v.get("nonce") {
        None | Some(Value::Null) => None,
        Some(n) => {
            let n = n.as_u64().ok_or_else(|| ApiError::bad_request("nonce must be a non-negative integer"))?;
            let bytes = n.to_be_bytes();
            let skip = bytes.iter().take_while(|b| **b == 0).count().min(7);
            let mut out = bytes[skip..].to_vec();
            if out[0] & 0x80 != 0 {
                out.insert(0, 0);
            }
            Some(out)
        }
    };
    let policy = match v.get("tsaPolicyOID").and_then(Value::as_str) {
        None | Some("") => None,
        Some(p) => Some(ObjectIdentifier::new(p).map_err(|_| ApiError::bad_request(format!("tsaPolicyOID {p:?} is not an OID")))?),
    };
    Ok(Request {
        hash_oid: ObjectIdentifier::new_unwrap(hash_oid),
        digest,
        nonce,
        cert_req: v.get("certificates").and_then(Value::as_bool).unwrap_or(false),
        policy,
    })
}

pub async fn certchain(State(state): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "application/pem-certificate-chain")], state.tsa.chain_pem().concat()).into_response()
}
