//! [`Guard`]: what the layers read on every request, kept in step with `guard.sqlite`.
//!
//! The request path never touches SQLite. It reads an in-memory snapshot of the tokens and
//! bans. One thread, `guard-store`, owns the database connection and every 200 ms:
//! 1. writes the bans this server imposed since the last tick (so `admin ban list` sees them);
//! 2. polls `PRAGMA data_version`, which changes only when another process committed
//!    (`signet admin token create|revoke`, `ban lift`), and only then rereads both tables.
//!
//! So an admin change reaches a running server within about 200 ms, and the steady state
//! costs one cheap pragma five times a second.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::identity::{Identity, Principal};
use crate::mtls::ClientCertificate;
use crate::ban::{Bans, Strikes};
use crate::client::ClientKey;
use crate::config::GuardConfig;
use crate::limiters::Limiters;
use crate::roles::{Role, Roles};
use crate::store::{self, BanRecord, Store, StoreError, TokenRecord};
use crate::token::{self, TokenId};

/// How often the store thread looks for other processes' changes.
pub const POLL: Duration = Duration::from_millis(200);

pub struct Guard {
    pub config: GuardConfig,
    /// How a request's client is keyed (prefixes, trusted proxies).
    pub keying: crate::client::Keying,
    tokens: RwLock<HashMap<TokenId, TokenRecord>>,
    /// The role table; replaced whole when `[guard.roles]` is reread.
    roles: RwLock<Arc<Roles>>,
    pub(crate) bans: Bans,
    strikes: Strikes,
    pub(crate) limiters: Option<Limiters>,
    /// Set by `[guard.redis]`: limits and bans shared by every instance.
    pub shared: Option<Arc<crate::shared::SharedLimits>>,
    to_store: mpsc::SyncSender<StoreOp>,
    sweeps: std::sync::atomic::AtomicU64,
}

/// What the store thread writes for the request path.
enum StoreOp {
    Ban(BanRecord),
    Lift(ClientKey),
}

/// Bans waiting to be written to the store.
const BAN_QUEUE: usize = 4096;

/// Why a presented API token was not accepted. The messages are safe to return: none
/// reveals anything to a caller who does not already hold the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the API token is not valid")]
    Invalid,
    #[error("the API token has expired")]
    Expired,
    #[error("the API token has been revoked")]
    Revoked,
}

impl Guard {
    /// Opens the store under `data_dir`, loads the snapshot and starts the store thread.
    pub fn open(data_dir: &Path, config: GuardConfig) -> Result<Arc<Guard>, StoreError> {
        Self::with_store(Store::open(data_dir)?, config)
    }

    /// [`Guard::open`] on a store of the caller's choosing (PostgreSQL, shared by instances).
    pub fn with_store(store: Store, config: GuardConfig) -> Result<Arc<Guard>, StoreError> {
        // Bounded: a flood of bans waits in memory (they are in force there already), not
        // in an ever-growing queue to the store.
        let (to_store, pending) = mpsc::sync_channel(BAN_QUEUE);
        let keying = config.keying().map_err(StoreError::Config)?;
        let roles = Roles::with_custom(&config.roles)?;
        let shared = match config.rate_limit.enabled && !config.redis.url.is_empty() {
            true => Some(Arc::new(
                crate::shared::SharedLimits::new(&config.redis, &config.rate_limit, &config.ban).map_err(|e| StoreError::Config(e.into()))?,
            )),
            false => None,
        };
        let guard = Arc::new(Guard {
            keying,
            shared,
            limiters: config.rate_limit.enabled.then(|| Limiters::new(&config.rate_limit, config.max_clients)),
            strikes: Strikes::new(config.ban.clone(), config.max_clients),
            config,
            tokens: RwLock::new(HashMap::new()),
            roles: RwLock::new(Arc::new(roles)),
            bans: Bans::default(),
            to_store,
            sweeps: Default::default(),
        });
        guard.reload(&store)?;
        let weak = Arc::downgrade(&guard);
        std::thread::Builder::new()
            .name("guard-store".into())
            .spawn(move || keep_in_step(weak, store, pending))
            .map_err(|source| StoreError::Io { path: "guard-store thread".into(), source })?;
        Ok(guard)
    }

    fn reload(&self, store: &Store) -> Result<(), StoreError> {
        let tokens = store.tokens()?.into_iter().map(|t| (t.id, t)).collect();
        *self.tokens.write() = tokens;
        self.bans.replace(&store.bans()?);
        Ok(())
    }

    /// Checks a presented `sgt_…` token. `None`: not a signet token at all (e.g. an OIDC
    /// identity token meant for the CA), which is none of the guard's business.
    pub fn authenticate(&self, presented: &str) -> Option<Result<Identity, AuthError>> {
        let id = token::claimed_id(presented)?;
        let tokens = self.tokens.read();
        let Some(record) = tokens.get(&id) else {
            // Hash anyway, so an unknown id costs what a wrong secret does.
            let _ = token::hash(presented);
            return Some(Err(AuthError::Invalid));
        };
        if !token::matches(presented, &record.hash) {
            return Some(Err(AuthError::Invalid));
        }
        if record.revoked.is_some() {
            return Some(Err(AuthError::Revoked));
        }
        if record.expires.is_some_and(|e| store::now() >= e) {
            return Some(Err(AuthError::Expired));
        }
        let permissions = self.roles.read().permissions(&record.role);
        Some(Ok(Identity { principal: Principal::Token(id), role: record.role.clone(), permissions, scope: record.scope.clone() }))
    }

