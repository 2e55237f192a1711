//! The Fulcio v2 API: `signingCert`, `trustBundle`, `configuration`; and the v1 (legacy) API's
//! `signingCert` and `rootCert`, which gitsign and cosign before 2.0 call; and, in [`grpc`], the
//! same CA as the gRPC service `dev.sigstore.fulcio.v2.CA`, which sigstore-java calls.

pub mod grpc;

use tracing::Instrument;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
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
        // The CT log's answer is the log's: a busy, rotating or full log is a 503 or 507 that a
        // retry may get past, as on the Rekor APIs; no certificate was issued.
        let e = match e {
            IssueError::Ct(signet_ca::ct::CtError::Append(a)) => {
                let mut error = ApiError::from(a);
                error.message = format!("no certificate was issued: the CT log did not take its precertificate: {}", error.message);
                return error;
            }
            IssueError::Ca(e) if e.key_unavailable() => {
                return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("no certificate was issued: {e}"))
                    .with_header("retry-after", "1")
                    .because("key_unavailable");
            }
            IssueError::Ct(e @ signet_ca::ct::CtError::KeyUnavailable(_)) => {
                return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("no certificate was issued: {e}"))
                    .with_header("retry-after", "1")
                    .because("key_unavailable");
            }
            e => e,
        };
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

/// `POST /api/v1/signingCert`'s body: Fulcio's legacy API as its Go client sends it. Go writes
/// a nil byte slice as `null`, so a CSR request reads `"publicKey": {"content": null},
/// "signedEmailAddress": null`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LegacySigningCertRequest {
    #[serde(default, deserialize_with = "wire::object_opt")]
    public_key: Option<LegacyPublicKey>,
    /// Base64 of the signature over the token's email (or `sub`): the proof of possession.
    #[serde(default)]
    signed_email_address: Option<Base64>,
    /// Base64 of a PEM certificate request.
    #[serde(default)]
    certificate_signing_request: Option<Base64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct LegacyPublicKey {
    /// Informational (`ecdsa`, …): the key says what it is.
    #[serde(default)]
    #[allow(dead_code)]
    algorithm: Option<String>,
    /// Base64 of the public key: PKIX DER, or PEM.
    #[serde(default)]
    content: Option<Base64>,
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
    let issued = issue(&state, caller, &headers, request, &mut principal).await;
    answer(issued, principal, |chain| Json(json!({"signedCertificateEmbeddedSct": {"chain": {"certificates": chain}}})).into_response())
}

/// `POST /api/v1/signingCert`, Fulcio's legacy API: the token as `Authorization: Bearer`,
/// the answer `201` with the PEM chain (leaf first, its SCT embedded) as the body.
pub async fn legacy_signing_cert(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<signet_guard::Identity>>,
    headers: HeaderMap,
    Typed(request): Typed<LegacySigningCertRequest>,
) -> Response {
    let mut principal = None;
    let issued = match legacy_to_v2(request) {
        Ok(v2) => issue(&state, caller, &headers, v2, &mut principal).await,
        Err(refusal) => Err(refusal.into()),
    };
    answer(issued, principal, |chain| (StatusCode::CREATED, [(CONTENT_TYPE, PEM_CHAIN)], pem_chain(&chain)).into_response())
}

/// The v2 request a legacy one means: an empty byte field is as absent as a `null` one.
fn legacy_to_v2(request: LegacySigningCertRequest) -> Result<SigningCertRequest, ApiError> {
    let key = request.public_key.and_then(|k| k.content).filter(|c| !c.0.is_empty());
    let csr = request.certificate_signing_request.filter(|c| !c.0.is_empty());
    if key.is_some() == csr.is_some() {
        return Err(ApiError::bad_request("exactly one of publicKey.content or certificateSigningRequest is required"));
    }
    let public_key_request = match key {
        None => None,
        Some(Base64(bytes)) => {
            let content = if bytes.starts_with(b"-----BEGIN") {
                String::from_utf8(bytes)
                    .map_err(|_| ApiError::bad_request("publicKey.content: PEM that is not text").at("publicKey.content"))?
            } else {
                pem::encode("PUBLIC KEY", &bytes)
            };
            Some(PublicKeyRequest { public_key: PublicKeyField { algorithm: None, content }, proof_of_possession: request.signed_email_address })
        }
    };
    Ok(SigningCertRequest { credentials: None, public_key_request, certificate_signing_request: csr })
}

