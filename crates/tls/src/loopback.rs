//! A server on a loopback port, on a thread of its own with a single-threaded runtime, that
//! stops when dropped: the shape of the test servers ([`crate::testing`]) and of the servers
//! `signet bench tls` measures. What it does with a connection is the caller's.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

/// A running server; dropping it stops the server and joins its thread.
pub struct LoopbackServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LoopbackServer {
    /// Binds 127.0.0.1 on a free port, and runs `serve` with the listener on a new thread named
    /// `name`, until the server is dropped. `serve` is called on that thread, so that it can
    /// note the thread's identity first (the bench reads its CPU time).
    pub fn start<S, F>(name: String, serve: S) -> io::Result<LoopbackServer>
    where
        S: FnOnce(tokio::net::TcpListener) -> F + Send + 'static,
        F: Future<Output = ()>,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                tokio::select! {
                    _ = stopped => {}
                    () = serve(listener) => {}
                }
            })
        })?;
        Ok(LoopbackServer { addr, stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
