//! signet-log's integration tests, as one test binary (each file a module), so that the
//! suite links the crate once. Run one file's with `cargo test -p signet-log --test tests <file>::`.

mod common;
mod follow;
mod import;
mod reindex;
mod sequencer;
mod storage;
