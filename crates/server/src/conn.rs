//! Connections: accepting, capping, timing out, and draining them.
//!
//! axum's `serve` has no header-read timeout, no connection cap and no bound on graceful
//! shutdown, so a few thousand silent sockets could starve signet and one half-sent
//! request could hold a SIGTERM for as long as the client liked. This loop drives hyper
//! directly:
//!
//! - **Cap.** At most `http.max_connections` are open (TLS handshakes included). Past it, a
//!   new connection is closed as soon as it is accepted: the client learns at once, and the
//!   loop never spins, because it only wakes for real connections.
//! - **Header timeout.** A request's headers must arrive within `header_read_timeout_secs`
//!   of the connection opening or the previous response (hyper's HTTP/1 timer, which also
//!   ends idle keep-alive connections); a TLS handshake has the same bound.
//! - **Idle timeout.** A connection on which nothing is read or written for
//!   `idle_timeout_secs` is closed, whatever the protocol (this is what ends a stalled
//!   request body, or an HTTP/2 connection that stopped talking).
//! - **Shutdown.** When `shutdown` resolves, the listener closes, open connections are told
//!   to finish (HTTP/1 stops keep-alive, HTTP/2 sends GOAWAY), and after at most
//!   `shutdown_grace_secs` whatever is left is dropped.
//! - **close_notify.** Over TLS every close says so, the dropped ones included (a timeout,
//!   the end of the grace): a client can tell a finished connection from a cut one.
//! - **Held answers.** With the audit log in closed mode, an HTTP/1 answer's bytes wait in
//!   the connection's [`gate`] until its record is durable.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use signet_guard::audit::HoldsOutput;
use signet_tls::{Acceptor, ServerStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::config::HttpSettings;
use gate::OutputGate;

pub mod gate;

/// Counters of the connection layer, for `/metrics`.
pub struct ConnStats {
    pub open: AtomicU64,
    /// Closed at accept because `max_connections` were open.
    pub refused: AtomicU64,
    /// Closed because nothing was read or written for `idle_timeout_secs`.
    pub idle_closed: AtomicU64,
    /// TLS handshakes by outcome: [`TLS_OUTCOMES`].
    pub tls_handshakes: [AtomicU64; 4],
    /// How long completed handshakes took.
    pub tls_handshake_seconds: signet_core::histogram::Histogram,
    /// The served certificate's notAfter (Unix seconds); 0 without TLS.
    pub tls_not_after: std::sync::atomic::AtomicI64,
    /// The TLS backend and certificate source, for `signet_tls_info`; none without TLS.
    pub tls_info: Option<(signet_tls::Backend, signet_tls::SourceKind)>,
}

/// The `outcome` label of `signet_tls_handshakes_total`, in [`ConnStats::tls_handshakes`]' order.
pub const TLS_OUTCOMES: [&str; 4] = ["tls1.3", "tls1.2", "failed", "timeout"];

/// Handshakes take milliseconds on loopback and tens of them across the world.
const HANDSHAKE_SECONDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

impl Default for ConnStats {
    fn default() -> Self {
        ConnStats {
            open: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
            tls_handshakes: Default::default(),
            tls_handshake_seconds: signet_core::histogram::Histogram::new(HANDSHAKE_SECONDS),
            tls_not_after: Default::default(),
            tls_info: None,
        }
    }
}

/// What the accept loop serves: the app once it is open. Until then (and for a request that
/// arrives before `set`), a small router answers `/healthz` and says "not ready".
pub type AppSlot = Arc<OnceLock<Router>>;

pub struct Server {
    pub settings: HttpSettings,
    pub tls: Option<Acceptor>,
    pub app: AppSlot,
    pub starting: Router,
    pub stats: Arc<ConnStats>,
    /// The audit log is on: each request carries its connection's output gate for it.
    pub audited: bool,
}

impl Server {
    /// Accepts on `listener` until `shutdown` resolves, then drains (bounded) and returns.
    pub async fn run(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let limits = Arc::new(Semaphore::new(self.settings.max_connections));
        let graceful = GracefulShutdown::new();
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            // hyper's own cap of 100 headers keeps one request's parse bounded. Setting the
            // same cap through `max_headers` makes hyper build its two header tables at run
            // time, 200 entries filled on every parse, for the same bound (issue 40).
            .header_read_timeout(Duration::from_secs(self.settings.header_read_timeout_secs));
        let this = Arc::new(self);
        tokio::pin!(shutdown);
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: back off rather than spin.
                        tracing::warn!(error = %e, "accepting a connection failed; retrying in 100 ms");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let Ok(permit) = limits.clone().try_acquire_owned() else {
                this.stats.refused.fetch_add(1, Ordering::Relaxed);
                drop(tcp);
                continue;
            };
            // Without TCP_NODELAY a response split over two segments waits for the client's
            // delayed ACK: 40 ms stalls in the latency tail.
            let _ = tcp.set_nodelay(true);
            let (this, builder, watcher) = (this.clone(), builder.clone(), graceful.watcher());
            tokio::spawn(async move {
                this.stats.open.fetch_add(1, Ordering::Relaxed);
                this.serve_one(tcp, peer, builder, watcher).await;
                this.stats.open.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
            });
        }
        drop(listener);
        let grace = Duration::from_secs(this.settings.shutdown_grace_secs);
        let open = graceful.count();
        if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
            tracing::warn!(open, grace_secs = grace.as_secs(), "connections still open after the shutdown grace period were closed");
        }
    }

    async fn serve_one(&self, tcp: TcpStream, peer: SocketAddr, builder: auto::Builder<TokioExecutor>, watcher: hyper_util::server::graceful::Watcher) {
        // Idle from the connection's start: untouched, it would count as idle since the process
        // started (today the header timeout ends such a connection first, but not by design).
        let activity = Arc::new(Activity::default());
        activity.touch();
        let header_timeout = Duration::from_secs(self.settings.header_read_timeout_secs);
        let (app, starting, audited) = (self.app.clone(), self.starting.clone(), self.audited);
        // Each request of the connection carries its address and, over mTLS, the client's
        // verified certificate (its SANs, read once per connection), for the guard.
        let service = move |certificate: Option<signet_guard::ClientCertificate>, gate: Arc<OutputGate>| {
            TowerToHyperService::new(tower::service_fn(move |mut request: axum::http::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                // Only the audit layer reads the gate. Without it, one entry fewer keeps a request's
                // extensions within their first allocation (docs/performance.md).
                if audited {
                    request.extensions_mut().insert(HoldsOutput(gate.clone()));
                }
                if let Some(certificate) = &certificate {
                    request.extensions_mut().insert(certificate.clone());
                }
                let router = app.get().cloned().unwrap_or_else(|| starting.clone());
                router.oneshot(request)
            }))
        };
        let idle = Duration::from_secs(self.settings.idle_timeout_secs);
        match &self.tls {
            None => {
                let gate = OutputGate::new(Some(std::os::fd::AsRawFd::as_raw_fd(&tcp)));
                let io = TokioIo::new(Watched { inner: tcp, activity: activity.clone(), gate: gate.clone() });
                let conn = watcher.watch(builder.serve_connection_with_upgrades(io, service(None, gate)).into_owned());
                self.until_idle(conn, &activity, idle).await;
            }
            Some(acceptor) => {
                let started = std::time::Instant::now();
                let handshake = tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await;
                let count = |outcome: usize| {
                    if let Some(c) = self.stats.tls_handshakes.get(outcome) {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                };
                let stream = match handshake {
                    Ok(Ok(stream)) => stream,
                    // A scanner, a client that distrusts us, a timeout: that client's problem only.
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                        count(3);
                        return tracing::debug!("TLS handshake with {peer} timed out: {e}");
                    }
                    Ok(Err(e)) => {
                        count(2);
                        return tracing::debug!("TLS handshake with {peer} failed: {e}");
                    }
                    Err(_) => {
                        count(3);
                        return tracing::debug!("TLS handshake with {peer} timed out");
                    }
                };
                self.stats.tls_handshake_seconds.observe(started.elapsed().as_secs_f64());
                count(if stream.is_tls13() { 0 } else { 1 });
                self.stats.tls_not_after.store(acceptor.certificate_not_after(), Ordering::Relaxed);
                let certificate = stream.peer_certificate().map(|der| signet_guard::ClientCertificate::new(signet_tls::subject_alt_names(&der)));
                let gate = OutputGate::new(None);
                let io = TokioIo::new(Watched { inner: stream, activity: activity.clone(), gate: gate.clone() });
                let conn = watcher.watch(builder.serve_connection_with_upgrades(io, service(certificate, gate)).into_owned());
                self.until_idle(conn, &activity, idle).await;
            }
        }
    }

    /// Drives `conn` to its end, or drops it once it has been idle for `idle`.
    async fn until_idle<F: Future>(&self, conn: F, activity: &Activity, idle: Duration) {
        tokio::pin!(conn);
        let check = (idle / 4).max(Duration::from_millis(250));
        loop {
            tokio::select! {
                _ = &mut conn => return,
                () = tokio::time::sleep(check) => {
                    if activity.idle_for() >= idle {
                        self.stats.idle_closed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }
    }
}

/// When a connection last moved a byte, in milliseconds since the process's first use.
#[derive(Default)]
struct Activity {
    last_ms: AtomicU64,
}

fn clock_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl Activity {
    fn touch(&self) {
        self.last_ms.store(clock_ms(), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        Duration::from_millis(clock_ms().saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// A stream that notes the time of every read and write that moved bytes, and that says
/// goodbye when dropped ([`CloseOnDrop`]).
struct Watched<S: CloseOnDrop> {
    inner: S,
    activity: Arc<Activity>,
    /// Answers held until their audit records are durable ([`gate`]).
    gate: Arc<OutputGate>,
}

/// What a connection's stream does when the connection is dropped rather than shut down.
/// hyper shuts a stream down (TLS close_notify, then FIN) only when it closes gracefully;
/// a connection ended by the header or idle timeout, or by the end of the shutdown grace, is
/// dropped, and a TLS client then sees a truncation (an EOF without close_notify) where
/// there was none.
trait CloseOnDrop {
    fn close_now(&mut self) {}
}

impl CloseOnDrop for TcpStream {}

impl CloseOnDrop for ServerStream {
    /// Queues close_notify and writes it if the socket takes it now: best effort, never a
    /// wait (a second one after a graceful close is not sent: both libraries keep track).
    fn close_now(&mut self) {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self {
            ServerStream::Rustls(s) => {
                s.get_mut().1.send_close_notify();
                let _ = Pin::new(&mut **s).poll_flush(&mut cx);
            }
            ServerStream::Openssl(s) => {
                let _ = Pin::new(&mut **s).poll_shutdown(&mut cx);
            }
        }
    }
}

impl<S: CloseOnDrop> Drop for Watched<S> {
    fn drop(&mut self) {
        // Before the descriptor closes: the gate must not write to a number reused since.
        self.gate.close();
        self.inner.close_now();
    }
}

impl<S: AsyncRead + CloseOnDrop + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + CloseOnDrop + Unpin> Watched<S> {
    /// Sends the held answers that may go; Ready with whether answers are still held, and
    /// then the gate knows this task (`waiting`: it will wait for the gate, not the socket).
    fn poll_drain(&mut self, cx: &mut Context<'_>, waiting: bool) -> Poll<std::io::Result<bool>> {
        loop {
            let Watched { inner, gate, .. } = &mut *self;
            let holding = std::task::ready!(gate.poll_drain(|bytes| Pin::new(&mut *inner).poll_write(cx, bytes)))?;
            // Released in between: drain again (a no-op unless the gate left bytes to us).
            if !holding || gate.wake_me(cx.waker(), waiting) {
                return Poll::Ready(Ok(holding));
            }
        }
    }

    fn note(&mut self, polled: &Poll<std::io::Result<usize>>, asked: usize) {
        if let Poll::Ready(Ok(n)) = polled {
            if *n > 0 {
                self.activity.touch();
            }
        }
        self.gate.note_backlog(!matches!(polled, Poll::Ready(Ok(n)) if *n == asked));
    }
}

impl<S: AsyncWrite + CloseOnDrop + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.gate.busy() {
            std::task::ready!(self.poll_drain(cx, false))?;
            if let Some(taken) = std::task::ready!(self.gate.hold_write(&[std::io::IoSlice::new(buf)], cx.waker())) {
                return Poll::Ready(Ok(taken));
            }
        }
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(&polled, buf.len());
        polled
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        if self.gate.busy() {
            std::task::ready!(self.poll_drain(cx, false))?;
            if let Some(taken) = std::task::ready!(self.gate.hold_write(bufs, cx.waker())) {
                return Poll::Ready(Ok(taken));
            }
        }
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note(&polled, bufs.iter().map(|b| b.len()).sum());
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Held answers stay held: flushed as far as hyper can tell, and the gate sends them or
        // wakes this task when they may go.
        if self.gate.busy() {
            std::task::ready!(self.poll_drain(cx, false))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Held answers first: the gate wakes this task when they may go.
        if self.gate.busy() && std::task::ready!(self.poll_drain(cx, true))? {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Raises the soft limit on open files to the hard limit, so that the connection cap, not
/// the descriptor table, is what bounds connections. Returns the limit now in force.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok(limit.rlim_cur)
}
