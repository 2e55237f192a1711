//! The Fulcio v2 API: `signingCert`, `trustBundle`, `configuration`.

use tracing::Instrument;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use signet_guard::audit::{Did, Oidc};
use serde::Deserialize;
use serde_json::{json, Value};
use signet_ca::issue::{IssueError, KeyProof};
use signet_core::pem;
use signet_core::wire::{self, Base64};

use super::error::ApiError;
use super::input::Typed;
use crate::state::AppState;

impl From<IssueError> for ApiError {
    fn from(e: IssueError) -> Self {
        let (status, reason) = match &e {
            IssueError::Token(t) => (StatusCode::UNAUTHORIZED, t.reason()),
            IssueError::Key(_) => (StatusCode::BAD_REQUEST, "key_unsupported"),
            IssueError::Proof(_) => (StatusCode::BAD_REQUEST, "proof_of_possession"),
            IssueError::Csr(_) => (StatusCode::BAD_REQUEST, "csr_invalid"),
            IssueError::Identity(_) => (StatusCode::BAD_REQUEST, "identity_not_certifiable"),
            IssueError::NotPermitted(_) => (StatusCode::FORBIDDEN, "token_out_of_scope"),
            IssueError::Ct(_) | IssueError::Ca(_) | IssueError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        let error = ApiError::new(status, e.to_string());
        if status.is_client_error() { error.because(reason) } else { error }
    }
}

/// `POST /api/v2/signingCert`'s body, as Fulcio's protojson reads it.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SigningCertRequest {
    #[serde(default, deserialize_with = "wire::object_opt")]
    credentials: Option<Credentials>,
    #[serde(default, deserialize_with = "wire::object_opt")]
    public_key_request: Option<PublicKeyRequest>,
    /// Base64 of a PEM certificate request.
    #[serde(default)]
    certificate_signing_request: Option<Base64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Credentials {
    oidc_identity_token: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PublicKeyRequest {
    #[serde(deserialize_with = "wire::object")]
    public_key: PublicKeyField,
    #[serde(default)]
    proof_of_possession: Option<Base64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = PublicKey)]
struct PublicKeyField {
    /// Informational: the PEM says what the key is. protojson writes an enum by name; its
    /// number is accepted too.
    #[serde(default)]
    #[allow(dead_code)]
    algorithm: Option<Algorithm>,
    /// A PEM public key.
    content: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
#[schema(as = PublicKeyAlgorithm)]
enum Algorithm {
    Name(#[allow(dead_code)] String),
    Number(#[allow(dead_code)] u32),
}

/// `POST /api/v2/signingCert`. Token in the body (`credentials.oidcIdentityToken`) or as
/// `Authorization: Bearer`; the key as `publicKeyRequest` or `certificateSigningRequest`.
/// Once the token verifies, its identity is the principal: the guard's limits and bans apply
/// to it ([`signet_guard::principal`]), and a caller that authenticated with a scoped API
/// token gets certificates only for the identities its scope allows. The answer, refused or
/// not, names the identity for the audit log.
pub async fn signing_cert(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<signet_guard::Identity>>,
    headers: HeaderMap,
    Typed(request): Typed<SigningCertRequest>,
) -> Response {
    let mut principal = None;
    let mut response = match issue(&state, caller, &headers, request, &mut principal).await {
        Ok(response) => response,
        Err(refusal) => refusal,
    };
    if let Some(oidc) = principal {
        response.extensions_mut().insert(oidc);
    }
    response
}

async fn issue(
    state: &AppState,
    caller: Option<Extension<signet_guard::Identity>>,
    headers: &HeaderMap,
    request: SigningCertRequest,
    principal: &mut Option<Oidc>,
) -> Result<Response, Response> {
    let bearer = signet_guard::client::bearer_in(headers);
    let token = (request.credentials.as_ref().map(|c| c.oidc_identity_token.as_str()))
        // A signet API token in the header is the guard's; the OIDC token is then in the body.
        .or(bearer.filter(|b| !b.starts_with(signet_guard::token::PREFIX)))
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "no identity token: send credentials.oidcIdentityToken or Authorization: Bearer"))?;

    let proof = match (request.public_key_request, request.certificate_signing_request) {
        (Some(pkr), None) => KeyProof::PublicKey {
            pem: pkr.public_key.content,
            proof_of_possession: pkr.proof_of_possession.map(|p| p.0).unwrap_or_default(),
        },
        (None, Some(csr)) => KeyProof::Csr {
            pem: String::from_utf8(csr.0)
                .map_err(|_| ApiError::bad_request("certificateSigningRequest: does not decode to PEM text").at("certificateSigningRequest"))?,
        },
        _ => return Err(ApiError::bad_request("exactly one of publicKeyRequest or certificateSigningRequest is required").into()),
    };
    let identity = state.ca.identify(token).instrument(crate::otel::span!("oidc.verify")).await.map_err(ApiError::from)?;
    *principal = Some(Oidc { issuer: identity.issuer.clone(), subject: identity.subject.clone() });
    state.guard.admit_identity(&identity.issuer, &identity.subject).await?;
    if let Some(Extension(who)) = caller.filter(|Extension(who)| !who.scope.identities.is_empty()) {
        who.scope
            .admits_identity(&identity.subject)
            .map_err(|why| ApiError::from(IssueError::NotPermitted(format!("{} is out of scope: {why}", who.principal))))?;
    }
    let issuing = crate::otel::span!("ca.issue");
    let issued = state.ca.issue_for(identity, proof).instrument(issuing).await.map_err(ApiError::from)?;
    let mut chain = vec![pem::encode("CERTIFICATE", &issued.leaf_der)];
    chain.extend(state.ca.authority.chain_pem());
    let mut response = Json(json!({"signedCertificateEmbeddedSct": {"chain": {"certificates": chain}}})).into_response();
    response.extensions_mut().insert(Did::Issued {
        serial: hex::encode(&issued.serial),
        identity: issued.identity.subject.clone(),
        issuer: issued.identity.issuer.clone(),
    });
    Ok(response)
}

/// `GET /api/v2/trustBundle`.
pub async fn trust_bundle(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"chains": [{"certificates": state.ca.authority.chain_pem()}]}))
}

/// `GET /api/v2/configuration`: the issuers this CA accepts tokens from.
pub async fn configuration(State(state): State<Arc<AppState>>) -> Json<Value> {
    let issuers: Vec<Value> = state
        .tokens
        .issuers()
        .map(|i| json!({"issuerUrl": i, "audience": "sigstore", "challengeClaim": "email"}))
        .collect();
    Json(json!({"issuers": issuers}))
}
