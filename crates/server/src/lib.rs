//! The signet server: configuration, startup, and the HTTP API over the service crates.
//!
//! - [`access`]: request ids (`x-request-id`) and the access log.
//! - [`config`]: the TOML / environment / flag configuration.
//! - [`state`]: what every handler reads ([`AppState`]).
//! - [`start`]: opening storage, keys and logs at startup, into an [`AppState`].
//! - [`error`]: what starting fails with.
//! - [`layout`]: the data dir's files: what `init` makes and a production start needs.
//! - [`init`]: `signet init`: a production instance's keys, certificates and config.
//! - [`issuers`]: the configured OIDC issuers and their key sources (a file, or discovery).
//! - [`discovery`]: OIDC discovery of an issuer's key set over HTTPS.
//! - [`api`]: the router and handlers.
//! - [`grpc`]: unary gRPC calls on the HTTP port, and refusals written as gRPC statuses.
//! - [`logging`]: log output that drops a line rather than fail or panic.
//! - [`metrics`]: request and refusal counters, and the layer that keeps them.
//! - [`otel`]: trace export over OTLP/HTTP (`[tracing]`), off by default.
//! - [`panic`]: the panic boundary: a bug costs one request (a JSON 500, logged and counted).
//! - [`rotate`]: rotating an authority's key offline (the TSA's).
//! - [`trust`]: the trust documents, from a data dir.
//! - [`tuf`]: the TUF repository that publishes them at `/tuf/`.
//! - [`conn`]: accepting connections (plain or TLS): the cap, the timeouts, bounded draining.
//! - [`datadir`]: the exclusive lock that keeps a second server off a data dir.
//! - [`backup`]: `signet backup`, a consistent copy of a data dir while its server runs.
//! - [`restore`]: a backup serves no appends until `signet restore` starts new shards: no second history.
//! - [`watermark`]: what this instance served of each log, so that a restored database is refused appends.
//! - [`lifecycle`]: starting, ready, shutting down; what `/readyz` answers.
//! - [`lease`]: on PostgreSQL, the sequencer lease: one instance sequences, the others stand by.
//! - [`shards`]: the Rekor v1 log's shards: their keys and namespaces, and `admin log rotate`.
//! - [`monitoring`]: `[monitor]`, the monitor over this instance's own Rekor v2 log.
//! - [`witnessing`]: signet as a witness for other logs (`[witness]`, `POST /add-checkpoint`).
//! - [`serve`]: the order of startup, the ready line, and shutdown.

// Nothing derived from a request may panic (issue 17): no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod access;
pub mod anchor;
pub mod api;
pub mod backup;
pub mod config;
pub mod conn;
pub mod datadir;
pub mod discovery;
pub mod error;
pub mod grpc;
pub mod init;
pub mod issuers;
pub mod layout;
pub mod lease;
pub mod lifecycle;
pub mod logging;
pub mod metrics;
pub mod otel;
pub mod panic;
pub mod restore;
pub mod shards;
pub mod start;
pub mod state;
pub mod rotate;
pub mod trust;
pub mod tuf;
pub mod monitoring;
pub mod witnessing;
pub mod watermark;

use std::sync::Arc;
use std::time::Duration;

use signet_tls::{Acceptor, FileSource};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::{Config, TlsMode};
pub use error::StartError;
pub use state::AppState;

