//! A TCP proxy between one signet instance and PostgreSQL that reads the wire protocol, so
//! that it can do to a COMMIT what real networks do: lose its answer after the server ran it,
//! deliver it late, or hold it while the instance is paused. Toxiproxy sees bytes, not
//! statements, so it cannot aim at a COMMIT; this proxy parses just enough of the protocol
//! (message type and length, the text of a simple query) to do that.
//!
//! Plaintext only: the test cluster listens on loopback without TLS, and a connection that
//! negotiates TLS anyway is passed through untouched (and no COMMIT fault can reach it).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does to the next COMMIT it sees, on any of its connections.
pub enum CommitFault {
    /// Forward it, let the server commit, then cut the connection instead of answering.
    LoseAnswer,
    /// Hold it this long, then forward it, whether the client is still there or not.
    Delay(Duration),
    /// Say so on `seen`, and forward it only when `release` says so.
    Hold { seen: SyncSender<()>, release: Receiver<()> },
}

#[derive(Default)]
struct Control {
    commit_fault: Mutex<Option<CommitFault>>,
    /// Nothing moves either way while set: a partition that heals.
    black_hole: AtomicBool,
    /// Added before each forwarded message, in microseconds.
    latency_us: AtomicU64,
    /// Every open socket pair, for `reset`.
    open: Mutex<Vec<(TcpStream, TcpStream)>>,
    /// COMMITs seen, and their answers lost, for the test's report.
    commits: AtomicU64,
    lost: AtomicU64,
}

pub struct PgProxy {
    pub addr: SocketAddr,
    control: Arc<Control>,
}

impl PgProxy {
    pub fn start(upstream: SocketAddr) -> PgProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let control = Arc::new(Control::default());
        let c = control.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                    c.open.lock().unwrap().push((a, b));
                }
                let conn = Arc::new(Conn::default());
                let (c1, c2, conn2) = (c.clone(), c.clone(), conn.clone());
                let (client2, server2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || to_server(client, server, &c1, &conn));
                std::thread::spawn(move || to_client(server2, client2, &c2, &conn2));
            }
        });
        PgProxy { addr, control }
    }

    /// `url` (a `postgres://` storage URL) with its host and port replaced by this proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (authority, path) = rest.split_once('/').unwrap();
        let userinfo = authority.rsplit_once('@').map(|(u, _)| format!("{u}@")).unwrap_or_default();
        format!("{scheme}://{userinfo}{}/{path}", self.addr)
    }

    pub fn arm(&self, fault: CommitFault) {
        *self.control.commit_fault.lock().unwrap() = Some(fault);
    }

    /// Whether an armed COMMIT fault is still waiting for its COMMIT.
    pub fn armed(&self) -> bool {
        self.control.commit_fault.lock().unwrap().is_some()
    }

    pub fn disarm(&self) {
        *self.control.commit_fault.lock().unwrap() = None;
    }

    pub fn black_hole(&self, on: bool) {
        self.control.black_hole.store(on, Ordering::SeqCst);
    }

    pub fn latency(&self, per_message: Duration) {
        self.control.latency_us.store(per_message.as_micros() as u64, Ordering::SeqCst);
    }

    /// Cuts every open connection, mid-transaction or not.
    pub fn reset(&self) {
        for (a, b) in self.control.open.lock().unwrap().drain(..) {
            let _ = (a.shutdown(Shutdown::Both), b.shutdown(Shutdown::Both));
        }
    }

    /// (COMMITs seen, answers lost).
    pub fn counts(&self) -> (u64, u64) {
        (self.control.commits.load(Ordering::Relaxed), self.control.lost.load(Ordering::Relaxed))
    }
}

/// One connection's parse state, shared by its two directions.
#[derive(Default)]
struct Conn {
    /// Single unframed bytes the server will send (answers to SSLRequest or GSSENCRequest).
    unframed: AtomicU64,
    /// TLS was negotiated: bytes pass through unparsed.
    opaque: AtomicBool,
    /// The next CommandComplete or ErrorResponse answers a COMMIT whose answer is to be lost.
    lose_answer: AtomicBool,
}

const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

fn be32(b: &[u8]) -> usize {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
}

fn cut(a: &TcpStream, b: &TcpStream) {
    let _ = (a.shutdown(Shutdown::Both), b.shutdown(Shutdown::Both));
}

