//! The servers `signet bench tls` starts in its own process, one per backend, on loopback.
//!
//! Each runs on its own single-threaded runtime on its own thread, the way nginx runs with
//! one worker: the client (on the bench's thread) and the server each have a core on a
//! two-core machine, and neither backend gets more threads than the other.
//!
//! - echo: every byte read is written back, over the backend's stream (report 003's method).
//! - get: HTTP/1.1 (hyper, as `signet serve` uses it) answering `GET /bytes/N` with N bytes
//!   from memory; the like-for-like peer of a web server serving static files.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use signet_tls::loopback::LoopbackServer;
use signet_tls::{Acceptor, ServerStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What an in-process server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Echo,
    Get,
}

/// A running server; it stops when dropped.
pub struct LocalServer {
    pub addr: SocketAddr,
    /// The kernel id of the server's thread, for its CPU time.
    pub tid: Option<u32>,
    _server: LoopbackServer,
}

impl LocalServer {
    pub fn start(acceptor: Acceptor, method: Method) -> std::io::Result<LocalServer> {
        let (told, tid) = std::sync::mpsc::channel();
        let name = format!("bench-tls-{}", acceptor.backend());
        let server = LoopbackServer::start(name, move |listener| {
            let _ = told.send(super::cpu::current_tid());
            serve(listener, acceptor, method)
        })?;
        let tid = tid.recv().ok().flatten();
        Ok(LocalServer { addr: server.addr, tid, _server: server })
    }
}

async fn serve(listener: tokio::net::TcpListener, acceptor: Acceptor, method: Method) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            match method {
                Method::Echo => echo(tls).await,
                Method::Get => get(tls).await,
            }
        });
        // Reap finished connections so that thousands of handshakes do not pile up.
        while connections.try_join_next().is_some() {}
    }
}

async fn echo(mut tls: ServerStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tls.write_all(&buf[..n]).await.is_err() || tls.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The largest body `GET /bytes/N` serves.
pub const MAX_BODY: usize = 1 << 20;

async fn get(tls: ServerStream) {
    let zeros = Bytes::from(vec![0u8; MAX_BODY]);
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let size = req.uri().path().strip_prefix("/bytes/").and_then(|n| n.parse::<usize>().ok()).filter(|n| *n <= MAX_BODY);
        let response = match size {
            Some(n) => hyper::Response::builder()
                .header("content-type", "application/octet-stream")
                .body(Full::new(zeros.slice(..n))),
            None => hyper::Response::builder().status(404).body(Full::new(Bytes::from_static(b"no such size\n"))),
        };
        async move { Ok::<_, Infallible>(response.expect("a valid response")) }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
}
