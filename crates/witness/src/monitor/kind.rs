//! What an alert is about, named for its JSON and its metric label.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An entry matched the watch list.
    Match,
    /// Two checkpoints that cannot both be true: a fork (same size, other root), a tree that
    /// shrank, or a failed consistency proof.
    Inconsistent,
    /// A checkpoint without a valid signature by a trusted key for the log.
    BadSignature,
    /// The entries served do not hash to the signed root.
    EntriesMismatch,
    /// The checkpoint names another log than the one followed so far.
    OriginChanged,
    /// The log moved to a new tree under another of its trusted keys (a shard rotation):
    /// followed from the new tree's start, the old tree's last checkpoint kept as retired.
    Rotated,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Match => "match",
            Kind::Inconsistent => "inconsistent",
            Kind::BadSignature => "bad_signature",
            Kind::EntriesMismatch => "entries_mismatch",
            Kind::OriginChanged => "origin_changed",
            Kind::Rotated => "rotated",
        }
    }
}
