//! signet as a witness for other logs (`[witness]`, docs/witness.md): the settings, the
//! witness they make, and `POST /add-checkpoint`.
//!
//! The route asks for no credentials: in c2sp.org/tlog-witness the log's signature on the
//! checkpoint is the request's authentication, and a witness serves logs it does not run.
//! What a request can cost is bounded: the body is at most `MAX_BODY_BYTES`, a proof at most
//! 63 hashes, and signatures are checked only with the keys configured for its origin.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use signet_core::notekey::NoteKeyType;
use signet_keys::{KeySource, NoteSigner, Pkcs11Settings};
use signet_witness::{Witness, WitnessStore};

use crate::api::error::ApiError;
use crate::config::{ConfigError, LogWitnesses, WitnessSettings};
use crate::state::AppState;

impl LogWitnesses {
    /// The log's Ed25519 note key, named `origin`, when witnesses are configured.
    pub fn note_key(&self, data_dir: &Path, pkcs11: &Pkcs11Settings, origin: &str) -> Result<Option<Arc<NoteSigner>>, crate::state::StartError> {
        if !self.enabled() {
            return Ok(None);
        }
        let source = self.note_key.clone().unwrap_or_else(|| KeySource::File(data_dir.join("keys").join("rekor-v2-note.pem")));
        let signer = NoteSigner::open(&source, pkcs11, origin, NoteKeyType::Ed25519, matches!(source, KeySource::File(_)))?;
        publish_vkey(data_dir, "rekor-v2-note.vkey", &signer)?;
        tracing::info!(vkey = %signer.vkey(), "the Rekor v2 log's checkpoints carry an Ed25519 signature for its witnesses");
        Ok(Some(Arc::new(signer)))
    }
}

/// Every log taking appends in one storage, when called: after an online rotation that
/// is the new shard, not the one the server started with.
pub type LogsTakingAppends = Arc<dyn Fn() -> Vec<signet_log::Log> + Send + Sync>;

/// The Rekor v2 log as the collector sees it, and the logs that share its storage.
struct V2Head {
    /// Whichever Rekor v2 log is active (a rotation swaps it; see [`crate::api::admin`]).
    v2: Arc<crate::shards::active::ActiveShard>,
    /// Every log taking appends in the same storage: a restored database restored them all.
    logs: LogsTakingAppends,
    data_dir: PathBuf,
}

impl signet_witness::cosigning::Head for V2Head {
    fn latest(&self) -> (u64, Arc<str>) {
        let head = self.v2.log().head();
        (head.checkpoint.size, head.note.as_str().into())
    }

    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<signet_core::hash::Hash>, signet_core::merkle::ProofError> {
        self.v2.log().consistency_proof(old, new)
    }

    /// Storage behind a witness's cosigned size is a restore (or lost committed writes): the
    /// indices between were acknowledged, and must not get a second history. (A follower's
    /// head may trail the witness; storage may not.)
    fn witness_is_ahead(&self, witness: &str, holds: u64) {
        let log = self.v2.log();
        let stored = match log.stored_size() {
            Ok(stored) => stored,
            Err(e) => return tracing::warn!(witness, holds, error = %e, "a witness holds a larger tree; cannot read the stored checkpoint to compare"),
        };
        if stored >= holds || log.appends_refused().is_some() {
            return;
        }
        let why = format!(
            "witness {witness} cosigned the Rekor v2 log at {holds} entries, but its storage holds {stored}: the storage was restored from a backup or \
             lost committed writes, and appending would give indices {stored}..{} a second history. Reads go on. Stop every instance and run \
             `signet restore --data-dir {}` with the same --storage (--force where the logs are in the data dir) to continue each log in a new shard \
             (docs/scaling.md, \"Restoring a backup\")",
            holds - 1,
            self.data_dir.display()
        );
        tracing::error!("{why}");
        for log in (self.logs)() {
            log.refuse_appends(why.clone());
        }
    }
}

/// Starts asking the `[log.witnesses]` members to cosign the Rekor v2 log's checkpoints.
/// `logs`: every log taking appends in the same storage (when a witness shows the storage
/// was restored: they are refused then).
pub fn start_cosigning(
    settings: &LogWitnesses,
    data_dir: &Path,
    v2: Arc<crate::shards::active::ActiveShard>,
    logs: LogsTakingAppends,
) -> Result<Option<Arc<signet_witness::cosigning::Cosigning>>, crate::state::StartError> {
    if !settings.enabled() {
        return Ok(None);
    }
    let endpoints = settings.endpoints()?;
    let tls = signet_tls::client_config(&signet_tls::Trust::Platform).map_err(|e| ConfigError::Invalid(format!("log.witnesses: {e}")))?;
    let fetcher = signet_tls::Fetcher::new(tls).with_timeout(std::time::Duration::from_secs(10)).with_max_bytes(64 * 1024);
    let cosigning = signet_witness::cosigning::Cosigning::start(Arc::new(V2Head { v2, logs, data_dir: data_dir.to_path_buf() }), endpoints, settings.quorum, fetcher)
        .map_err(|e| ConfigError::Invalid(format!("log.witnesses: {e}")))?;
    tracing::info!(members = settings.members.len(), quorum = settings.quorum, "the Rekor v2 log's checkpoints go to its witnesses");
    Ok(Some(cosigning))
}

/// What the witness needs of the instance it runs in.
pub struct Home {
    pub data_dir: PathBuf,
    /// Where relative paths in `[witness]` are read from: the config file's directory.
    pub base: PathBuf,
    /// The instance's host (from its public URL), which names the witness unless
    /// `witness.name` does; or why there is none.
    pub host: Result<String, ConfigError>,
    pub pkcs11: Pkcs11Settings,
    /// The log's storage: the witness keeps its state beside it.
    pub storage: signet_log::storage::StorageUrl,
}

