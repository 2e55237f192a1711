//! `signet audit verify`: checks the hash chain of `<data dir>/audit.sqlite`.
//! `signet audit tail`: prints the last records, and with `--follow` those that come after.
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
    /// Print the last records, one JSON object per line, oldest first.
    Tail {
        /// The server's data dir (it holds audit.sqlite).
        #[arg(long, default_value = "signet-data")]
        data_dir: PathBuf,
        /// How many records.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        /// Keep printing records as the server writes them (every 0.5 s), until interrupted.
        #[arg(short, long)]
        follow: bool,
    },
}

pub fn run(cmd: Audit) -> ExitCode {
    match cmd {
        Audit::Tail { data_dir, lines, follow } => {
            let mut after = 0;
            let mut want = lines;
            if lines == 0 {
                // Only what comes next: start after the current last record.
                after = audit::tail(&data_dir, 0, 1).ok().and_then(|r| r.last().map(|(seq, _)| *seq)).unwrap_or(0);
            }
            loop {
                match audit::tail(&data_dir, after, want) {
                    Ok(records) => {
                        for (seq, line) in records {
                            outln!("{line}");
                            after = seq;
                        }
                    }
                    Err(e) => {
                        errln!("signet audit tail: {e}");
                        return ExitCode::from(if matches!(e, VerifyError::Missing(_)) { 2 } else { 1 });
                    }
                }
                if !follow {
                    return ExitCode::SUCCESS;
                }
                want = usize::MAX;
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        }
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
