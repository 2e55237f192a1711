//! One module per subcommand.

pub mod bench;
pub mod dev_token;
pub mod serve;
pub mod trust;
pub mod verify_bundle;
