//! `/api/admin/…`: operator views. The router puts these behind their `admin.*` permission
//! always (`signet_guard::authn::Scope::Admin`); handlers can assume an allowed caller.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::input::Typed;
use crate::state::AppState;

/// `GET /api/admin/tokens`: names, ids, roles, creation, expiry and revocation of every API
/// token; never a token or its hash.
pub async fn tokens(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(json!({"tokens": state.guard.tokens()}))
}

/// `GET /api/admin/roles`: the role table in force, each role with the permissions it grants.
pub async fn roles(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(roles_json(&state.guard.roles()))
}

/// The role table as `signet admin roles --json` and `GET /api/admin/roles` show it.
pub fn roles_json(roles: &signet_guard::Roles) -> Value {
    let table: Vec<Value> = roles
        .table()
        .into_iter()
        .map(|(role, perms)| json!({"role": role.name(), "permissions": perms.iter().map(|p| p.name()).collect::<Vec<_>>()}))
        .collect();
    json!({"roles": table})
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RotateLogRequest)]
pub struct RotateRequest {
    /// `"rekor-v1"`, `"rekor-v2"` or `"ct"`.
    log: String,
    /// Only make the next shard's key and publish it in the trust documents (and TUF) beside
    /// the active one; the rotation, later, takes it (`crate::shards::prepared`).
    #[serde(default)]
    prepare: bool,
}

/// `POST /api/admin/log/rotate` with `{"log": "rekor-v1"}` (or `rekor-v2`, `ct`): rotates
/// the log online (see [`crate::shards`]) and answers what `signet admin log rotate` prints.
/// The trust documents served from then on list the new key.
pub async fn rotate_log(State(state): State<Arc<AppState>>, Typed(request): Typed<RotateRequest>) -> Result<Json<Value>, ApiError> {
    let kind = crate::shards::Kind::parse(&request.log)
        .ok_or_else(|| ApiError::bad_request(crate::shards::ShardError::UnknownLog { name: request.log.clone() }.to_string()).at("log"))?;
    if request.prepare {
        return prepare_log(state, kind).await;
    }
    if kind == crate::shards::Kind::RekorV2 && state.cosigning.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the Rekor v2 log's checkpoints go to witnesses ([log.witnesses]), which know the log by its key: a new key is a new log to them, and they would refuse it. Give them the new log first, then rotate offline (signet admin log rotate --log rekor-v2 --data-dir DIR)",
        ));
    }
    // A task of its own: a client that hangs up must not leave the log half rotated.
    let rotating = state.clone();
    let r = tokio::spawn(async move {
        match kind {
            crate::shards::Kind::RekorV1 => rotating.rekor_v1.rotate().await,
            crate::shards::Kind::RekorV2 => rotating.rekor_v2.rotate().await,
            crate::shards::Kind::Ct => rotating.ct.rotate().await,
        }
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the rotation failed unexpectedly: {e}")))??;
    super::rekor_v1::republish(&state).await;
    Ok(Json(crate::shards::rotation_report(&r)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReindexLogRequest)]
pub struct ReindexRequest {
    /// `"rekor-v1"`, the one log searched by identity and key (the default).
    #[serde(default)]
    log: Option<String>,
}

/// `POST /api/admin/log/reindex`: starts giving the Rekor v1 entries logged before search by
/// identity and key existed those keys, in the background (see
/// [`super::rekor_v1::Reindexing`]), and answers 202 with the job's status; a run already
/// going is not started twice.
pub async fn reindex_log(State(state): State<Arc<AppState>>, Typed(request): Typed<ReindexRequest>) -> Result<(StatusCode, Json<super::rekor_v1::ReindexStatus>), ApiError> {
    match request.log.as_deref().unwrap_or("rekor-v1") {
        "rekor-v1" => {}
        log @ ("rekor-v2" | "ct") => {
            return Err(ApiError::bad_request(format!(
                "the {log} log has no search by identity or key to backfill; only rekor-v1 has"
            ))
            .at("log"))
        }
        other => return Err(ApiError::bad_request(format!("unknown log {other:?}; expected \"rekor-v1\"")).at("log")),
    }
    let shards = state.rekor_v1.current().logs().collect();
    Ok((StatusCode::ACCEPTED, Json(state.rekor_v1.reindexing().start(shards))))
}

/// `GET /api/admin/log/reindex`: how far the reindex on this instance is.
pub async fn reindex_status(State(state): State<Arc<AppState>>) -> Json<super::rekor_v1::ReindexStatus> {
    Json(state.rekor_v1.reindexing().status())
}

/// `{"log": …, "prepare": true}`: the next shard's key, made and published now.
async fn prepare_log(state: Arc<AppState>, kind: crate::shards::Kind) -> Result<Json<Value>, ApiError> {
    let list = match kind {
        crate::shards::Kind::RekorV1 => state.rekor_v1.registry(),
        crate::shards::Kind::RekorV2 => state.rekor_v2.current().registry.clone(),
        crate::shards::Kind::Ct => state.ct.current().registry.clone(),
    };
    let opener = state.rekor_v1.opener().clone();
    let preparing = tokio::spawn(async move { crate::shards::prepared::prepare_online(kind, &opener, list).await });
    let prepared = preparing
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("preparing the key failed unexpectedly: {e}")))?
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("preparing the {} log's next key: {e}", kind.title())))?;
    super::rekor_v1::republish(&state).await;
    let from = jiff::Timestamp::from_second(prepared.from).map(|t| t.to_string()).unwrap_or_default();
    Ok(Json(json!({"log": kind.cli_name(), "prepared": {"shard": prepared.number, "publicKey": prepared.spki, "publishedFrom": from}})))
}

