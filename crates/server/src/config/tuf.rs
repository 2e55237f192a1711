//! `[tuf]`: the TUF repository's expiries.

use serde::Deserialize;

use super::error::ConfigError;

/// The TUF repository that publishes the trust documents: on by default. Each role's
/// metadata is valid this many seconds when signed, and is signed again at half of it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TufSettings {
    pub enabled: bool,
    pub root_expiry_secs: u64,
    pub targets_expiry_secs: u64,
    pub snapshot_expiry_secs: u64,
    pub timestamp_expiry_secs: u64,
}

impl Default for TufSettings {
    fn default() -> Self {
        let e = signet_trust::tuf::Expiry::default();
        TufSettings {
            enabled: true,
            root_expiry_secs: e.root.as_secs(),
            targets_expiry_secs: e.targets.as_secs(),
            snapshot_expiry_secs: e.snapshot.as_secs(),
            timestamp_expiry_secs: e.timestamp.as_secs(),
        }
    }
}

impl TufSettings {
    pub fn expiry(&self) -> signet_trust::tuf::Expiry {
        use std::time::Duration;
        signet_trust::tuf::Expiry {
            root: Duration::from_secs(self.root_expiry_secs),
            targets: Duration::from_secs(self.targets_expiry_secs),
            snapshot: Duration::from_secs(self.snapshot_expiry_secs),
            timestamp: Duration::from_secs(self.timestamp_expiry_secs),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        // A timestamp must outlive the time between two checks ([`crate::tuf`]), and each
        // role must outlive the one that names it, or clients would see expired metadata.
        const TEN_YEARS: u64 = 10 * 365 * 86_400;
        let e = [
            ("timestamp_expiry_secs", self.timestamp_expiry_secs),
            ("snapshot_expiry_secs", self.snapshot_expiry_secs),
            ("targets_expiry_secs", self.targets_expiry_secs),
            ("root_expiry_secs", self.root_expiry_secs),
        ];
        for (name, secs) in e {
            if !(4..=TEN_YEARS).contains(&secs) {
                return Err(ConfigError::Invalid(format!("tuf.{name} must be 4..={TEN_YEARS} seconds, got {secs}")));
            }
        }
        for pair in e.windows(2) {
            if pair[0].1 > pair[1].1 {
                return Err(ConfigError::Invalid(format!(
                    "tuf.{} ({}) must not be longer than tuf.{} ({}): a role must not outlive the role that names it",
                    pair[0].0, pair[0].1, pair[1].0, pair[1].1
                )));
            }
        }
        Ok(())
    }
}
