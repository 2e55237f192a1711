//! `signet witness`: the keys of witnessing (docs/witness.md).

use std::path::PathBuf;
use std::process::ExitCode;

use signet_core::notekey::NoteKeyType;
use signet_keys::NoteSigner;

#[derive(clap::Subcommand)]
pub enum Witness {
    /// Print the verifier key (vkey) of an Ed25519 note key, creating the key (0600) if the
    /// file does not exist: a witness's cosigning key, or with --log a log's checkpoint key.
    Vkey(VkeyArgs),
}

#[derive(clap::Args)]
pub struct VkeyArgs {
    /// The PKCS#8 PEM key file (a server makes `<data dir>/keys/witness.pem` and, with
    /// `[log.witnesses]`, `<data dir>/keys/rekor-v2-note.pem`).
    #[arg(long)]
    key: PathBuf,
    /// The key's name: the witness's name, or the log's origin (the host of its public URL).
    #[arg(long)]
    name: String,
    /// A log's checkpoint key (type 0x01) rather than a witness's cosignature key (0x04).
    #[arg(long)]
    log: bool,
}

pub fn run(w: Witness) -> ExitCode {
    match w {
        Witness::Vkey(a) => {
            let kind = if a.log { NoteKeyType::Ed25519 } else { NoteKeyType::Cosignature };
            if let Some(dir) = a.key.parent().filter(|d| !d.as_os_str().is_empty()) {
                if let Err(e) = signet_core::files::ensure_private_dir(dir) {
                    errln!("signet witness vkey: creating {}: {e}", dir.display());
                    return ExitCode::FAILURE;
                }
            }
            if !signet_core::notekey::valid_name(&a.name) {
                errln!("signet witness vkey: --name {:?} must be non-empty, without spaces or '+'", a.name);
                return ExitCode::from(2);
            }
            match NoteSigner::load_or_generate(&a.key, &a.name, kind) {
                Ok(signer) => {
                    outln!("{}", signer.vkey());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    errln!("signet witness vkey: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
