//! Holding an HTTP/1 answer's bytes, rather than its future, until its audit record is durable.
//!
//! The connection's own mechanism, not the guard's: the audit layer knows only that a request
//! may carry a [`HoldsOutput`](signet_guard::audit::batch::HoldsOutput) (a typed extension this module's gate fills) and asks it to hold
//! what the connection writes next until a [`Receipt`](signet_guard::audit::Receipt)'s batch is
//! told. Nothing in the guard touches a socket.
//!
//! In closed mode an answer must not leave before its record is on disk. Holding the answer's
//! future costs a second poll of the whole connection task when the batch commits: hyper, every
//! layer's future and the answer's encoding, milliseconds later and cold in cache (a large share of
//! a read's cost: docs/performance.md, "The measurements behind the code's shape"). Instead, over
//! HTTP/1, the answer is finished and encoded at once, and the connection's stream keeps its bytes
//! in an [`OutputGate`]. When the batch commits, the writer's side sends them itself on a plain TCP
//! socket, so the connection task is woken by nothing but the client's next request; over TLS (or
//! when the socket is full) it wakes the task, whose stream writes them.
//!
//! Every byte written after a hold belongs behind it: the held answer, and whatever a pipelining
//! client's later answers add. A failed batch answers its request with a 503 and closes the
//! connection, or, when the held bytes may have begun with the tail of an earlier answer, just
//! closes it: a client never reads half an answer followed by another.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};

use parking_lot::Mutex;

use signet_guard::audit::batch::{BatchSignal, HeldOutput};

/// The bytes a connection's stream holds back, and how to send them when they may go.
pub struct OutputGate {
    state: Mutex<State>,
    /// Bytes are held, or a held batch failed. Only the connection task sets it (it is the one
    /// that holds), so when it reads false its stream writes straight through, unlocked.
    busy: AtomicBool,
    /// The stream's last write left bytes in hyper's buffer (the socket was full): a hold that
    /// starts now may begin with the tail of the previous answer. The connection task's own.
    backlog: AtomicBool,
    /// The plain TCP socket, which the gate may write to from another thread; none over TLS.
    fd: Option<RawFd>,
}

struct State {
    held: VecDeque<Held>,
    /// False once the stream is dropped: from then on its descriptor may name another socket.
    open: bool,
    /// The connection task, for what the gate cannot send itself.
    waker: Option<Waker>,
    /// The task waits on the gate (a shutdown, or a full hold), so it is woken on any release.
    waiting: bool,
    /// A held batch failed: what is left is the refusal, then the end of the connection.
    failed: bool,
}

struct Held {
    /// The batch this segment waits for; none once it may go.
    signal: Option<Arc<BatchSignal>>,
    bytes: Vec<u8>,
    sent: usize,
    /// The segment starts at an answer's first byte: on failure, a 503 may replace it.
    clean: bool,
}

/// The most a connection holds; past it, its writes wait for the record.
pub const HOLD_MAX: usize = 256 * 1024;

