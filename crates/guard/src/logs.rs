//! The logs a route can belong to, as the server's route table names them ([`crate::Route`]'s
//! `log`): what a token scope may list. A leaf: the scope that checks a name and the error
//! that lists the names both read it.

/// The logs a route can belong to, as the server's route table names them.
pub const LOGS: &[&str] = &["rekor-v1", "rekor-v2", "ct"];
