//! signet-guard's integration tests, as one test binary (each file a module), so that the
//! suite links the crate once. Run one file's with `cargo test -p signet-guard --test tests <file>::`.

mod fairness;
mod layers;
