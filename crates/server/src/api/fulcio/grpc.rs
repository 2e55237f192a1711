//! The CA as Fulcio's gRPC service, `dev.sigstore.fulcio.v2.CA`: `CreateSigningCertificate`,
//! `GetTrustBundle` and `GetConfiguration`, on the same port and through the same layers as the
//! REST API (sigstore-java signs through it).
//!
//! Each method reads its message, then does what its REST twin does: a certificate goes
//! through the same [`super::issue`], so token checks, scopes, limits and the audit record
//! cannot differ between the two. Refusals are HTTP statuses here, as in every handler;
//! [`crate::grpc::GrpcStatusLayer`] writes them as gRPC statuses.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use signet_core::grpc::fulcio as pb;
use signet_core::wire::Base64;

use super::{answer, issue, issuers, Credentials, PublicKeyField, PublicKeyRequest, SigningCertRequest};
use crate::api::error::ApiError;
use crate::grpc::{read_unary, unary_response};
use crate::state::AppState;

/// `CreateSigningCertificate`: a certificate for the token's identity, its SCT embedded.
/// The token is in `credentials` or, as Fulcio also reads it, in `authorization: Bearer`.
pub async fn create_signing_certificate(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<signet_guard::Identity>>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let request = match read_unary::<pb::CreateSigningCertificateRequest>(parts.version, body).await.and_then(as_rest_request) {
        Ok(request) => request,
        Err(refusal) => return refusal.into_response(),
    };
    let mut principal = None;
    let issued = issue(&state, caller, &parts.headers, request, &mut principal).await;
    answer(issued, principal, |chain| unary_response(&pb::SigningCertificate::embedded(chain)))
}

/// The request in the REST API's terms. The messages mean the same: a CSR is PEM in both
/// (protojson only adds base64 around its bytes).
fn as_rest_request(message: pb::CreateSigningCertificateRequest) -> Result<SigningCertRequest, ApiError> {
    let credentials = message.credentials.and_then(|c| c.oidc_identity_token).map(|oidc_identity_token| Credentials { oidc_identity_token });
    let (public_key_request, certificate_signing_request) = match message.key {
        Some(pb::Key::PublicKeyRequest(request)) => {
            let key = request
                .public_key
                .ok_or_else(|| ApiError::bad_request("public_key_request.public_key is required: the PEM public key to certify"))?;
            let proof_of_possession = Some(Base64(request.proof_of_possession));
            (Some(PublicKeyRequest { public_key: PublicKeyField { algorithm: None, content: key.content }, proof_of_possession }), None)
        }
        Some(pb::Key::CertificateSigningRequest(pem)) => (None, Some(Base64(pem))),
        None => (None, None),
    };
    Ok(SigningCertRequest { credentials, public_key_request, certificate_signing_request })
}

/// `GetTrustBundle`: the CA's chain (intermediate, root).
pub async fn get_trust_bundle(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Err(refusal) = read_unary::<pb::GetTrustBundleRequest>(parts.version, body).await {
        return refusal.into_response();
    }
    let chain = pb::CertificateChain { certificates: state.ca.authority().chain_pem() };
    unary_response(&pb::TrustBundle { chains: vec![chain] })
}

/// `GetConfiguration`: the issuers this CA accepts tokens from.
pub async fn get_configuration(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Err(refusal) = read_unary::<pb::GetConfigurationRequest>(parts.version, body).await {
        return refusal.into_response();
    }
    unary_response(&pb::Configuration { issuers: issuers(&state) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_means_what_its_rest_twin_means() {
        let key = pb::CreateSigningCertificateRequest {
            credentials: Some(pb::Credentials { oidc_identity_token: Some("tok".into()) }),
            key: Some(pb::Key::PublicKeyRequest(pb::PublicKeyRequest {
                public_key: Some(pb::PublicKey { algorithm: pb::ALGORITHM_ECDSA, content: "PEM".into() }),
                proof_of_possession: vec![1, 2],
            })),
        };
        let rest = as_rest_request(key).unwrap();
        assert_eq!(rest.credentials.unwrap().oidc_identity_token, "tok");
        let pkr = rest.public_key_request.unwrap();
        assert_eq!((pkr.public_key.content.as_str(), pkr.proof_of_possession.unwrap().0), ("PEM", vec![1, 2]));
        assert!(rest.certificate_signing_request.is_none());

        let csr = pb::CreateSigningCertificateRequest { credentials: None, key: Some(pb::Key::CertificateSigningRequest(b"-----BEGIN".to_vec())) };
        let rest = as_rest_request(csr).unwrap();
        assert_eq!(rest.certificate_signing_request.unwrap().0, b"-----BEGIN");
        assert!(rest.credentials.is_none(), "the token may come as authorization: Bearer");

        let keyless = pb::CreateSigningCertificateRequest {
            credentials: None,
            key: Some(pb::Key::PublicKeyRequest(pb::PublicKeyRequest { public_key: None, proof_of_possession: vec![] })),
        };
        assert!(as_rest_request(keyless).err().map(|e| e.message).unwrap_or_default().contains("public_key_request.public_key"));
    }
}