/// The whole answer to a request whose batch failed, for a connection that then closes: the
/// 503 the audit layer gives, framed by hand.
fn refusal() -> Vec<u8> {
    let body = serde_json::json!({"code": 503, "message": signet_guard::audit::UNAVAILABLE}).to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl OutputGate {
    /// `fd`: the plain socket under the stream, if there is one.
    pub fn new(fd: Option<RawFd>) -> Arc<OutputGate> {
        let state = State { held: VecDeque::new(), open: true, waker: None, waiting: false, failed: false };
        Arc::new(OutputGate { state: Mutex::new(state), busy: AtomicBool::new(false), backlog: AtomicBool::new(false), fd })
    }

    /// Lets the stream write straight through once nothing is held. Under the state's lock.
    fn settle(&self, s: &State) {
        if s.held.is_empty() && !s.failed {
            // Release: the bytes this gate sent come before whatever the stream writes next.
            self.busy.store(false, Ordering::Release);
        }
    }

    /// Whether the stream must go through the gate (see `busy`).
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// For the stream's writes: Ready(Some(n)) when it took `n` bytes of `bufs` behind held
    /// ones, Ready(None) when nothing is held and they go straight through, Pending when it
    /// holds [`HOLD_MAX`] already (a large answer waits for its record, rather than being
    /// buffered whole).
    pub fn hold_write(&self, bufs: &[io::IoSlice<'_>], waker: &Waker) -> Poll<Option<usize>> {
        let mut s = self.state.lock();
        let held: usize = s.held.iter().map(|h| h.bytes.len() - h.sent.min(h.bytes.len())).sum();
        if s.failed {
            // Swallowed: the connection ends once the refusal is out.
            return Poll::Ready(Some(bufs.iter().map(|b| b.len()).sum()));
        }
        if s.held.is_empty() {
            return Poll::Ready(None);
        }
        remember(&mut s.waker, waker);
        let room = HOLD_MAX.saturating_sub(held);
        if room == 0 {
            s.waiting = true;
            return Poll::Pending;
        }
        let Some(last) = s.held.back_mut() else { return Poll::Ready(None) };
        let mut taken = 0;
        for b in bufs {
            let take = b.len().min(room - taken);
            last.bytes.extend_from_slice(b.get(..take).unwrap_or_default());
            taken += take;
            if taken == room {
                break;
            }
        }
        Poll::Ready(Some(taken))
    }

    /// Writes what may go through `write` (the stream's own), in order. Ready when nothing
    /// releasable is left, with whether bytes are still held (then call [`Self::wake_me`]);
    /// an error once a held batch failed and its refusal is out.
    pub fn poll_drain(&self, mut write: impl FnMut(&[u8]) -> Poll<io::Result<usize>>) -> Poll<io::Result<bool>> {
        let mut s = self.state.lock();
        let mut pending = false;
        s.send(|bytes| match write(bytes) {
            Poll::Ready(r) => r,
            Poll::Pending => {
                pending = true;
                Err(io::ErrorKind::WouldBlock.into())
            }
        });
        if pending {
            return Poll::Pending;
        }
        self.settle(&s);
        if s.failed && s.held.is_empty() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "an audit record was not made durable")));
        }
        Poll::Ready(Ok(!s.held.is_empty()))
    }

    /// The connection task, to wake if held bytes need it (to send them, or to close); with
    /// `waiting`, to wake at the next release whatever it is (the task waits on the gate).
    /// False when nothing is held any more (released since the caller looked).
    pub fn wake_me(&self, waker: &Waker, waiting: bool) -> bool {
        let mut s = self.state.lock();
        if s.held.is_empty() {
            return false;
        }
        remember(&mut s.waker, waker);
        s.waiting |= waiting;
        true
    }

    /// Whether the stream's last write left bytes behind in hyper's buffer.
    pub fn note_backlog(&self, backlog: bool) {
        self.backlog.store(backlog, Ordering::Relaxed);
    }

    /// The stream is going: the descriptor is no longer ours to write to.
    pub fn close(&self) {
        let mut s = self.state.lock();
        s.open = false;
        s.held.clear();
    }
}

impl HeldOutput for OutputGate {
    /// Holds what is written from now on until `signal`'s batch is told. Called with the
    /// batch's waiter list locked, so that it cannot be told in between.
    fn hold(&self, signal: Arc<BatchSignal>) {
        let mut s = self.state.lock();
        let clean = !self.backlog.load(Ordering::Relaxed) && s.held.is_empty();
        s.held.push_back(Held { signal: Some(signal), bytes: Vec::new(), sent: 0, clean });
        self.busy.store(true, Ordering::Relaxed);
    }

