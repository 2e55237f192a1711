//! `signet dev-token`: an identity token from the development OIDC issuer.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_ca::oidc::dev::{self, DevIssuer};

#[derive(clap::Args)]
pub struct Args {
    /// The data dir of a `serve --dev` instance.
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// The identity: an email address, put in `email` and `sub`.
    #[arg(long)]
    subject: String,
    /// Issuer URL; defaults to the one the running dev instance wrote to its data dir.
    #[arg(long)]
    issuer: Option<String>,
    /// Lifetime in seconds.
    #[arg(long, default_value_t = 600)]
    ttl: u64,
}

pub fn run(a: Args) -> ExitCode {
    let fail = |m: String| {
        errln!("signet dev-token: {m}");
        ExitCode::from(2)
    };
    if !a.subject.contains('@') || a.subject.starts_with('@') || a.subject.ends_with('@') {
        return fail(format!("--subject {:?} is not an email address", a.subject));
    }
    if a.ttl == 0 || a.ttl > 24 * 3600 {
        return fail("--ttl must be between 1 and 86400 seconds".into());
    }
    if !dev::key_path(&a.data_dir).exists() {
        return fail(format!(
            "{} has no dev issuer key; start `signet serve --dev --data-dir {}` first",
            a.data_dir.display(),
            a.data_dir.display()
        ));
    }
    let issuer = match a.issuer {
        Some(i) => i,
        None => match std::fs::read_to_string(dev::issuer_file(&a.data_dir)) {
            Ok(s) => s.trim().to_string(),
            Err(e) => return fail(format!("reading {}: {e}; pass --issuer", dev::issuer_file(&a.data_dir).display())),
        },
    };
    let dev = match DevIssuer::open(&a.data_dir, &issuer) {
        Ok(d) => d,
        Err(e) => return fail(e.to_string()),
    };
    match dev.mint(&a.subject, a.ttl) {
        Ok(token) => {
            outln!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet dev-token: {e}");
            ExitCode::FAILURE
        }
    }
}
