//! `signet probe`: is the instance on this machine alive (`/healthz`) or ready (`/readyz`)?
//! Exit 0 if so, 1 if not. It is the container image's HEALTHCHECK: the runtime image has no
//! curl, and the instance may serve HTTPS under a CA of its own.
//!
//! Without `--url` it asks the port that serves the probes for this config: the metrics port
//! when there is one, else the public one, on loopback when the address is a wildcard. Over
//! HTTPS it verifies the certificate as any client would: against `--ca-file`, or the data
//! dir's TLS CA when the instance issues its own certificate, or the platform's roots.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use signet_tls::Trust;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
    /// The instance's base URL (default: from the config, as above).
    #[arg(long)]
    url: Option<String>,
    /// Ask /readyz (can it take writes?) rather than /healthz (is it alive?).
    #[arg(long)]
    ready: bool,
    /// PEM CAs to verify the instance's HTTPS certificate against.
    #[arg(long)]
    ca_file: Option<std::path::PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 5)]
    timeout_secs: u64,
}

pub fn run(args: Args) -> ExitCode {
    let cfg = match args.instance.config(None) {
        Ok(cfg) => cfg,
        Err(code) => return code,
    };
    let base = args.url.clone().unwrap_or_else(|| local_url(&cfg));
    let trust = match (&args.ca_file, cfg.tls.mode(cfg.dev)) {
        (Some(path), _) => Trust::PemFile(path.clone()),
        (None, signet_server::config::TlsMode::Issued) => Trust::PemFile(signet_ca::serving::certificate_path(&cfg.data_dir)),
        (None, _) => Trust::Platform,
    };
    let path = if args.ready { "/readyz" } else { "/healthz" };
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let http = signet_client::http::Http::with_trust(Duration::from_secs(args.timeout_secs.clamp(1, 300)), &trust);
    match http.get("signet", &url, 64 << 10) {
        Ok(_) => {
            outln!("{url}: {}", if args.ready { "ready" } else { "alive" });
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("signet probe: {e}");
            ExitCode::from(1)
        }
    }
}

/// The URL of the port that answers the probes: `http.metrics_listen` if set, else `listen`,
/// with a wildcard address replaced by loopback of its family.
fn local_url(cfg: &signet_server::Config) -> String {
    let addr = cfg.http.metrics_listen.unwrap_or(cfg.listen);
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("{}://{}", cfg.scheme(), SocketAddr::new(ip, addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_address_is_probed_on_loopback_of_its_family() {
        let mut cfg = signet_server::Config::default();
        cfg.tls.plain_http = true;
        cfg.listen = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(local_url(&cfg), "http://127.0.0.1:8080");
        cfg.listen = "[::]:8080".parse().unwrap();
        assert_eq!(local_url(&cfg), "http://[::1]:8080");
        cfg.tls.plain_http = false;
        cfg.tls.source = Some("issued".into());
        cfg.http.metrics_listen = Some("10.0.0.5:9464".parse().unwrap());
        assert_eq!(local_url(&cfg), "https://10.0.0.5:9464");
    }
}