/// The witness `[witness]` describes, its state beside the log's (SQLite in the data dir,
/// or the shared PostgreSQL database); `None` when it lists no log.
pub fn open(settings: &WitnessSettings, home: Home) -> Result<Option<Arc<Witness>>, crate::state::StartError> {
    if !settings.enabled() {
        return Ok(None);
    }
    let logs = settings.logs(&home.base)?;
    let name = match &settings.name {
        Some(n) => n.clone(),
        None => format!("{}/witness", home.host?),
    };
    if !signet_core::notekey::valid_name(&name) {
        return Err(ConfigError::Invalid(format!("witness.name {name:?} must be non-empty, without spaces or '+'")).into());
    }
    let key = settings.key.clone().unwrap_or_else(|| KeySource::File(home.data_dir.join("keys").join("witness.pem")));
    if let KeySource::File(dir) = &key {
        if let Some(dir) = dir.parent() {
            signet_core::files::ensure_private_dir(dir)
                .map_err(|source| crate::state::StartError::Io { what: format!("creating {}", dir.display()), source })?;
        }
    }
    let signer = NoteSigner::open(&key, &home.pkcs11, &name, NoteKeyType::Cosignature, matches!(key, KeySource::File(_)))?;
    publish_vkey(&home.data_dir, "witness.vkey", &signer)?;
    let store: Arc<dyn WitnessStore> = match home.storage {
        signet_log::storage::StorageUrl::Postgres(url) => {
            Arc::new(signet_witness::PostgresStore::new(&url).map_err(|e| ConfigError::Invalid(e.to_string()))?)
        }
        _ => Arc::new(
            signet_witness::SqliteStore::open(&home.data_dir.join("witness.sqlite")).map_err(|e| ConfigError::Invalid(e.to_string()))?,
        ),
    };
    let witness = Arc::new(Witness::new(signer, logs, store));
    tracing::info!(vkey = %witness.vkey(), logs = settings.logs.len(), "witness on: POST /add-checkpoint");
    let polled: Vec<_> = settings.logs.iter().filter_map(|l| l.url.as_ref().map(|u| (l.origin.clone(), u.clone()))).collect();
    if !polled.is_empty() {
        if !(1..=86_400).contains(&settings.poll_interval_secs) {
            return Err(ConfigError::Invalid(format!("witness.poll_interval_secs must be 1..=86400, got {}", settings.poll_interval_secs)).into());
        }
        let tls = signet_tls::client_config(&signet_tls::Trust::Platform).map_err(|e| ConfigError::Invalid(format!("witness: {e}")))?;
        let fetcher = signet_tls::Fetcher::new(tls).with_timeout(std::time::Duration::from_secs(10));
        for (origin, url) in polled {
            signet_witness::poll::start(witness.clone(), origin, url, std::time::Duration::from_secs(settings.poll_interval_secs), fetcher.clone());
        }
    }
    Ok(Some(witness))
}

/// `GET /witness/checkpoint?origin=…`: the latest checkpoint of that log this witness
/// cosigned since it started, with its cosignature (for logs it polls, the only way out).
pub async fn latest_cosigned(State(state): State<Arc<AppState>>, RawQuery(raw): RawQuery) -> Response {
    // The API's own query reader: its refusals are JSON errors, as everywhere else.
    let query = match crate::api::input::Query::parse(raw.as_deref()) {
        Ok(q) => q,
        Err(e) => return e.into_response(),
    };
    let Some(origin) = query.get("origin").filter(|o| !o.is_empty()) else {
        return ApiError::bad_request("the query parameter origin (the log's origin line) is required").into_response();
    };
    let Some(witness) = state.witness.as_ref() else {
        return ApiError::new(StatusCode::NOT_FOUND, "this instance is not a witness: its [witness] section lists no log").into_response();
    };
    match witness.cosigned(origin) {
        Some(note) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], note.to_string()).into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, format!("no checkpoint of {origin:?} cosigned since this witness started")).into_response(),
    }
}

/// Writes a public verifier key beside the data (`<data dir>/<file>`), for operators to hand out.
fn publish_vkey(data_dir: &Path, file: &str, signer: &NoteSigner) -> Result<(), crate::state::StartError> {
    let path = data_dir.join(file);
    signet_core::files::write_atomic(&path, format!("{}\n", signer.vkey()).as_bytes(), 0o644)
        .map_err(|source| crate::state::StartError::Io { what: format!("writing {}", path.display()), source })
}

/// `POST /add-checkpoint`: the cosignature lines; a 409 with the size held; or the spec's
/// status with signet's JSON error saying what was wrong.
pub async fn add_checkpoint(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let Some(witness) = state.witness.as_ref() else {
        return ApiError::new(StatusCode::NOT_FOUND, "this instance is not a witness: its [witness] section lists no log").into_response();
    };
    match witness.add_checkpoint(&body).await {
        Ok(lines) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], lines).into_response(),
        Err(refused) => {
            let status = StatusCode::from_u16(refused.status()).unwrap_or(StatusCode::BAD_REQUEST);
            match refused.known_size() {
                Some(size) => (status, [(header::CONTENT_TYPE, "text/x.tlog.size")], format!("{size}\n")).into_response(),
                // signet's JSON error, as every other route answers (the spec fixes only the status).
                None => ApiError::new(status, refused.to_string()).into_response(),
            }
        }
    }
}
