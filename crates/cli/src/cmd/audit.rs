//! `signet audit verify`: checks the hash chain of `<data dir>/audit.sqlite`.
//!
//! Exit 0 when every record chains; 1 at the first record that does not (it is named), or
//! when the file cannot be read as an audit log; 2 when there is no audit log to check.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_guard::audit::{self, VerifyError};

#[derive(clap::Subcommand)]
pub enum Audit {
    /// Check every record of the audit log against the chain; exit 1 on tampering.
    Verify {
        /// The server's data dir (it holds audit.sqlite).
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
    },
}

pub fn run(cmd: Audit) -> ExitCode {
    match cmd {
        Audit::Verify { data_dir } => match audit::verify(&data_dir) {
            Ok(v) => {
                outln!("audit chain ok: {} records, head {}", v.records, hex::encode(v.head));
                ExitCode::SUCCESS
            }
            Err(e @ VerifyError::Missing(_)) => {
                errln!("signet audit verify: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                errln!("signet audit verify: {e}");
                ExitCode::from(1)
            }
        },
    }
}
