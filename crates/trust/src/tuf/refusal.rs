//! Why a root or targets brought to the repository is refused: each check of a ceremony's
//! proposal, with what was wrong and what was expected. The file refused gets the message beside
//! it (`NAME.refused.why`).

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The file is not TUF metadata that signet reads (the reader's reason).
    #[error("{0}")]
    Unreadable(String),
    #[error("one targets at a time")]
    TwoTargets,
    #[error("it names no {0} role")]
    NoRole(&'static str),
    #[error("the {0} role has no key")]
    RoleWithoutKeys(&'static str),
    #[error("the {role} role names key {key} that the root does not list")]
    UnlistedKey { role: &'static str, key: String },
    #[error("the {0} role names a key twice")]
    KeyTwice(&'static str),
    #[error("the {role} role's threshold is {threshold}, but it has {keys} keys")]
    ThresholdAboveKeys { role: &'static str, threshold: u64, keys: usize },
    /// Snapshot and timestamp are the server's to sign, alone and often.
    #[error("the {0} role must have one key and a threshold of 1: the server signs it alone")]
    ServerRole(&'static str),
    #[error("its version is {version}; after root version {old} only {next} can follow")]
    RootVersion { version: u64, old: u64, next: u64 },
    #[error("its version is {version}, not past the targets already published ({after})")]
    TargetsVersion { version: u64, after: u64 },
    #[error("it expired at {0}")]
    Expired(String),
    #[error("consistent_snapshot is false; signet's repository and its clients need it true")]
    NotConsistent,
    /// Too few signatures: the tally, and whose keys they had to be.
    #[error("{tally} {of}")]
    Threshold { tally: String, of: String },
    /// tough's own check of the signatures, as clients make it.
    #[error("{0}")]
    Signatures(String),
    #[error("its target targets/{0} is missing; copy targets/ with it")]
    TargetMissing(String),
    #[error("its target targets/{0} does not match its length and hash")]
    TargetMismatch(String),
}
