//! `signet serve`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Start a complete development instance: generated keys, embedded storage.
    #[arg(long)]
    dev: bool,
    /// URL clients use to reach this instance; its host names the logs.
    #[arg(long)]
    public_url: Option<String>,
    /// Storage URL: sqlite://PATH (default under the data dir) or postgres://USER@HOST:PORT/DATABASE.
    #[arg(long)]
    storage: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key. The files
    /// are re-read every few seconds and a changed certificate is used for new connections.
    #[arg(long, value_name = "FILE", conflicts_with = "plain_http")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", conflicts_with = "plain_http")]
    tls_key: Option<PathBuf>,
    /// TLS library for HTTPS: rustls (default) or openssl.
    #[arg(long, value_name = "rustls|openssl")]
    tls_backend: Option<String>,
    /// How the certificate files are re-read: file (default: every reload interval), watch
    /// (also at once when inotify sees their directory change), reload (at every handshake)
    /// or cached (at a handshake once the copy is --tls-cache-ttl old). reload and cached
    /// are report 000's modes, kept for comparison; see docs/tls.md. issued (the default
    /// under --dev without --tls-cert): no files, a certificate from the instance's own CA,
    /// held in memory and renewed at half its lifetime.
    /// (`--tls-cert-source` is the same flag, as DESIGN.md's contract spells it.)
    #[arg(long, visible_alias = "tls-cert-source", value_name = "file|watch|reload|cached|issued", conflicts_with = "plain_http")]
    tls_source: Option<String>,
    /// With --tls-source cached: seconds a read certificate is served before a handshake
    /// reads the files again (1..=3600; default 5).
    #[arg(long, value_name = "SECONDS", conflicts_with = "plain_http")]
    tls_cache_ttl: Option<u64>,
    /// mTLS: ask clients for certificates issued by the CAs in this PEM bundle (re-read like
    /// the certificate); a verified certificate's SAN can be a principal ([guard.mtls]).
    #[arg(long, value_name = "FILE", conflicts_with = "plain_http")]
    tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: optional (default; a client without a certificate is
    /// anonymous) or required (the handshake fails without one).
    #[arg(long, value_name = "optional|required")]
    tls_client_auth: Option<String>,
    /// Serve plain HTTP. Without it, --dev without --tls-cert serves HTTPS with a certificate
    /// its own CA issues (`signet trust export` writes that CA as tls_ca.pem); use this
    /// behind a proxy that terminates TLS, and for benchmarks of the HTTP layer alone.
    #[arg(long)]
    plain_http: bool,
}

/// Why the server could not start or stopped, in the log format it was started with: an
/// operator who ships JSON lines to a collector finds the reason there too, not as the one
/// plain line among them. Never filtered by `SIGNET_LOG`: it is the last thing said.
fn fatal(format: signet_server::logging::Format, message: &str) {
    match format {
        signet_server::logging::Format::Text => errln!("signet: {message}"),
        signet_server::logging::Format::Json => {
            let line = serde_json::json!({
                "timestamp": jiff::Timestamp::now().to_string(),
                "level": "ERROR",
                "message": message,
                "target": "signet",
                "fatal": true,
            });
            errln!("{line}");
        }
    }
}

pub fn run(args: Args, log_format: signet_server::logging::Format) -> ExitCode {
    let cfg = args.instance.load_config(args.storage);
    // Log lines go out from here on, config errors included; spans once the config allows.
    let tracing = cfg.as_ref().map(|c| c.tracing.clone()).unwrap_or_default();
    if let Err(e) = signet_server::logging::init_serving(log_format, &tracing) {
        signet_server::logging::init(log_format);
        fatal(log_format, &e.to_string());
        return ExitCode::from(2);
    }
    let mut cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            fatal(log_format, &e);
            return ExitCode::from(2);
        }
    };
    if let Some(l) = args.listen {
        cfg.listen = l;
    }
    if let Some(u) = args.public_url {
        cfg.public_url = Some(u);
    }
    if let Some(c) = args.tls_cert {
        cfg.tls.cert = Some(c);
    }
    if let Some(k) = args.tls_key {
        cfg.tls.key = Some(k);
    }
    if let Some(b) = args.tls_backend {
        cfg.tls.backend = Some(b);
    }
    if let Some(s) = args.tls_source {
        cfg.tls.source = Some(s);
    }
    if let Some(ttl) = args.tls_cache_ttl {
        cfg.tls.cache_ttl_secs = Some(ttl);
    }
    if let Some(ca) = args.tls_client_ca {
        cfg.tls.client_ca = Some(ca);
    }
    if let Some(mode) = args.tls_client_auth {
        cfg.tls.client_auth = Some(mode);
    }
    if args.plain_http {
        // Explicitly plain: a certificate from the config file or environment is not used.
        cfg.tls.cert = None;
        cfg.tls.key = None;
        cfg.tls.backend = None;
        cfg.tls.source = None;
        cfg.tls.cache_ttl_secs = None;
        cfg.tls.client_ca = None;
        cfg.tls.client_auth = None;
        cfg.tls.issued_lifetime_secs = None;
        cfg.tls.plain_http = true;
    }
    cfg.dev |= args.dev;

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(signet_server::serve(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fatal(log_format, &e.to_string());
            match e {
                signet_server::StartError::Config(_)
                | signet_server::StartError::MissingKey { .. }
                | signet_server::StartError::NotInitialised { .. }
                | signet_server::StartError::Log(signet_log::OpenError::OriginChanged { .. })
                | signet_server::StartError::Tls(_)
                | signet_server::StartError::Lock(signet_server::datadir::LockError::InUse { .. }) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
