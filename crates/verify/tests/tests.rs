//! signet-verify's integration tests, as one test binary (each file a module), so that the
//! suite links the crate once. Run one file's with `cargo test -p signet-verify --test tests <file>::`.

mod api;
mod conformance;