    /// The batch of `signal` is told: its bytes go (or the connection ends), from this thread
    /// when the socket takes them, else from the connection task.
    fn release(&self, signal: &BatchSignal, durable: bool) {
        let mut s = self.state.lock();
        let Some(at) = s.held.iter().position(|h| h.signal.as_ref().is_some_and(|x| std::ptr::eq(Arc::as_ptr(x), signal))) else { return };
        if durable {
            if let Some(h) = s.held.get_mut(at) {
                h.signal = None;
            }
        } else {
            s.fail_from(at);
        }
        let done = match (self.fd, s.open) {
            (Some(fd), true) => s.send(|bytes| send(fd, bytes)),
            _ => false,
        };
        if let (Some(fd), true, true, true) = (self.fd, s.open, s.failed, s.held.is_empty()) {
            // The refusal is out: the client reads the end of the connection after it.
            // SAFETY: as for `send`.
            unsafe { libc::shutdown(fd, libc::SHUT_WR) };
        }
        self.settle(&s);
        if !done || s.failed || s.waiting {
            s.waiting = false;
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
    }
}

impl State {
    /// Sends released segments in order through `write` until one is held, or `write` takes
    /// no more. True when nothing releasable is left.
    fn send(&mut self, mut write: impl FnMut(&[u8]) -> io::Result<usize>) -> bool {
        while let Some(h) = self.held.front_mut() {
            if h.signal.is_some() {
                return true;
            }
            while h.sent < h.bytes.len() {
                match write(h.bytes.get(h.sent..).unwrap_or_default()) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => h.sent += n,
                }
            }
            self.held.pop_front();
        }
        true
    }

    /// The segment at `at` failed: it and everything after it is dropped; a clean one is
    /// replaced by the refusal.
    fn fail_from(&mut self, at: usize) {
        let clean = self.held.get(at).is_some_and(|h| h.clean && h.sent == 0);
        self.held.truncate(at);
        self.failed = true;
        if clean {
            self.held.push_back(Held { signal: None, bytes: refusal(), sent: 0, clean: true });
        }
    }
}

