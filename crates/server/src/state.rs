//! What every handler reads: the logs, the CA, the TSA, the trust documents and the guard of
//! one running instance. [`crate::start`] opens it.

use std::sync::Arc;

use signet_keys::Signer;
use signet_log::Log;

use signet_ca::issue::Issuer;
use signet_ca::oidc::dev::DevIssuer;
use signet_ca::oidc::TokenVerifier;
use signet_ca::tsa::Tsa;

use crate::shards::rekor_v1::RekorV1;
use crate::shards::active::ActiveShard;

pub use crate::error::StartError;

pub struct AppState {
    pub rekor_v1: RekorV1,
    pub rekor_v2: Arc<ActiveShard>,
    /// The CT log; the CA ([`AppState::ca`]) signs SCTs with whichever is active.
    pub ct: Arc<ActiveShard>,
    pub max_body: usize,
    /// The validation layer's bounds (`[limits]`).
    pub input_limits: signet_guard::InputLimits,
    /// Largest entry body either Rekor log admits (`limits.max_entry_bytes`).
    pub max_entry: usize,
    /// Largest intoto attestation kept (`limits.max_attestation_bytes`).
    pub max_attestation: usize,
    /// The development OIDC issuer; only under `--dev`.
    pub dev_issuer: Option<Arc<DevIssuer>>,
    /// Verifies identity tokens for the CA.
    pub tokens: Arc<TokenVerifier>,
    /// The CA with its CT log.
    pub ca: Issuer,
    /// The RFC 3161 timestamp authority.
    /// The RFC 3161 timestamp authority, and its successor once a rotation is scheduled
    /// ([`crate::rotate::scheduled`]).
    pub tsa: signet_ca::handover::Handover<Tsa>,
    /// The trust documents' inputs, read at startup and again after a shard rotation.
    pub trust: parking_lot::RwLock<Arc<signet_trust::root::Instance>>,
    /// The TUF repository that publishes them, unless `[tuf] enabled = false`.
    pub tuf: Option<Arc<crate::tuf::Tuf>>,
    /// Request and refusal counters for `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Rate limits, bans and API tokens, shared with `signet admin` through the data dir (or,
    /// on PostgreSQL, the database).
    pub guard: Arc<signet_guard::Guard>,
    /// The audit log, unless `[guard.audit] enabled = false`.
    pub audit: Option<Arc<signet_guard::audit::AuditLog>>,
    /// The key that signs the audit chain's anchors, when the log is on ([`crate::anchor`]).
    pub audit_key: Option<Arc<Signer>>,
    /// Starting, ready or shutting down (`/readyz`).
    pub lifecycle: Arc<crate::lifecycle::Lifecycle>,
    /// Where the explorer finds the lab's HTML reports (`<data dir>/reports`).
    pub reports_dir: std::path::PathBuf,
    /// signet as a witness for other logs, when `[witness]` lists some.
    pub witness: Option<Arc<signet_witness::Witness>>,
    /// The monitor's counters, when `[monitor]` is on.
    pub monitor_metrics: Option<Arc<signet_witness::monitor::metrics::Metrics>>,
    /// The Rekor v2 log's witnesses and their cosignatures, when `[log.witnesses]` lists some.
    pub cosigning: Option<Arc<signet_witness::cosigning::Cosigning>>,
    /// What this instance served of each log ([`crate::watermark`]).
    pub watermarks: Arc<crate::watermark::Keeper>,
}

impl AppState {
    /// The logs that take appends now: each kind's active shard.
    pub fn logs_taking_appends(&self) -> Vec<Log> {
        vec![self.rekor_v1.log(), self.rekor_v2.log(), self.ct.log()]
    }
}
