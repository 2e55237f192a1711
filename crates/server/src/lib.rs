//! The signet server: configuration, startup, and the HTTP API over the service crates.
//!
//! - [`config`]: the TOML / environment / flag configuration.
//! - [`state`]: opening storage, keys and logs at startup.
//! - [`issuers`]: the configured OIDC issuers and their key sources (a file, or discovery).
//! - [`discovery`]: OIDC discovery of an issuer's key set over HTTPS.
//! - [`api`]: the router and handlers.
//! - [`metrics`]: request and refusal counters, and the layer that keeps them.
//! - [`panic`]: the panic boundary: a bug costs one request (a JSON 500, logged and counted).
//! - [`trust`]: the trust documents, from a data dir.
//! - [`listener`]: HTTPS: TLS handshakes (by `signet-tls`) in front of the same router.
//! - [`serve`]: binding, the readiness line, graceful shutdown.

pub mod api;
pub mod config;
pub mod discovery;
pub mod issuers;
pub mod listener;
pub mod metrics;
pub mod panic;
pub mod state;
pub mod trust;

use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use signet_tls::{Acceptor, FileSource};
use tokio::net::TcpListener;

pub use config::Config;
pub use state::{AppState, StartError};

/// Opens everything, binds, prints `signet listening on <URL>` and serves until SIGINT/SIGTERM.
///
/// With `tls.cert` and `tls.key` the same router is served over HTTPS (HTTP/1.1 or HTTP/2,
/// by ALPN) behind a [`listener::TlsListener`]; the files are re-read every
/// `tls.reload_interval_secs` and a changed certificate goes live for new handshakes.
pub async fn serve(mut cfg: Config) -> Result<(), StartError> {
    cfg.validate()?;
    // The certificate is checked before anything binds or opens: a bad TLS config fails fast.
    let tls = match (&cfg.tls.cert, &cfg.tls.key) {
        (Some(cert), Some(key)) => {
            let source = FileSource::new(cert, key);
            let acceptor = Acceptor::new(cfg.tls.backend()?, &source.load()?)?;
            Some((acceptor, source))
        }
        _ => None,
    };
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| StartError::Io { what: format!("cannot listen on {}", cfg.listen), source })?;
    let local = listener.local_addr().expect("bound socket has an address");
    // Under --dev without a public URL, the URL is the address actually bound (port 0 picks one).
    if cfg.public_url.is_none() {
        cfg.public_url = Some(format!("{}://{local}", cfg.scheme()));
    }
    let url = cfg.public_url();
    let state = Arc::new(AppState::open(&cfg).await?);
    let audit = state.audit.clone();
    let app = api::router(state);
    let serving = |source| StartError::Io { what: "serving HTTP".into(), source };
    // Connect info gives the guard each request's peer address (rate limits and bans by IP).
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    let served = match tls {
        None => {
            // Without TCP_NODELAY a response split over two segments waits for the client's
            // delayed ACK: 40 ms stalls in the latency tail.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            println!("signet listening on {url}");
            axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await.map_err(serving)
        }
        Some((acceptor, source)) => {
            let _reloading = source.watch(acceptor.clone(), Duration::from_secs(cfg.tls.reload_interval_secs));
            // The no-op tap is what gives a custom listener axum's connect info (the peer address
            // the guard keys on): axum implements it for any `TapIo`, not for listeners in general.
            let listener = listener::TlsListener::new(listener, acceptor).map_err(serving)?.tap_io(|_| {});
            println!("signet listening on {url}");
            axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await.map_err(serving)
        }
    };
    // The requests answered before the shutdown are in the audit log before the process ends.
    if let Some(log) = audit {
        let _ = tokio::task::spawn_blocking(move || log.flush()).await;
    }
    served
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
