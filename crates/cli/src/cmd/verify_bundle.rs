//! `signet verify-bundle`: the sigstore-conformance verification protocol over `signet-verify`.
//!
//! Exit codes: 0 verified, 1 verification failed (one line naming the failed check),
//! 2 usage or configuration error (missing or unreadable trusted root, unreadable files).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use signet_core::pubkey::HashAlg;
use signet_verify::{Artifact, Policy, Verifier};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("signer").required(true).args(["certificate_identity", "key"])))]
pub struct Args {
    /// Accepted for protocol compatibility; the staging trusted root must still be passed with --trusted-root.
    #[arg(long)]
    staging: bool,
    /// The Sigstore bundle (JSON) to verify.
    #[arg(long)]
    bundle: PathBuf,
    /// The expected certificate identity (email or URI SAN).
    #[arg(long, requires = "certificate_oidc_issuer", conflicts_with = "key")]
    certificate_identity: Option<String>,
    /// The expected OIDC issuer recorded in the certificate.
    #[arg(long, requires = "certificate_identity", conflicts_with = "key")]
    certificate_oidc_issuer: Option<String>,
    /// Verify with this PEM public key (a managed key) instead of a certificate identity.
    #[arg(long)]
    key: Option<PathBuf>,
    /// The trusted root (trusted_root.json). Required: signet does not fetch Sigstore's TUF root.
    #[arg(long)]
    trusted_root: Option<PathBuf>,
    /// Also require each log checkpoint to carry the witness cosignatures this policy asks for
    /// (Sigsum's policy format, k of n; docs/witness.md).
    #[arg(long)]
    witness_policy: Option<PathBuf>,
    /// The artifact, or its digest as sha256:<64 hex> (when no such file exists).
    file_or_digest: String,
}

fn usage(m: String) -> ExitCode {
    errln!("signet verify-bundle: {m}");
    ExitCode::from(2)
}

fn read(what: &str, p: &Path) -> Result<Vec<u8>, ExitCode> {
    std::fs::read(p).map_err(|e| usage(format!("cannot read {what} {}: {e}", p.display())))
}

/// `sha256:<64 hex>` that is not a path on disk.
fn as_digest(arg: &str) -> Option<Vec<u8>> {
    let hex = arg.strip_prefix("sha256:")?;
    if hex.len() != 64 || Path::new(arg).exists() {
        return None;
    }
    (0..64).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

pub fn run(a: Args) -> ExitCode {
    match run_inner(a) {
        Ok(code) | Err(code) => code,
    }
}

fn run_inner(a: Args) -> Result<ExitCode, ExitCode> {
    let Some(root_path) = &a.trusted_root else {
        let which = if a.staging { "the staging" } else { "a" };
        return Err(usage(format!(
            "--trusted-root is required: pass {which} trusted_root.json (signet verifies offline and does not fetch TUF)"
        )));
    };
    let verifier = Verifier::new(&read("trusted root", root_path)?).map_err(|e| usage(format!("{}: {e}", root_path.display())))?;
    let bundle = read("bundle", &a.bundle)?;
    let witness_policy = match &a.witness_policy {
        Some(p) => {
            let text = String::from_utf8(read("witness policy", p)?).map_err(|_| usage(format!("{}: not UTF-8", p.display())))?;
            Some(signet_verify::witnesses::WitnessPolicy::parse(&text).map_err(|e| usage(format!("{}: {e}", p.display())))?)
        }
        None => None,
    };
    let failed = |e: signet_verify::VerifyError| {
        errln!("signet verify-bundle: verification failed: {e}");
        ExitCode::FAILURE
    };
    let policy = match (&a.key, a.certificate_identity, a.certificate_oidc_issuer) {
        (Some(key), _, _) => Policy::key_from_pem(&read("key", key)?).map_err(failed)?,
        (None, Some(identity), Some(issuer)) => Policy::Identity { identity, issuer },
        _ => return Err(usage("give --certificate-identity with --certificate-oidc-issuer, or --key".into())),
    };
    let digest = as_digest(&a.file_or_digest);
    let bytes;
    let artifact = match &digest {
        Some(d) => Artifact::Digest(HashAlg::Sha256, d),
        None => {
            bytes = read("artifact", Path::new(&a.file_or_digest))?;
            Artifact::Bytes(&bytes)
        }
    };
    verifier.verify_json(&bundle, artifact, &policy).map_err(failed)?;
    if let Some(witnesses) = &witness_policy {
        // The bundle parsed and verified just now; a second parse cannot differ.
        let parsed = signet_verify::bundle::Bundle::from_json(&bundle).map_err(failed)?;
        if let Err(why) = signet_verify::witnesses::check_bundle(&parsed, witnesses) {
            errln!("signet verify-bundle: verification failed: {why}");
            return Err(ExitCode::FAILURE);
        }
    }
    outln!("OK: {}", a.file_or_digest);
    Ok(ExitCode::SUCCESS)
}