/// Opens everything, binds, prints `signet listening on <URL>` and serves until SIGINT/SIGTERM.
///
/// The order matters. The data dir's lock comes first, so a second server changes nothing.
/// The socket is bound and accepting before storage opens, so that `/healthz` answers
/// during a long start while `/readyz` says 503; the ready line is printed, and `/readyz`
/// turns 200, only once every log's sequencer runs. With `tls.cert` and `tls.key` the same
/// router is served over HTTPS, and the files are re-read every `tls.reload_interval_secs`.
pub async fn serve(mut cfg: Config) -> Result<(), StartError> {
    cfg.validate()?;
    for name in &cfg.unknown_env {
        tracing::warn!(variable = %name, "a SIGNET_* variable that names no option does nothing (`signet config env` lists them)");
    }
    let _lock = datadir::DataDirLock::acquire(&cfg.data_dir)?;
    for path in datadir::make_private(&cfg.data_dir)? {
        tracing::warn!(path = %path.display(), "was readable by other users; made private (0600 files, 0700 directories)");
    }
    // The certificate is checked (or issued) before anything binds or opens: a bad TLS config
    // fails fast.
    let tls = match cfg.tls.mode(cfg.dev) {
        TlsMode::Plain => None,
        TlsMode::Files => {
            let (cert, key) = (cfg.tls.cert.clone().unwrap_or_default(), cfg.tls.key.clone().unwrap_or_default());
            let mut source = FileSource::new(cert, key);
            if let (Some(ca), Some(mode)) = (&cfg.tls.client_ca, cfg.tls.client_auth_mode()?) {
                source = source.with_client_ca(ca, mode);
            }
            let client = source.load_client_auth()?;
            let (backend, kind) = (cfg.tls.backend()?, cfg.tls.source()?);
            let alpn = signet_tls::backend::HTTP_ALPN;
            let acceptor = match kind.freshness(cfg.tls.cache_ttl()) {
                None => Acceptor::with_client_auth(backend, &source.load()?, alpn, client.as_ref())?,
                Some(freshness) => Acceptor::per_handshake(backend, &source, freshness, alpn, client.as_ref())?,
            };
            Some((acceptor, Renewal::Files(source), kind))
        }
        TlsMode::Issued => {
            let (acceptor, renewal) = issued_tls(&cfg)?;
            Some((acceptor, renewal, signet_tls::SourceKind::Issued))
        }
    };
    match conn::raise_fd_limit() {
        Ok(n) => tracing::info!(open_files = n, "file descriptor limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit; connections may be refused early"),
    }
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| StartError::Io { what: format!("cannot listen on {}", cfg.listen), source })?;
    let local = listener.local_addr().map_err(|source| StartError::Io { what: "reading the bound address".into(), source })?;
    // Under --dev without a public URL, the URL is the address actually bound (port 0 picks one).
    if cfg.public_url.is_none() {
        cfg.public_url = Some(format!("{}://{local}", cfg.scheme()));
    }
    let url = cfg.public_url();
    // /metrics and the admin API on ports of their own ([http] metrics_listen, admin_listen),
    // bound now too, so that a port in use fails the start before anything opens.
    let mut own_ports = Vec::new();
    for (addr, serves) in cfg.http.surfaces(cfg.dev).into_iter().skip(1) {
        let Some(addr) = addr else { continue };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Io { what: format!("cannot listen on {addr} ({})", serves.iter().map(|s| s.setting()).collect::<Vec<_>>().join(", ")), source })?;
        own_ports.push((listener, serves));
    }

    let lifecycle = Arc::new(lifecycle::Lifecycle::default());
    let app_slot: conn::AppSlot = Default::default();
    let public_tls = tls.as_ref().map(|(a, _, _)| a.clone());
    let stats = Arc::new(conn::ConnStats { tls_info: tls.as_ref().map(|(a, _, kind)| (a.backend(), *kind)), ..Default::default() });
    let server = conn::Server {
        settings: cfg.http.clone(),
        tls: tls.as_ref().map(|(a, _, _)| a.clone()),
        app: app_slot.clone(),
        starting: api::ready::starting_router(),
        stats: stats.clone(),
        audited: cfg.guard.audit.enabled,
    };
    // file/watch re-read the pair here; reload/cached read it at handshakes, and only the
    // client-CA bundle (if any) is re-read here.
    let interval = Duration::from_secs(cfg.tls.reload_interval_secs);
    let _reloading = tls.map(|(acceptor, renewal, kind)| match renewal {
        Renewal::Files(source) => match kind.trigger() {
            Some(trigger) => Some(Renewing::Files(source.watch(acceptor, interval, trigger))),
            None => source.watch_client_ca(acceptor, interval).map(Renewing::Files),
        },
        Renewal::Issued { issue, issued_at, not_after } => {
            Some(Renewing::Issued(signet_tls::issued::keep_renewed(acceptor, issue, issued_at, not_after)))
        }
    });
    let (stop, stopped) = watch::channel(false);
    let mut listeners = vec![tokio::spawn(server.run(listener, wait_for(stopped.clone())))];
    let mut own_apps = Vec::new();
    for (listener, serves) in own_ports {
        let slot: conn::AppSlot = Default::default();
        let own = conn::Server {
            settings: cfg.http.clone(),
            // The public port's TLS: admin tokens travel here.
            tls: public_tls.clone(),
            app: slot.clone(),
            starting: api::ready::starting_router(),
            stats: stats.clone(),
            audited: cfg.guard.audit.enabled,
        };
        if let Ok(at) = listener.local_addr() {
            tracing::info!(listen = %at, serves = ?serves, "a port of its own");
        }
        listeners.push(tokio::spawn(own.run(listener, wait_for(stopped.clone()))));
        own_apps.push((slot, serves));
    }
    // Every listener ends (drained) before this does.
    let accepting = tokio::spawn(async move {
        for l in listeners {
            let _ = l.await;
        }
    });

    let opened = tokio::select! {
        opened = AppState::open(&cfg, lifecycle.clone(), stats) => opened,
        reason = shutdown_signal() => {
            tracing::info!(reason, "shutting down before the start completed");
            let _ = stop.send(true);
            let _ = accepting.await;
            return Ok(());
        }
    };
    let state = match opened {
        Ok(state) => Arc::new(state),
        Err(e) => {
            let _ = stop.send(true);
            let _ = accepting.await;
            return Err(e);
        }
    };
    let audit = state.audit.clone();
    // The audit chain's anchors: (log, key, the Rekor v2 log, whichever is active) while the server runs.
    let anchoring = match (&state.audit, &state.audit_key) {
        (Some(log), Some(key)) => Some((log.clone(), key.clone(), state.rekor_v2.clone())),
        _ => None,
    };
    let anchor_every = Duration::from_secs(cfg.guard.audit.anchor_interval_secs);
    let anchor_task = match &anchoring {
        Some((log, key, v2)) if !anchor_every.is_zero() => {
            let after = anchored_seq(log).await;
            log.anchored_earlier(after);
            let policy = cfg.guard.audit.segment_policy();
            Some(tokio::spawn(anchor::run(log.clone(), v2.clone(), key.clone(), anchor_every, after, policy)))
        }
        _ => None,
    };
    let tuf_task = state.tuf.clone().map(|tuf| tokio::spawn(tuf::run(tuf)));
    // On PostgreSQL: rotations of the Rekor v1 log made through other instances.
    let rotations_task = api::rekor_v1::watch_rotations(state.clone());
    // TSA and intermediate rotations scheduled ahead (`signet trust rotate --at`).
    let scheduled_task = {
        let opener = state.rekor_v1.opener();
        let shared = opener.shared.as_ref().map(|pg| (pg.clone() as Arc<dyn signet_log::storage::Storage>, opener.seal.clone()));
        let watch = rotate::watch::Watch { data_dir: cfg.data_dir.clone(), pkcs11: cfg.keys.pkcs11(), shared };
        rotate::watch::watch(state.clone(), watch)
    };
    let watermarks = state.watermarks.clone();
    let marked = state.clone();
    let watermark_task = {
        let state = state.clone();
        tokio::spawn(watermarks.clone().run(move || state.logs_taking_appends()))
    };
    // It reads this instance through its public routes, so it starts after the ready line.
    let monitor = match state.monitor_metrics.clone().map(|m| monitoring::prepare(
        &cfg.monitor,
        matches!(cfg.tls.mode(cfg.dev), config::TlsMode::Issued).then(|| signet_ca::serving::certificate_path(&cfg.data_dir)),
        &cfg.data_dir,
        &url,
        state.rekor_v2.clone(),
        m,
    )) {
        Some(Ok(prepared)) => prepared,
        Some(Err(e)) => {
            let _ = stop.send(true);
            let _ = accepting.await;
            return Err(e.into());
        }
        None => None,
    };
    let guard = state.guard.clone();
    let startup = startup_line(&cfg, &state);
    let access = Arc::new(access::Access { log: cfg.http.access_log, audited: state.audit.is_some() });
    let public = cfg.http.surfaces(cfg.dev).into_iter().next().map_or_else(|| vec![config::Surface::Public], |(_, s)| s);
    for (slot, serves) in own_apps {
        let _ = slot.set(api::router(state.clone(), access.clone(), &serves));
    }
    let _ = app_slot.set(api::router(state, access, &public));
    lifecycle.ready();
    tracing::info!(
        listen = %local,
        scheme = cfg.scheme(),
        url = %url,
        tls = startup.tls.as_str(),
        storage = %startup.storage,
        guard = %startup.guard,
        audit = startup.audit,
        "signet started"
    );
    // The contract's ready line, on stdout. A failed write (a closed or full stdout) must not
    // take the server down: it is dropped.
    logging::stdout_line(&format!("signet listening on {url}"));
    if let Some(monitor) = monitor {
        monitor.spawn();
    }

    let reloading = tokio::spawn(reload_roles_on_hangup(cfg.source.clone(), guard));
    let reason = shutdown_signal().await;
    reloading.abort();
    if let Some(task) = tuf_task {
        task.abort();
    }
    watermark_task.abort();
    scheduled_task.abort();
    if let Some(task) = rotations_task {
        task.abort();
    }
    lifecycle.shutting_down();
    tracing::info!(reason, grace_secs = cfg.http.shutdown_grace_secs, "shutting down: no new connections; in-flight requests may finish");
    let _ = stop.send(true);
    let _ = accepting.await;
    // The requests answered before the shutdown are in the audit log before the process ends.
    if let Some(log) = audit {
        let _ = tokio::task::spawn_blocking(move || log.flush()).await;
    }
    // And what they hold is anchored, so that a tail deleted after the process ends is caught.
    if let (Some(task), Some((log, key, v2))) = (anchor_task, anchoring) {
        task.abort();
        let after = anchored_seq(&log).await;
        if let Err(e) = anchor::anchor_once(&log, &v2.log(), &key, after).await {
            tracing::warn!(error = %e, "anchoring the audit chain at shutdown failed");
        }
    }
    // What was acknowledged last is in the marks before the process ends.
    let logs = marked.logs_taking_appends();
    let _ = tokio::task::spawn_blocking(move || watermarks.write_now(&logs)).await;
    // Last: the anchoring above may still append. A standby takes over at once.
    lease::give_up().await;
    tracing::info!(reason, "signet stopped");
    // The spans of the last requests reach the collector before the process ends.
    let _ = tokio::task::spawn_blocking(otel::shutdown).await;
    Ok(())
}

