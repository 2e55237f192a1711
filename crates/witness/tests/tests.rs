//! signet-witness's integration tests, as one test binary (each file a module), so that the
//! suite links the crate once. Run one file's with `cargo test -p signet-witness --test tests <file>::`.

mod monitor_common;
mod monitor_forks;
mod monitor_identities;
mod witness;