fn remember(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(w) if w.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

/// One non-blocking send on the plain socket.
fn send(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: `fd` is the connection's open socket: the gate's lock is held, and the stream
    // marks the gate closed under that lock before its descriptor is closed.
    let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use std::io::{IoSlice, Read};
    use std::os::fd::AsRawFd;
    use std::task::Waker;

    use super::*;
    use signet_guard::audit::batch::testing::batch as test_batch;
    use signet_guard::audit::batch::HoldsOutput;

    fn holds(gate: &Arc<OutputGate>) -> HoldsOutput {
        HoldsOutput(gate.clone())
    }

    /// Drains what may go into `out`; the poll's value.
    fn drain(gate: &OutputGate, out: &mut Vec<u8>) -> Poll<io::Result<bool>> {
        gate.poll_drain(|b| {
            out.extend_from_slice(b);
            Poll::Ready(Ok(b.len()))
        })
    }

    fn write(gate: &OutputGate, bytes: &[u8]) -> Poll<Option<usize>> {
        gate.hold_write(&[IoSlice::new(bytes)], Waker::noop())
    }

    #[test]
    fn with_nothing_held_writes_go_straight_through() {
        let gate = OutputGate::new(None);
        assert!(!gate.busy());
        assert_eq!(write(&gate, b"answer"), Poll::Ready(None));
    }

    #[test]
    fn held_bytes_go_in_order_once_their_batch_is_durable() {
        let gate = OutputGate::new(None);
        let (first, tell_first) = test_batch();
        let (second, tell_second) = test_batch();
        assert_eq!(first.hold_output(&holds(&gate)), None);
        assert!(gate.busy());
        assert_eq!(write(&gate, b"one,"), Poll::Ready(Some(4)));
        assert_eq!(second.hold_output(&holds(&gate)), None);
        assert_eq!(write(&gate, b"two"), Poll::Ready(Some(3)));
        let mut out = Vec::new();
        assert!(matches!(drain(&gate, &mut out), Poll::Ready(Ok(true))));
        assert!(out.is_empty(), "nothing goes before its record is durable");
        assert_eq!(tell_first(true), 0);
        assert!(matches!(drain(&gate, &mut out), Poll::Ready(Ok(true))));
        assert_eq!(out, b"one,", "the first answer goes; the second waits for its own batch");
        tell_second(true);
        assert!(matches!(drain(&gate, &mut out), Poll::Ready(Ok(false))));
        assert_eq!(out, b"one,two");
        assert!(!gate.busy(), "then writes go straight through again");
        assert_eq!(write(&gate, b"three"), Poll::Ready(None));
    }

    #[test]
    fn a_receipt_already_told_holds_nothing() {
        let gate = OutputGate::new(None);
        let (receipt, tell) = test_batch();
        tell(true);
        assert_eq!(receipt.hold_output(&holds(&gate)), Some(true));
        assert!(!gate.busy());
        let (receipt, tell) = test_batch();
        tell(false);
        assert_eq!(receipt.hold_output(&holds(&gate)), Some(false));
    }

    #[test]
    fn a_failed_batch_answers_503_and_ends_the_connection() {
        let gate = OutputGate::new(None);
        let (receipt, tell) = test_batch();
        assert_eq!(receipt.hold_output(&holds(&gate)), None);
        assert_eq!(write(&gate, b"HTTP/1.1 200 OK\r\n\r\nsigned"), Poll::Ready(Some(25)));
        assert_eq!(tell(false), 1, "one answer refused");
        let mut out = Vec::new();
        let end = drain(&gate, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{text}");
        assert!(text.contains("connection: close\r\n") && text.contains("retry-after: 1\r\n"), "{text}");
        assert!(!text.contains("signed"), "the withheld answer never leaves: {text}");
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let head_len: usize = text.lines().find_map(|l| l.strip_prefix("content-length: ")).unwrap().parse().unwrap();
        assert_eq!(body.len(), head_len);
        assert_eq!(serde_json::from_str::<serde_json::Value>(body).unwrap()["code"], 503);
        assert!(matches!(end, Poll::Ready(Err(_))), "the stream then fails, and hyper closes the connection");
        assert_eq!(write(&gate, b"later"), Poll::Ready(Some(5)), "what follows is swallowed");
    }

    #[test]
    fn a_failed_batch_after_a_backlog_only_closes() {
        // The socket was full: the held bytes may start with the tail of an earlier answer,
        // and a 503 after it would be read as garbage.
        let gate = OutputGate::new(None);
        gate.note_backlog(true);
        let (receipt, tell) = test_batch();
        assert_eq!(receipt.hold_output(&holds(&gate)), None);
        assert_eq!(write(&gate, b"tail of the last answer"), Poll::Ready(Some(23)));
        tell(false);
        let mut out = Vec::new();
        assert!(matches!(drain(&gate, &mut out), Poll::Ready(Err(_))));
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_connection_holds_at_most_hold_max() {
        let gate = OutputGate::new(None);
        let (receipt, tell) = test_batch();
        assert_eq!(receipt.hold_output(&holds(&gate)), None);
        let big = vec![7u8; HOLD_MAX + 1000];
        assert_eq!(write(&gate, &big), Poll::Ready(Some(HOLD_MAX)));
        assert_eq!(write(&gate, &big[HOLD_MAX..]), Poll::Pending, "the rest waits for the record");
        tell(true);
        let mut out = Vec::new();
        assert!(matches!(drain(&gate, &mut out), Poll::Ready(Ok(false))));
        assert_eq!(out.len(), HOLD_MAX);
        assert_eq!(write(&gate, &big[HOLD_MAX..]), Poll::Ready(None));
    }

    #[test]
    fn on_a_plain_socket_the_gate_sends_itself_and_never_after_close() {
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        peer.set_nonblocking(true).unwrap();
        let gate = OutputGate::new(Some(ours.as_raw_fd()));
        let (receipt, tell) = test_batch();
        assert_eq!(receipt.hold_output(&holds(&gate)), None);
        assert_eq!(write(&gate, b"answer"), Poll::Ready(Some(6)));
        tell(true);
        let mut got = [0u8; 16];
        let n = peer.read(&mut got).unwrap();
        assert_eq!(&got[..n], b"answer", "sent by the writer's side, no connection task needed");
        assert!(!gate.busy());

        let (receipt, tell) = test_batch();
        assert_eq!(receipt.hold_output(&holds(&gate)), None);
        assert_eq!(write(&gate, b"late"), Poll::Ready(Some(4)));
        gate.close();
        tell(true);
        assert_eq!(peer.read(&mut got).unwrap_err().kind(), io::ErrorKind::WouldBlock, "a closed stream's descriptor is not written to");
    }
}
