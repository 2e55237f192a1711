//! The signet server: configuration, startup, and the HTTP API over the service crates.
//!
//! - [`config`]: the TOML / environment / flag configuration.
//! - [`state`]: opening storage, keys and logs at startup.
//! - [`issuers`]: the configured OIDC issuers and their key sources (a file, or discovery).
//! - [`discovery`]: OIDC discovery of an issuer's key set over HTTPS.
//! - [`api`]: the router and handlers.
//! - [`metrics`]: request and refusal counters, and the layer that keeps them.
//! - [`trust`]: the trust documents, from a data dir.
//! - [`serve`]: binding, the readiness line, graceful shutdown.

pub mod api;
pub mod config;
pub mod discovery;
pub mod issuers;
pub mod metrics;
pub mod state;
pub mod trust;

use std::sync::Arc;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

pub use config::Config;
pub use state::{AppState, StartError};

/// Opens everything, binds, prints `signet listening on <URL>` and serves until SIGINT/SIGTERM.
///
/// The listener is plain TCP for now; the TLS layer will wrap the accept loop here
/// (axum's `serve` takes any `Listener`), leaving the router untouched.
pub async fn serve(mut cfg: Config) -> Result<(), StartError> {
    cfg.validate()?;
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| StartError::Io { what: format!("cannot listen on {}", cfg.listen), source })?;
    let local = listener.local_addr().expect("bound socket has an address");
    // Under --dev without a public URL, the URL is the address actually bound (port 0 picks one).
    if cfg.public_url.is_none() {
        cfg.public_url = Some(format!("http://{local}"));
    }
    let url = cfg.public_url();
    let state = Arc::new(AppState::open(&cfg).await?);
    let app = api::router(state);
    // Without TCP_NODELAY a response split over two segments waits for the client's delayed
    // ACK: 40 ms stalls in the latency tail.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    println!("signet listening on {url}");
    // Connect info gives the guard each request's peer address (rate limits and bans by IP).
    axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(shutdown_signal())
        .await
        .map_err(|source| StartError::Io { what: "serving HTTP".into(), source })?;
    Ok(())
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