/// `GET /api/admin/bans`: the bans in force on this instance (its own, and the store's).
pub async fn bans(State(state): State<Arc<AppState>>) -> Json<Value> {
    let now = signet_guard::store::now();
    let bans: Vec<Value> = state
        .guard
        .bans()
        .into_iter()
        .map(|(client, until)| json!({"client": client.to_string(), "until": until, "seconds_left": until.saturating_sub(now)}))
        .collect();
    Json(json!({"bans": bans}))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = LiftBanRequest)]
pub struct LiftRequest {
    /// `ip:ADDR`, `ip:ADDR/LEN`, `token:ID` or `oidc:HEX`, as `GET /api/admin/bans` lists it, or a bare address.
    client: String,
}

/// `POST /api/admin/bans/lift` with `{"client": "ip:203.0.113.7"}` (as `bans` lists it, or a
/// bare address): lifted here at once, in the store for every instance that shares it, and
/// in Redis when limits are shared there.
pub async fn lift_ban(State(state): State<Arc<AppState>>, Typed(request): Typed<LiftRequest>) -> Result<Json<Value>, ApiError> {
    let client: signet_guard::client::ClientKey = request.client.parse().map_err(|why| ApiError::bad_request(format!("client: {why}")).at("client"))?;
    let here = state.guard.lift(&client).map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why.to_string()))?;
    let (redis, ca_file) = (state.guard.config.redis.url.clone(), state.guard.config.redis.ca_file.clone());
    let shared = match state.guard.shared.is_some() {
        false => None,
        true => Some(
            tokio::task::spawn_blocking(move || signet_guard::shared::SharedLimits::lift(&redis, ca_file.as_deref(), &client))
                .await
                .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("lifting in Redis failed unexpectedly: {e}")))?
                .map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("lifted here, but not in Redis: {why}")))?,
        ),
    };
    Ok(Json(json!({"client": client.to_string(), "was_banned_here": here, "was_banned_in_redis": shared})))
}

/// `GET /api/admin/audit/verify`: `signet audit verify` on this instance's audit log.
/// 200 with the record count and head when the chain holds (and each anchor names a record
/// and its hash; their log entries are `signet audit verify`'s to check); 409 naming the
/// first record or anchor that does not; 404 when the audit log is off.
pub async fn verify_audit(State(state): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let Some(log) = state.audit.clone() else {
        return Err(ApiError::not_found("the audit log is off here ([guard.audit] enabled = false)"));
    };
    // What the writer holds is written first, so that the check covers every answered request.
    let checked = tokio::task::spawn_blocking(move || {
        log.flush();
        signet_guard::audit::verify(log.place())
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the check failed unexpectedly: {e}")))?;
    match checked {
        Ok(v) => Ok(Json(json!({
            "ok": true,
            "records": v.records,
            "first": v.start + 1,
            "head": hex(&v.head),
            "anchors": v.anchors.len(),
            "last_anchor": v.anchors.last().map(|a| json!({"seq": a.seq, "log_index": a.log_index})),
            "unanchored": v.unanchored(),
        }))),
        Err(e @ signet_guard::audit::VerifyError::Broken { .. }) => Err(ApiError::new(StatusCode::CONFLICT, e.to_string())),
        Err(e) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
