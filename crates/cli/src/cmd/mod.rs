//! One module per subcommand.

pub mod admin;
pub mod audit;
pub mod backup;
pub mod bench;
pub mod bench_gates;
pub mod bench_tls;
pub mod bench_crypto;
pub mod bench_micro;
pub mod bench_verify;
pub mod dev_token;
pub mod init;
pub mod migrate;
pub mod serve;
pub mod sign_bundle;
pub mod trust;
pub mod verify_bundle;