/// `GET /api/v1/rootCert`, Fulcio's legacy API: the CA's chain as PEM.
pub async fn legacy_root_cert(State(state): State<Arc<AppState>>) -> Response {
    ([(CONTENT_TYPE, PEM_CHAIN)], pem_chain(&state.ca.authority().chain_pem())).into_response()
}

const PEM_CHAIN: &str = "application/pem-certificate-chain";

/// PEM certificates one after another, as Fulcio's legacy API writes them: no blank line
/// between them, none at the end.
fn pem_chain(chain: &[String]) -> String {
    chain.iter().map(|c| c.trim()).collect::<Vec<_>>().join("\n")
}

/// The response for an issuance (`ok` shapes the chain), the refusal otherwise; either names
/// the identity for the audit log once its token verified.
fn answer(issued: Result<(Vec<String>, Did), Response>, principal: Option<Oidc>, ok: impl FnOnce(Vec<String>) -> Response) -> Response {
    let mut response = match issued {
        Ok((chain, did)) => {
            let mut response = ok(chain);
            response.extensions_mut().insert(did);
            response
        }
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
) -> Result<(Vec<String>, Did), Response> {
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
    // Its precertificate is a CT append: a rotation of the CT log waits for it, or it for one.
    let appending = state.ct.appending().await;
    let issued = state.ca.issue_for(identity, proof).instrument(issuing).await.map_err(ApiError::from)?;
    drop(appending);
    let mut chain = vec![pem::encode("CERTIFICATE", &issued.leaf_der)];
    chain.extend(state.ca.authority().chain_pem());
    let did = Did::Issued { serial: hex::encode(&issued.serial), identity: issued.identity.subject.clone(), issuer: issued.identity.issuer.clone() };
    Ok((chain, did))
}

/// `GET /api/v2/trustBundle`.
pub async fn trust_bundle(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"chains": [{"certificates": state.ca.authority().chain_pem()}]}))
}

/// `GET /api/v2/configuration`: the issuers this CA accepts tokens from, in Fulcio's
/// shape (`issuerUrl` or `wildcardIssuerUrl`, `audience`, `challengeClaim`, and the
/// type's binding: `spiffeTrustDomain` or `subjectDomain`).
pub async fn configuration(State(state): State<Arc<AppState>>) -> Json<Value> {
    use signet_core::grpc::fulcio::Issuer;
    let issuers: Vec<Value> = issuers(&state)
        .into_iter()
        .map(|i| {
            let mut issuer = match i.issuer {
                Some(Issuer::IssuerUrl(url)) => json!({"issuerUrl": url}),
                Some(Issuer::WildcardIssuerUrl(url)) => json!({"wildcardIssuerUrl": url}),
                None => json!({}),
            };
            issuer["audience"] = json!(i.audience);
            issuer["challengeClaim"] = json!(i.challenge_claim);
            issuer["issuerType"] = json!(i.issuer_type);
            // protojson leaves empty strings out.
            for (key, value) in [("spiffeTrustDomain", i.spiffe_trust_domain), ("subjectDomain", i.subject_domain)] {
                if !value.is_empty() {
                    issuer[key] = json!(value);
                }
            }
            issuer
        })
        .collect();
    Json(json!({"issuers": issuers}))
}

/// The issuers this CA accepts tokens from, configured ones first, then the meta-issuers'
/// patterns: what both APIs' `configuration` answer.
fn issuers(state: &AppState) -> Vec<signet_core::grpc::fulcio::OidcIssuer> {
    use signet_ca::oidc::IssuerKind;
    use signet_core::grpc::fulcio::{Issuer, OidcIssuer};
    let describe = |issuer: Issuer, audience: &str, kind: &IssuerKind| {
        let mut described = OidcIssuer {
            issuer: Some(issuer),
            audience: audience.to_string(),
            challenge_claim: kind.challenge_claim().to_string(),
            issuer_type: kind.type_name().to_string(),
            ..Default::default()
        };
        match kind {
            IssuerKind::Spiffe { trust_domain } => described.spiffe_trust_domain = trust_domain.clone(),
            IssuerKind::Uri { subject_domain } | IssuerKind::Username { subject_domain } => described.subject_domain = subject_domain.clone(),
            _ => {}
        }
        described
    };
    let mut issuers: Vec<OidcIssuer> =
        state.tokens.issuers().into_iter().map(|(url, aud, kind)| describe(Issuer::IssuerUrl(url.to_string()), aud, kind)).collect();
    issuers.extend(state.tokens.meta_issuers().map(|(url, aud, kind)| describe(Issuer::WildcardIssuerUrl(url.to_string()), aud, kind)));
    issuers
}