/// What keeps a server's certificate current, before it starts.
enum Renewal {
    /// Re-read from these files.
    Files(FileSource),
    /// Issued by the instance's CA: the first certificate was issued at `issued_at`.
    Issued { issue: signet_tls::issued::Issue, issued_at: std::time::SystemTime, not_after: std::time::SystemTime },
}

/// ... and once it runs; dropped at shutdown.
#[allow(dead_code)] // held for their Drop
enum Renewing {
    Files(signet_tls::Reloader),
    Issued(signet_tls::issued::Renewer),
}

/// The acceptor of an `issued` server: the data dir's TLS CA (made on first start) issues a
/// certificate for the listen address, `localhost`, the loopback addresses and the public
/// URL's host, in memory; it is renewed at half its lifetime.
fn issued_tls(cfg: &Config) -> Result<(Acceptor, Renewal), StartError> {
    use signet_ca::serving::{ServingCa, ServingNames};
    let ca = ServingCa::open(&cfg.data_dir)?;
    let public_host = cfg.public_url.as_deref().map(config::host_of).transpose()?;
    let names = ServingNames::for_listener(cfg.listen.ip(), public_host.as_deref());
    let lifetime = cfg.tls.issued_lifetime();
    let issue: signet_tls::issued::Issue = Box::new(move || {
        let served = ca.issue(&names, lifetime).map_err(|e| signet_tls::CertError::Backend { backend: "signet TLS CA", why: e.to_string() })?;
        signet_tls::CertifiedPair::from_pem(served.certificate_pem.as_bytes(), served.key_pem.as_bytes(), "issued certificate", "issued key")
    });
    let issued_at = std::time::SystemTime::now();
    let pair = signet_tls::issued::first(&issue)?;
    let not_after = pair.not_after();
    let acceptor = Acceptor::with_client_auth(cfg.tls.backend()?, &pair, signet_tls::backend::HTTP_ALPN, None)?;
    Ok((acceptor, Renewal::Issued { issue, issued_at, not_after }))
}

