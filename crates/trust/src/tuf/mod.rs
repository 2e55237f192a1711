//! The TUF repository that publishes the trust documents, the way Sigstore's clients
//! bootstrap: from a `root.json` they were given once, they fetch and verify the rest.
//!
//! - [`error`]: what the repository fails with.
//! - [`keys`]: the four role keys (Ed25519, made on first use, 0600).
//! - [`repo`]: the repository on disk: made once, its targets published again when the trust
//!   documents change, its snapshot and timestamp re-signed before they expire. Signing and
//!   the metadata format are `tough`'s.
//! - [`ceremony`]: root and targets signed k of n, offline: proposed, signed by each holder,
//!   staged, and adopted once their thresholds are met.
//! - [`refusal`]: why a ceremony's root or targets is refused.
//! - [`files`]: the published files, held in memory for `GET /tuf/…`.
//! - [`mirror`]: the repository as a copy of one published elsewhere (a database shared by
//!   several instances): brought up to date from it, and what a signing changed, to store back.
//!
//! The layout is Sigstore's: consistent snapshots, so metadata is `N.root.json`,
//! `N.targets.json`, `N.snapshot.json` and `timestamp.json`, and each target is
//! `targets/<sha256>.<name>`, with the targets `trusted_root.json` and
//! `signing_config.v0.2.json`. A client's metadata URL is `<url>/tuf`, its targets URL
//! `<url>/tuf/targets`.

use std::time::Duration;

pub mod ceremony;
pub mod error;
pub mod files;
pub mod keys;
pub mod mirror;
pub mod refusal;
pub mod repo;

pub use error::TufError;
pub use files::Files;
pub use refusal::Refusal;
pub use keys::{Role, RoleKeys};
pub use repo::{Published, Repository, Status};

/// The target names Sigstore clients look for.
pub const TRUSTED_ROOT_TARGET: &str = "trusted_root.json";
pub const SIGNING_CONFIG_TARGET: &str = "signing_config.v0.2.json";

/// How long each role's metadata is valid when signed. A role is signed again once less
/// than half of this is left, so a client that checks daily never sees it expire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    pub root: Duration,
    pub targets: Duration,
    pub snapshot: Duration,
    pub timestamp: Duration,
}

const DAY: u64 = 86_400;

impl Default for Expiry {
    fn default() -> Self {
        Expiry {
            root: Duration::from_secs(365 * DAY),
            targets: Duration::from_secs(90 * DAY),
            snapshot: Duration::from_secs(7 * DAY),
            timestamp: Duration::from_secs(DAY),
        }
    }
}

impl Expiry {
    pub fn of(&self, role: Role) -> Duration {
        match role {
            Role::Root => self.root,
            Role::Targets => self.targets,
            Role::Snapshot => self.snapshot,
            Role::Timestamp => self.timestamp,
        }
    }
}
