//! The HTTPS listener: TCP accepts, TLS handshakes, established streams handed to axum.
//!
//! axum's `serve` takes connections from a `Listener` one `accept` at a time. Running the
//! handshake inside `accept` would serialise handshakes, so that one slow or silent client
//! held up everyone behind it. Instead a background task accepts TCP and gives each
//! connection its own handshake task; finished streams queue on a channel that `accept`
//! reads. The app behind it is unchanged: it sees a stream that reads and writes.

use std::net::SocketAddr;

use signet_tls::{Acceptor, ServerStream};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Established TLS connections waiting for the HTTP server to take them.
const READY_QUEUE: usize = 1024;

pub struct TlsListener {
    ready: mpsc::Receiver<(ServerStream, SocketAddr)>,
    local: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Starts accepting on `tcp`; must be called inside a tokio runtime.
    pub fn new(tcp: TcpListener, acceptor: Acceptor) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        let accepting = tokio::spawn(accept_loop(tcp, acceptor, tx));
        Ok(TlsListener { ready, local, accepting })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept_loop(tcp: TcpListener, acceptor: Acceptor, ready: mpsc::Sender<(ServerStream, SocketAddr)>) {
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin, as axum does.
                tracing::warn!("accepting a TCP connection failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        // Without TCP_NODELAY a response split over two segments waits for the client's
        // delayed ACK: 40 ms stalls in the latency tail.
        let _ = stream.set_nodelay(true);
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            match acceptor.accept(stream).await {
                Ok(tls) => {
                    let _ = ready.send((tls, peer)).await;
                }
                // A scanner, a client that distrusts us, a timeout: that client's problem only.
                Err(e) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = ServerStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (ServerStream, SocketAddr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accept task holds a sender until it ends, and it ends only when aborted
            // by our own drop: never while we are accepting.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
