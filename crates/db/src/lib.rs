//! Where signet's stores meet their databases, so that `core` (and with it the standalone
//! verifier) carries no database driver.
//!
//! - [`connection`]: one store's connection, made again after it broke, set up before use.
//! - [`error`]: what reaching a database fails with ([`DbError`]).
//! - [`pg`]: connecting to PostgreSQL: the URL, verified TLS, redacted URLs and whole error messages.
//! - [`runtime`]: the one runtime that drives every PostgreSQL connection, and a wait for it
//!   that is safe from any thread.
//! - [`migrations`]: the PostgreSQL schema's one sequence of versions, which every crate adds
//!   its own tables to.
//! - [`sqlite`]: opening the embedded stores' files: private from their first byte, WAL, a
//!   busy timeout, errors that name the file, and each file's versioned schema changes.

pub mod connection;
pub mod error;
pub mod migrations;
pub mod pg;
pub mod runtime;
pub mod sqlite;

pub use error::DbError;
