//! The RFC 3161 timestamp API: `POST /api/v1/timestamp`, `GET /api/v1/timestamp/certchain`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use der::asn1::ObjectIdentifier;
use serde::Deserialize;
use signet_ca::tsa::{Request, Tsa, TsaError};
use signet_core::pubkey::HashAlg;
use signet_core::wire::Base64;

use super::error::ApiError;
use crate::state::AppState;

impl From<TsaError> for ApiError {
    fn from(e: TsaError) -> Self {
        let status = match e {
            // The key's token is away (unplugged, restarting): the stamp may succeed in a moment.
            TsaError::KeyUnavailable(_) => {
                return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).with_header("retry-after", "1").because("key_unavailable")
            }
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
            json_request(super::input::typed(body, state.max_body).await?)?
        }
        other => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("content type {other:?} is not supported; expected application/timestamp-query or application/json"),
            ))
        }
    };
    // One signature (~20 µs): a short job, signed where it is (signet_core::cpu).
    let span = crate::otel::span!("tsa.stamp");
    let (resp, serial) = span
        .in_scope(|| signet_core::cpu::inline(|| stamp(&state, &request)))
        .map_err(|p| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("timestamping failed unexpectedly (a bug): {}", p.0)))??;
    let mut response = ([(header::CONTENT_TYPE, "application/timestamp-reply")], resp).into_response();
    response.extensions_mut().insert(signet_guard::audit::Did::Stamped { serial: hex::encode(serial) });
    Ok(response)
}

/// One timestamp, by the TSA whose window holds its genTime ([`signet_ca::handover`]).
fn stamp(state: &AppState, request: &signet_ca::tsa::Request) -> Result<(Vec<u8>, [u8; 16]), TsaError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| TsaError::Build(e.to_string()))?;
    let tsa = state.tsa.at(now.as_secs() as i64).map_err(|e| TsaError::KeyUnavailable(e.to_string()))?;
    tsa.timestamp_at(request, now)
}

/// timestamp-authority's JSON request.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = TimestampJsonRequest)]
pub(super) struct JsonRequest {
    artifact_hash: Base64,
    #[serde(default)]
    hash_algorithm: Option<HashAlg>,
    #[serde(default)]
    nonce: Option<u64>,
    #[serde(default, rename = "tsaPolicyOID")]
    tsa_policy_oid: Option<String>,
    #[serde(default)]
    certificates: Option<bool>,
}

fn json_request(v: JsonRequest) -> Result<Request, ApiError> {
    let hash_oid = match v.hash_algorithm.unwrap_or(HashAlg::Sha256) {
        HashAlg::Sha256 => "2.16.840.1.101.3.4.2.1",
        HashAlg::Sha384 => "2.16.840.1.101.3.4.2.2",
        HashAlg::Sha512 => "2.16.840.1.101.3.4.2.3",
    };
    // The nonce as a DER INTEGER's content: big-endian, minimal, positive.
    let nonce = v.nonce.map(|n| {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count().min(7);
        let mut out = bytes[skip..].to_vec();
        if out.first().is_some_and(|b| b & 0x80 != 0) {
            out.insert(0, 0);
        }
        out
    });
    let policy = match v.tsa_policy_oid.as_deref() {
        None | Some("") => None,
        Some(p) => Some(
            ObjectIdentifier::new(p)
                .map_err(|_| ApiError::bad_request(format!("tsaPolicyOID: {p:?} is not an OID")).at("tsaPolicyOID"))?,
        ),
    };
    Ok(Request {
        hash_oid: ObjectIdentifier::new_unwrap(hash_oid),
        digest: v.artifact_hash.0,
        nonce,
        cert_req: v.certificates.unwrap_or(false),
        policy,
    })
}

pub async fn certchain(State(state): State<Arc<AppState>>) -> Response {
    ([(header::CONTENT_TYPE, "application/pem-certificate-chain")], state.tsa.now().chain_pem().concat()).into_response()
}
