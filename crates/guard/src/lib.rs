//! The guard: the tower layers that stand between the network and the handlers.
//!
//! Request path, outermost first (DESIGN.md: validate → authenticate → authorize →
//! rate-limit → audit; audit comes first here):
//!
//! 0. [`audit`]: one hash-chained record per request in `audit.sqlite`. Outermost, unlike
//!    DESIGN.md's order, so that the requests the layers below refuse are recorded too.
//! 0. [`validate`]: header bounds, duplicated security headers, credentials in the URL, and
//!    each route class's body size and content type, before anything else reads the request.
//! 1. [`ban::layer`]: a banned client (its address, or the principal it claims) is refused
//!    first, the cheapest answer; on the way out, the refusals the layers inside mark as a
//!    [`refuse::Strike`] count towards a ban.
//! 2. [`authn`]: an `Authorization: Bearer sgt_…` API token is checked and becomes an
//!    [`identity::Identity`], on the request and on its answer; then the route's
//!    [`Permission`] is checked against what the caller's role grants (admin routes always
//!    need a token whose role grants theirs).
//! 3. [`ratelimit`]: per-client token buckets (governor), reads and writes apart; a client
//!    is its token when it presented one, else its IP. A refusal is marked as a strike.
//! 4. [`principal`]: not a layer: the CA handler asks it, once the OIDC token verified, to
//!    apply the same limits and bans to the identity behind a signing request.
//!
//! The state the layers share:
//!
//! - [`config`]: `[guard]` in the server's TOML: what is on (nothing, by default).
//! - [`identity`]: who a request comes from and what its route needs: the typed extensions
//!   the layers hand on, and the route table.
//! - [`limiters`]: the rate limits' buckets per client.
//! - [`logs`]: the logs a route can belong to, by the names a token scope lists.
//! - [`permission`]: what a route needs, as bits.
//! - [`roles`]: the role table (built-in and `[guard.roles]`), names to permissions.
//! - [`scope`]: what a token is limited to: routes, logs, networks, certificate identities.
//! - [`token`]: the API token format and hashing (only SHA-256 hashes are stored).
//! - [`ban`]: strikes within a window, and the active bans (and the layer above).
//! - [`redis_client`]: a client of `guard.redis`'s Redis, its URL and TLS trust checked.
//! - [`shared`]: the same limits and bans shared by many instances, in Redis.
//! - [`error`]: what the store fails with, why `[guard]` is refused, and why a permission,
//!   role or scope is refused.
//! - [`store`]: `guard.sqlite` in the data dir, shared with `signet admin` (tokens, bans).
//! - [`pg`]: one PostgreSQL connection for blocking callers (the store, the audit chain).
//! - [`guard`]: [`Guard`], the in-memory snapshot the layers read, and the thread that
//!   keeps it in step with the store.
//! - [`client`]: who a request comes from (IP or token).
//! - [`refuse`]: the JSON refusals (`{"code","message"}`) the layers answer with.
//! - `micro` (feature `micro`): the criterion suite, `signet bench micro guard`.

// Nothing derived from a request may panic (issue 17): no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod audit;
pub mod authn;
pub mod ban;
pub mod client;
pub mod config;
pub mod error;
pub mod guard;
pub mod identity;
pub mod limiters;
pub mod logs;
pub mod mtls;
#[cfg(feature = "micro")]
pub mod micro;
pub mod permission;
pub mod pg;
pub mod principal;
pub mod ratelimit;
pub mod redis_client;
pub mod refuse;
pub mod roles;
pub mod scope;
pub mod shared;
pub mod store;
pub mod token;
pub mod validate;

pub use authn::AuthnLayer;
pub use ban::layer::BanLayer;
pub use identity::{Identity, Needs, Principal, Route, RouteTable};
pub use mtls::{ClientCertificate, MtlsConfig};
pub use config::GuardConfig;
pub use guard::Guard;
pub use ratelimit::RateLimitLayer;
pub use validate::{BodyClass, InputLimits, ValidateLayer};
pub use refuse::Refusal;
pub use error::PolicyError;
pub use store::{Store, StoreError};
pub use permission::{Permission, Permissions};
pub use roles::{Role, Roles};
pub use scope::TokenScope;