/// Reads the next bytes: passed straight on once the connection is opaque, else added to
/// `buf` for parsing. False when either side is done.
fn read_more(from: &mut TcpStream, to: &mut TcpStream, conn: &Conn, chunk: &mut [u8], buf: &mut Vec<u8>) -> bool {
    loop {
        let n = match from.read(chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        if !conn.opaque.load(Ordering::SeqCst) {
            buf.extend_from_slice(&chunk[..n]);
            return true;
        }
        if to.write_all(&chunk[..n]).is_err() {
            return false;
        }
    }
}

/// Stops parsing the connection, and sends on what was waiting to be parsed.
fn go_opaque(conn: &Conn, buf: &mut Vec<u8>, to: &mut TcpStream) -> bool {
    conn.opaque.store(true, Ordering::SeqCst);
    to.write_all(&std::mem::take(buf)).is_ok()
}

/// Waits out a black hole and the configured latency before a message moves.
fn gate(control: &Control) {
    while control.black_hole.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let us = control.latency_us.load(Ordering::SeqCst);
    if us > 0 {
        std::thread::sleep(Duration::from_micros(us));
    }
}

/// Client to server: the startup exchange unframed, then typed messages, watching for COMMIT.
fn to_server(mut from: TcpStream, mut to: TcpStream, control: &Control, conn: &Conn) {
    let mut buf: Vec<u8> = Vec::new();
    let mut started = false;
    let mut chunk = [0u8; 16 * 1024];
    while read_more(&mut from, &mut to, conn, &mut chunk, &mut buf) {
        loop {
            // Before the StartupMessage: length-prefixed, no type byte.
            let (len, typed) = if started {
                if buf.len() < 5 {
                    break;
                }
                (1 + be32(&buf[1..5]), true)
            } else {
                if buf.len() < 8 {
                    break;
                }
                (be32(&buf[0..4]), false)
            };
            if len < if typed { 5 } else { 8 } {
                // Not the protocol this proxy knows: pass everything through from here on.
                if !go_opaque(conn, &mut buf, &mut to) {
                    return cut(&from, &to);
                }
                break;
            }
            if buf.len() < len {
                break;
            }
            let message: Vec<u8> = buf.drain(..len).collect();
            if !typed {
                let code = be32(&message[4..8]) as u32;
                if code == SSL_REQUEST || code == GSSENC_REQUEST {
                    conn.unframed.fetch_add(1, Ordering::SeqCst);
                } else {
                    started = true;
                }
            } else if message[0] == b'Q' && is_commit(&message[5..]) {
                control.commits.fetch_add(1, Ordering::Relaxed);
                let fault = control.commit_fault.lock().unwrap().take();
                match fault {
                    Some(CommitFault::LoseAnswer) => {
                        control.lost.fetch_add(1, Ordering::Relaxed);
                        conn.lose_answer.store(true, Ordering::SeqCst);
                    }
                    Some(CommitFault::Delay(d)) => std::thread::sleep(d),
                    Some(CommitFault::Hold { seen, release }) => {
                        let _ = seen.send(());
                        let _ = release.recv_timeout(Duration::from_secs(60));
                    }
                    None => {}
                }
            }
            gate(control);
            if to.write_all(&message).is_err() {
                return cut(&from, &to);
            }
        }
    }
    // The client is gone: the server hears EOF after whatever was forwarded (a delayed
    // COMMIT included), which is what a client that hangs up looks like.
    let _ = to.shutdown(Shutdown::Write);
}

fn is_commit(query: &[u8]) -> bool {
    let text = String::from_utf8_lossy(query);
    let text = text.trim_end_matches('\0').trim().trim_end_matches(';').trim();
    text.eq_ignore_ascii_case("COMMIT") || text.eq_ignore_ascii_case("END")
}

/// Server to client: framed messages, except the one-byte answers to TLS requests.
fn to_client(mut from: TcpStream, mut to: TcpStream, control: &Control, conn: &Conn) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    while read_more(&mut from, &mut to, conn, &mut chunk, &mut buf) {
        loop {
            if conn.unframed.load(Ordering::SeqCst) > 0 {
                let Some(&answer) = buf.first() else { break };
                buf.drain(..1);
                conn.unframed.fetch_sub(1, Ordering::SeqCst);
                if answer == b'S' || answer == b'G' {
                    conn.opaque.store(true, Ordering::SeqCst);
                }
                if to.write_all(&[answer]).is_err() {
                    return cut(&from, &to);
                }
                if conn.opaque.load(Ordering::SeqCst) {
                    if !go_opaque(conn, &mut buf, &mut to) {
                        return cut(&from, &to);
                    }
                    break;
                }
                continue;
            }
            if buf.len() < 5 {
                break;
            }
            let len = 1 + be32(&buf[1..5]);
            if len < 5 {
                if !go_opaque(conn, &mut buf, &mut to) {
                    return cut(&from, &to);
                }
                break;
            }
            if buf.len() < len {
                break;
            }
            let message: Vec<u8> = buf.drain(..len).collect();
            if answers_commit(&message) && conn.lose_answer.swap(false, Ordering::SeqCst) {
                // The server has run the COMMIT; its client never hears how it went.
                return cut(&from, &to);
            }
            gate(control);
            if to.write_all(&message).is_err() {
                return cut(&from, &to);
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// CommandComplete with COMMIT's tag (ROLLBACK when the transaction had failed), or an error.
fn answers_commit(message: &[u8]) -> bool {
    match message[0] {
        b'C' => message[5..].starts_with(b"COMMIT") || message[5..].starts_with(b"ROLLBACK"),
        b'E' => true,
        _ => false,
    }
}

/// A `Hold` fault and its two ends: wait on the first, release with the second.
pub fn hold() -> (CommitFault, Receiver<()>, SyncSender<()>) {
    let (seen_tx, seen_rx) = sync_channel(1);
    let (release_tx, release_rx) = sync_channel(1);
    (CommitFault::Hold { seen: seen_tx, release: release_rx }, seen_rx, release_tx)
}