    /// The identity a verified client certificate gives, when `[guard.mtls] roles` maps one
    /// of its SANs; its scope is unlimited, as a role is.
    pub fn certificate_identity(&self, certificate: &ClientCertificate) -> Option<Identity> {
        let (san, role) = self.config.mtls.principal(certificate)?;
        let role: Role = role.parse().ok()?;
        let permissions = self.roles.read().permissions(&role);
        Some(Identity { principal: Principal::Certificate(san.into()), role, permissions, scope: Default::default() })
    }

    /// The role table in force.
    pub fn roles(&self) -> Arc<Roles> {
        self.roles.read().clone()
    }

    /// Puts a new role table in force from the next request on (tokens keep their role
    /// names; what a name grants is looked up per request).
    pub fn set_roles(&self, roles: Roles) {
        *self.roles.write() = Arc::new(roles);
    }

    /// Counts a refusal of `client`; bans it when that crosses the threshold.
    pub fn strike(&self, client: ClientKey, why: &str) {
        if let Some(ban) = self.strikes.strike(client, store::now(), why) {
            tracing::warn!(client = %ban.client, until = ban.until, reason = %ban.reason, "client banned");
            self.bans.insert(ban.client, ban.until);
            if let (Some(shared), Ok(rt)) = (&self.shared, tokio::runtime::Handle::try_current()) {
                let (shared, client, until, now) = (shared.clone(), ban.client, ban.until, store::now());
                rt.spawn(async move { shared.publish_ban(client, until, now).await });
            }
            // A full queue drops the store's copy only: the ban is in force in memory.
            let _ = self.to_store.try_send(StoreOp::Ban(ban));
        }
    }

    pub fn banned_until(&self, client: &ClientKey) -> Option<u64> {
        self.bans.banned_until(client, store::now())
    }

    /// How many bans this instance holds (for `/metrics`).
    pub fn active_bans(&self) -> usize {
        self.bans.list(store::now()).len()
    }

    /// The bans in force on this instance (its own and the store's): for `GET /api/admin/bans`.
    pub fn bans(&self) -> Vec<(ClientKey, u64)> {
        self.bans.list(store::now())
    }

    /// Lifts `client`'s ban here at once, and in the store (so for every instance that
    /// shares it) within a moment. Whether this instance had it banned; `Err` when the
    /// store's queue is full, and the store keeps the ban.
    pub fn lift(&self, client: &ClientKey) -> Result<bool, StoreError> {
        self.to_store.try_send(StoreOp::Lift(*client)).map_err(|_| StoreError::Busy).map(|()| self.bans.lift(client))
    }

    /// The tokens, without their hashes' use to anyone: for `GET /api/admin/tokens`.
    pub fn tokens(&self) -> Vec<TokenRecord> {
        let mut all: Vec<TokenRecord> = self.tokens.read().values().cloned().collect();
        all.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
        all
    }
}

fn keep_in_step(guard: Weak<Guard>, store: Store, pending: mpsc::Receiver<StoreOp>) {
    let mut version = store.data_version().ok();
    let mut last_sweep = Instant::now();
    let mut next_poll = Instant::now() + POLL;
    loop {
        // Bans are written as they come, but never at the expense of the schedule: however
        // fast they arrive, the poll below runs every POLL and the sweep every 10 s. (A
        // `continue` per ban used to starve both for as long as bans kept coming.)
        match pending.recv_timeout(next_poll.saturating_duration_since(Instant::now())) {
            Ok(op) => {
                apply(&guard, &store, op);
                if Instant::now() < next_poll {
                    continue;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        next_poll = Instant::now() + POLL;
        let Some(guard) = guard.upgrade() else { return };
        let now_version = store.data_version().ok();
        if now_version != version {
            version = now_version;
            if let Err(e) = guard.reload(&store) {
                tracing::error!("rereading the guard store: {e}");
            }
            // Bans imposed while rereading are still queued: put them back in memory too. Only
            // until the next poll is due: bans arriving faster than they are written would
            // otherwise hold this loop forever (the rest are applied by the loop above).
            while Instant::now() < next_poll {
                let Ok(op) = pending.try_recv() else { break };
                apply(&Arc::downgrade(&guard), &store, op);
            }
        }
        // Forget idle clients now and then, so that memory follows the active clients only.
        if last_sweep.elapsed() >= SWEEP {
            last_sweep = Instant::now();
            guard.sweep();
        }
    }
}

/// Writes one change to the store, and makes memory agree (a reread may have replaced the
/// map since the change was made).
fn apply(guard: &Weak<Guard>, store: &Store, op: StoreOp) {
    match op {
        StoreOp::Ban(ban) => {
            if let Err(e) = store.insert_ban(&ban) {
                tracing::error!("recording a ban: {e}");
            }
            if let Some(g) = guard.upgrade() {
                g.bans.insert(ban.client, ban.until);
            }
        }
        StoreOp::Lift(client) => {
            if let Err(e) = store.lift(&client) {
                tracing::error!(%client, "lifting a ban in the store: {e}");
            }
            if let Some(g) = guard.upgrade() {
                g.bans.lift(&client);
            }
        }
    }
}

/// How often idle clients are forgotten.
pub const SWEEP: Duration = Duration::from_secs(10);

impl Guard {
    /// Forgets expired bans, old strikes and idle rate-limit buckets.
    pub fn sweep(&self) {
        let now = store::now();
        self.bans.forget_expired(now);
        self.strikes.forget_old(now);
        if let Some(l) = &self.limiters {
            l.forget_idle();
        }
        self.sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sweeps done since start (for tests and metrics).
    pub fn sweeps(&self) -> u64 {
        self.sweeps.load(std::sync::atomic::Ordering::Relaxed)
    }
}