/// The seq the audit chain is anchored to (0: no anchor, or none readable, which only
/// means the next anchor covers everything).
async fn anchored_seq(log: &signet_guard::audit::AuditLog) -> u64 {
    let place = log.place().clone();
    tokio::task::spawn_blocking(move || signet_guard::audit::anchor::last_seq(&place)).await.ok().and_then(Result::ok).unwrap_or(0)
}

struct Startup {
    tls: String,
    storage: String,
    guard: String,
    audit: bool,
}

fn startup_line(cfg: &Config, state: &AppState) -> Startup {
    let tls = match cfg.tls.mode(cfg.dev) {
        TlsMode::Plain => "off".to_string(),
        TlsMode::Files | TlsMode::Issued => tls_summary(&cfg.tls, cfg.dev),
    };
    let storage = cfg.storage_url().map(|u| u.display()).unwrap_or_else(|e| e.to_string());
    let g = &state.guard.config;
    let guard = if g.active() {
        format!("rate_limit={} auth={:?}", g.rate_limit.enabled, g.auth.require)
    } else {
        "off".to_string()
    };
    Startup { tls, storage, guard, audit: state.audit.is_some() }
}

/// `rustls 0.23.46, source cached (ttl 5 s)`: the backend, its library's version and the
/// certificate source, for the startup line. Called after validation.
fn tls_summary(tls: &config::TlsSettings, dev: bool) -> String {
    let backend = tls.backend().unwrap_or_default();
    let source = match tls.mode(dev) {
        TlsMode::Issued => signet_tls::SourceKind::Issued,
        _ => tls.source().unwrap_or_default(),
    };
    let ttl = match source {
        signet_tls::SourceKind::Cached => format!(" (ttl {} s)", tls.cache_ttl().as_secs()),
        signet_tls::SourceKind::Issued => format!(" (lifetime {} s)", tls.issued_lifetime().as_secs()),
        _ => String::new(),
    };
    format!("{backend} {}, source {source}{ttl}", backend.library_version())
}

