//! `POST /ct/v1/add-chain` and `/ct/v1/add-pre-chain` (RFC 6962 §4.1, §4.2): a CT client
//! logs a certificate or a precertificate of signet's CA, and gets its SCT once the entry is
//! durable. The chain is checked by `signet_ca::ct::submission`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use signet_ca::ct::submission::{self, OwnCa, SubmissionError, Submitted};
use signet_ca::ct::{CtError, LeafEntry};
use signet_core::wire::{self, Base64};
use signet_guard::audit::Did;

use crate::api::error::ApiError;
use crate::api::input::Typed;
use crate::state::AppState;

/// The body of both (§4.1, §4.2): the chain, leaf first, each certificate base64 DER.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddChainRequest {
    #[serde(default, deserialize_with = "wire::list")]
    pub chain: Vec<Base64>,
}

pub async fn add_chain(state: State<Arc<AppState>>, request: Typed<AddChainRequest>) -> Result<Response, ApiError> {
    add(state, request, Submitted::Certificate).await
}

pub async fn add_pre_chain(state: State<Arc<AppState>>, request: Typed<AddChainRequest>) -> Result<Response, ApiError> {
    add(state, request, Submitted::Precertificate).await
}

async fn add(State(state): State<Arc<AppState>>, Typed(request): Typed<AddChainRequest>, submitted: Submitted) -> Result<Response, ApiError> {
    let chain: Vec<Vec<u8>> = request.chain.into_iter().map(|Base64(der)| der).collect();
    let authority = state.ca.authority();
    let checked = submission::check(&chain, submitted, OwnCa { root: authority.root_der(), intermediate: authority.intermediate_der() })
        .map_err(|e| match e {
            SubmissionError::Chain { at, why } => ApiError::bad_request(why).at(at).because("invalid_field"),
            e @ SubmissionError::OwnRoot(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        })?;
    // Held until answered: a rotation of the CT log waits for this append, or it for one.
    let _appending = state.ct.appending().await;
    let _admitted = crate::api::input::admit(&state.ct.log())?;
    let entry = match submitted {
        Submitted::Certificate => LeafEntry::X509(&checked.entry),
        Submitted::Precertificate => LeafEntry::Precert { tbs: &checked.entry },
    };
    let logged = state.ca.ct().submit_entry(entry, &checked.issuer_key_hash, checked.extra).await.map_err(refused)?;
    let mut response = (StatusCode::OK, Json(logged.sct.to_json())).into_response();
    response.extensions_mut().insert(Did::Appended { log: "ct".into(), index: logged.index, entry_hash: hex::encode(logged.leaf_hash) });
    Ok(response)
}

/// The CT log's refusal: a busy, rotating or full log (503, 507) and a key that cannot sign
/// now (503) are worth a retry; nothing was logged.
fn refused(e: CtError) -> ApiError {
    match e {
        CtError::Append(a) => ApiError::from(a),
        CtError::KeyUnavailable(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("nothing was logged: {e}"))
            .with_header("retry-after", "1")
            .because("key_unavailable"),
        CtError::TooLarge(_) => ApiError::bad_request(e.to_string()).at("chain[0]").because("invalid_field"),
        CtError::Sign | CtError::Panicked(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("nothing was logged: {e}")),
    }
}
