//! The audit log: one record per request, hash-chained, in `audit.sqlite` in the data dir,
//! or in PostgreSQL, where the instances of one deployment keep one chain each.
//!
//! - [`record`]: what a record holds and how it is chained: each record's hash is
//!   SHA-256(previous hash ‖ the record's JSON), starting from 32 zero bytes.
//! - [`place`]: where a chain is kept: [`Place::Sqlite`] or [`Place::Postgres`] ([`postgres`]).
//! - [`batch`]: a batch's fate and who waits on it: receipts, and connections that hold
//!   their answers' bytes ([`HoldsOutput`], which the server's connections fill).
//! - [`chain`]: [`AuditLog`], which takes records from the request path through a bounded
//!   queue ([`queue`]) and writes them in batches from a thread of its own ([`writer`]), each
//!   record a JSON line ([`encode`]), into `audit.sqlite` or PostgreSQL ([`sink`]).
//! - [`verify`]: walks the stored chain and names the first record that does not fit
//!   (`signet audit verify`).
//! - [`layer`]: the tower layer that records every request, refused ones included.
//! - [`anchor`]: the chain's head, signed and appended to signet's Rekor v2 log, so that
//!   rewriting the chain from some record onwards is caught too.
//! - [`segment`]: retention: the records up to an anchor moved into a segment file that can
//!   be archived and verified alone.
//!
//! Editing or deleting a stored record breaks the chain at that record; rewriting it up to
//! an anchored record breaks the anchor; deleting the tail past an anchor is caught by the
//! anchor; records after the last anchor are reported as not yet anchored.

pub mod anchor;
pub mod batch;
pub mod chain;
pub mod encode;
pub mod layer;
pub mod place;
pub mod postgres;
pub mod queue;
pub mod record;
pub mod segment;
pub mod sink;
pub mod verify;
pub mod writer;

pub use batch::{HoldsOutput, Receipt};
pub use chain::AuditLog;
pub use queue::AuditStats;
pub use layer::AuditLayer;
pub use place::Place;
pub use record::{Anchor, Did, Oidc, Record};
pub use verify::{tail, verify, verify_all, verify_file, Verified, VerifyError};

/// The file under the data dir.
pub const FILE: &str = "audit.sqlite";

/// What a request gets when its record cannot be kept (closed mode): the layer's 503, and the
/// one a held connection is sent.
pub const UNAVAILABLE: &str = "the audit log cannot record this request, so it is not answered; retry when the audit store recovers";