/// On each SIGHUP, rereads the config file and puts its `[guard.roles]` in force: what each
/// role grants changes from the next request on, without a restart. A file that no longer
/// parses, or roles that are not valid, change nothing and are logged.
async fn reload_roles_on_hangup(source: Option<std::path::PathBuf>, guard: Arc<signet_guard::Guard>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot install a SIGHUP handler; role changes need a restart");
            return;
        };
        while hangups.recv().await.is_some() {
            let reread = Config::load(source.as_deref())
                .map_err(|e| e.to_string())
                .and_then(|c| signet_guard::Roles::with_custom(&c.guard.roles).map(|r| (r, c.guard.roles.len())).map_err(|e| e.to_string()));
            match reread {
                Ok((roles, custom)) => {
                    guard.set_roles(roles);
                    tracing::info!(custom_roles = custom, "SIGHUP: the role table was reread; other settings need a restart");
                }
                Err(e) => tracing::error!(error = %e, "SIGHUP: the role table was not changed"),
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (source, guard);
    }
}

async fn wait_for(mut stopped: watch::Receiver<bool>) {
    // An error means the sender is gone, which also means stop.
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Resolves on SIGINT or SIGTERM, naming which.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            _ => {
                tracing::warn!("cannot install signal handlers; stop signet with SIGKILL");
                std::future::pending().await
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    }
}
