//! `signet init`.

use std::path::PathBuf;
use std::process::ExitCode;

use signet_server::init::{init, InitError, InitOptions};

#[derive(clap::Args)]
pub struct Args {
    /// The data dir to create (default ./signet-data). It must not hold keys yet.
    #[arg(long, default_value = "signet-data")]
    data_dir: PathBuf,
    /// The URL clients will reach this instance at; its host names the logs.
    #[arg(long)]
    public_url: String,
    /// Write the root CA key here instead of into the data dir, to keep it offline. It is
    /// needed again only to renew the intermediate or TSA certificates.
    #[arg(long, value_name = "FILE")]
    root_key_out: Option<PathBuf>,
    /// Curve of the CA intermediate: p256 (default) or p384.
    #[arg(long, value_name = "p256|p384")]
    intermediate_key: Option<String>,
    /// Keep the online keys on this PKCS#11 token (RFC 7512: pkcs11:token=LABEL) or in AWS
    /// KMS (awskms:///, or awskms://HOST:PORT/), made there unless there already: objects or
    /// aliases signet-rekor-v1, signet-rekor-v2, signet-ct, signet-tsa, signet-ca-intermediate,
    /// signet-audit, and on a token signet-tuf-snapshot and signet-tuf-timestamp (Ed25519).
    /// A token's module and PIN: SIGNET_KEYS_PKCS11_MODULE and SIGNET_KEYS_PKCS11_PIN, or
    /// module-path and pin-source in the URI. KMS: the AWS SDK's settings (AWS_REGION, …).
    #[arg(long, value_name = "PKCS11_URI|awskms:///")]
    keys: Option<String>,
    /// Make (or use) the root CA key here: a PKCS#11 token (object signet-ca-root unless the
    /// URI names one) or a KMS key (awskms:///alias/NAME). The config does not name it: keep
    /// it offline; it is needed again only to renew the intermediate or TSA certificates.
    #[arg(long, value_name = "PKCS11_URI|awskms:///KEY", conflicts_with = "root_key_out")]
    root_key: Option<String>,
    /// Write the config here instead of <data dir>/signet.toml (the Debian package's
    /// /etc/signet/signet.toml). It must not exist yet.
    #[arg(long, value_name = "FILE")]
    config_out: Option<PathBuf>,
}

pub fn run(args: Args) -> ExitCode {
    let intermediate_curve = match args.intermediate_key.as_deref().map(str::parse).transpose() {
        Ok(c) => c,
        Err(e) => {
            errln!("signet: --intermediate-key: {e}");
            return ExitCode::from(2);
        }
    };
    let token = match args.keys.as_deref().map(signet_keys::KeyHome::parse).transpose() {
        Ok(t) => t,
        Err(e) => {
            errln!("signet: --keys: {e}");
            return ExitCode::from(2);
        }
    };
    // The root may name its object; on a token without one it is signet-ca-root.
    let root_uri = |s: &str| match s.parse::<signet_keys::KeySource>() {
        Ok(key @ (signet_keys::KeySource::Pkcs11(_) | signet_keys::KeySource::AwsKms(_))) => Ok(key),
        Ok(signet_keys::KeySource::File(_)) => Err("a root key file is --root-key-out".to_string()),
        Err(_) => signet_keys::KeyHome::parse(s)
            .ok()
            .filter(signet_keys::KeyHome::is_token)
            .map(|home| home.key(signet_server::init::ROOT_OBJECT))
            .ok_or_else(|| format!("{s:?}: expected pkcs11:token=LABEL[;object=NAME] or awskms:///KEY")),
    };
    let root_token = match args.root_key.as_deref().map(root_uri).transpose() {
        Ok(t) => t,
        Err(e) => {
            errln!("signet: --root-key: {e}");
            return ExitCode::from(2);
        }
    };
    let pkcs11 = signet_keys::Pkcs11Settings {
        module: std::env::var_os("SIGNET_KEYS_PKCS11_MODULE").map(PathBuf::from),
        pin: std::env::var("SIGNET_KEYS_PKCS11_PIN").ok(),
        sessions: 1,
    };
    let opts = InitOptions {
        data_dir: args.data_dir,
        public_url: args.public_url,
        root_key_out: args.root_key_out,
        intermediate_curve,
        token,
        root_token,
        pkcs11,
        config_out: args.config_out,
    };
    match init(&opts) {
        Ok(made) => {
            outln!("initialised {}", opts.data_dir.display());
            for f in &made.files {
                outln!("  {}", f.display());
            }
            let offline = opts.root_key_out.is_some() || opts.root_token.is_some();
            outln!("root CA key: {}{}", made.root_key, if offline { " (keep it offline)" } else { "" });
            let tuf_note = match made.tuf_root {
                signet_keys::KeySource::File(_) => " (move it and keys/tuf-targets.pem off this machine: serving needs neither)",
                _ => " (keep it offline)",
            };
            outln!("TUF root key: {}{tuf_note}", made.tuf_root);
            if let Some(token) = &opts.token {
                let labels: Vec<&str> = signet_server::init::token_keys(token).map(|(_, label, _, _)| label).collect();
                outln!("keys in {token}: {}", labels.join(", "));
            }
            outln!("config: {} (list your OIDC issuers in it)", made.config.display());
            outln!("start: signet serve --config {}", made.config.display());
            ExitCode::SUCCESS
        }
        Err(e @ (InitError::Exists { .. } | InitError::RootKeyExists { .. } | InitError::RootTwice | InitError::ConfigExists { .. })) => {
            errln!("signet: {e}");
            ExitCode::from(2)
        }
        Err(InitError::Start(e @ signet_server::StartError::Config(_))) => {
            errln!("signet: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            errln!("signet: {e}");
            ExitCode::FAILURE
        }
    }
}
