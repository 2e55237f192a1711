//! Where signet's stores meet their databases, so that `core` (and with it the standalone
//! verifier) carries no database driver.
//!
//! - [`pg`]: connecting to PostgreSQL: the URL, verified TLS, redacted URLs and whole error messages.
//! - [`migrations`]: the PostgreSQL schema's one sequence of versions, which every crate adds
//!   its own tables to.
//!
//! Issue 41 grows this crate into the stores' one connection layer (SQLite and PostgreSQL
//! on the server's runtime).

pub mod migrations;
pub mod pg;
