//! One HTTP/1.1 connection per generator connection: keep-alive and reconnected after
//! failures, or (new-connection mode) opened for one request and closed.
//!
//! The generator shares the machine with the server it measures, so every microsecond it
//! spends per request is taken from the server. A general-purpose client (hyper) cost about
//! 26 µs of CPU per request here; this one writes pre-built request bytes and reads the
//! response with a minimal parser (status line, `Content-Length` or chunked body), as wrk
//! does. It is a measuring instrument, not a general client: it speaks only what signet and
//! common servers answer over HTTP/1.1, plain or over TLS ([`crate::dial`]).

use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::dial::{Dialer, Setup, Stream};

pub use crate::error::ConnError;

/// A response: its status and body length (the body itself is read and dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body_len: usize,
}

pub struct Conn {
    dialer: Arc<Dialer>,
    stream: Option<Stream>,
    buf: BytesMut,
    /// New-connection mode: every exchange opens its own connection and closes it.
    fresh: bool,
    /// Connections opened since the owner last drained this.
    setups: Vec<Setup>,
}

/// The most a response head may take; more means the peer is not speaking HTTP/1.1 to us.
const MAX_HEAD: usize = 64 * 1024;

impl Conn {
    /// A keep-alive connection; it connects on first use (or [`Conn::warm_up`]).
    pub fn new(dialer: &Arc<Dialer>) -> Conn {
        Conn { dialer: dialer.clone(), stream: None, buf: BytesMut::with_capacity(16 * 1024), fresh: false, setups: Vec::new() }
    }

    /// A connection that opens a new connection for every exchange and closes it after.
    pub fn fresh(dialer: &Arc<Dialer>) -> Conn {
        Conn { fresh: true, ..Conn::new(dialer) }
    }

    /// Opens the connection now, so that connection setup is not billed to the first request.
    pub async fn warm_up(&mut self) -> Result<(), ConnError> {
        self.connect().await
    }

    /// Forgets the connection (after a timeout its state is unknown); the next request reconnects.
    pub fn reset(&mut self) {
        self.stream = None;
    }

    /// The setups of the connections opened since the last call.
    pub fn drain_setups(&mut self) -> std::vec::Drain<'_, Setup> {
        self.setups.drain(..)
    }

    async fn connect(&mut self) -> Result<(), ConnError> {
        if self.stream.is_none() {
            let (stream, setup) = self.dialer.connect().await?;
            self.setups.push(setup);
            self.buf.clear();
            self.stream = Some(stream);
        }
        Ok(())
    }

    /// Sends one serialized request and reads the whole response, dropping the body.
    pub async fn send(&mut self, request: &[u8]) -> Result<Reply, ConnError> {
        self.send_keeping(request, None).await
    }

    /// Sends one request and returns the status and the body.
    pub async fn fetch(&mut self, request: &[u8]) -> Result<(u16, Vec<u8>), ConnError> {
        let mut body = Vec::new();
        let reply = self.send_keeping(request, Some(&mut body)).await?;
        Ok((reply.status, body))
    }

    async fn send_keeping(&mut self, request: &[u8], keep: Option<&mut Vec<u8>>) -> Result<Reply, ConnError> {
        let result = self.exchange(request, keep).await;
        if result.is_err() {
            self.stream = None;
        } else if self.fresh {
            if let Some(mut stream) = self.stream.take() {
                // A TLS close_notify, so the server sees an orderly close rather than a
                // truncation; a plain connection just sends its FIN.
                let _ = stream.shutdown().await;
            }
        }
        result
    }

    async fn exchange(&mut self, request: &[u8], keep: Option<&mut Vec<u8>>) -> Result<Reply, ConnError> {
        self.connect().await?;
        let stream = self.stream.as_mut().expect("connected");
        stream.write_all(request).await?;
        // tokio-rustls may keep the last records of a write in the session's buffer when the
        // socket would block; a flush sends them before we wait for the answer. Plain TCP: a no-op.
        stream.flush().await?;
        // Head: read until the blank line.
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos + 4;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ConnError::Protocol("response head too large"));
            }
            read_more(stream, &mut self.buf).await?;
        };
        let head = std::str::from_utf8(&self.buf[..head_end]).map_err(|_| ConnError::Protocol("head is not UTF-8"))?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status: u16 = status_line
            .strip_prefix("HTTP/1.1 ")
            .or_else(|| status_line.strip_prefix("HTTP/1.0 "))
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .ok_or(ConnError::Protocol("bad status line"))?;
        let (mut length, mut chunked, mut close) = (None, false, false);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().map_err(|_| ConnError::Protocol("bad content-length"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
        self.buf.advance(head_end);
        let body_len = if chunked {
            self.read_chunked(keep).await?
        } else {
            let n = length.unwrap_or(0);
            while self.buf.len() < n {
                read_more(self.stream.as_mut().expect("connected"), &mut self.buf).await?;
            }
            if let Some(out) = keep {
                out.extend_from_slice(&self.buf[..n]);
            }
            self.buf.advance(n);
            n
        };
        if close {
            self.stream = None;
        }
        Ok(Reply { status, body_len })
    }

    async fn read_chunked(&mut self, mut keep: Option<&mut Vec<u8>>) -> Result<usize, ConnError> {
        let mut total = 0;
        loop {
            let line_end = loop {
                if let Some(p) = find(&self.buf, b"\r\n") {
                    break p;
                }
                read_more(self.stream.as_mut().expect("connected"), &mut self.buf).await?;
            };
            let size_text = std::str::from_utf8(&self.buf[..line_end]).map_err(|_| ConnError::Protocol("bad chunk size"))?;
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| ConnError::Protocol("bad chunk size"))?;
            self.buf.advance(line_end + 2);
            // The chunk, then its CRLF (after the last, zero-size chunk: the final CRLF).
            while self.buf.len() < size + 2 {
                read_more(self.stream.as_mut().expect("connected"), &mut self.buf).await?;
            }
            if let Some(out) = keep.as_deref_mut() {
                out.extend_from_slice(&self.buf[..size]);
            }
            self.buf.advance(size + 2);
            total += size;
            if size == 0 {
                return Ok(total);
            }
        }
    }
}

async fn read_more(stream: &mut Stream, buf: &mut BytesMut) -> Result<(), ConnError> {
    buf.reserve(16 * 1024);
    if stream.read_buf(buf).await? == 0 {
        return Err(ConnError::Protocol("connection closed mid-response"));
    }
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Like [`request_bytes`], with `Authorization: Bearer <token>`.
pub fn request_bytes_bearer(method: &str, target: &http::Uri, path_and_query: &str, body: &[u8], token: &str) -> Vec<u8> {
    let mut out = format!("Authorization: Bearer {token}\r\n").into_bytes();
    let plain = request_bytes(method, target, path_and_query, Some(body));
    // After the request line and Host header, before the content headers.
    let at = find(&plain, b"\r\n").and_then(|first| find(&plain[first + 2..], b"\r\n").map(|second| first + 2 + second + 2)).expect("request has a Host line");
    out.splice(0..0, plain[..at].iter().copied());
    out.extend_from_slice(&plain[at..]);
    out
}

/// Adds `Name: value` header lines to a serialized request, after its Host line
/// (`--header` of the `custom` workload). Names and values were checked by the caller.
pub fn with_headers(request: Vec<u8>, headers: &[(String, String)]) -> Vec<u8> {
    if headers.is_empty() {
        return request;
    }
    let at = find(&request, b"\r\n")
        .and_then(|first| find(&request[first + 2..], b"\r\n").map(|second| first + 2 + second + 2))
        .expect("request has a Host line");
    let mut out = Vec::with_capacity(request.len() + 64 * headers.len());
    out.extend_from_slice(&request[..at]);
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(&request[at..]);
    out
}

/// Serializes a request: `METHOD path HTTP/1.1`, Host, optional JSON body.
pub fn request_bytes(method: &str, target: &http::Uri, path_and_query: &str, body: Option<&[u8]>) -> Vec<u8> {
    request_bytes_typed(method, target, path_and_query, body, "application/json")
}

/// Like [`request_bytes`], with the body's content type given.
pub fn request_bytes_typed(method: &str, target: &http::Uri, path_and_query: &str, body: Option<&[u8]>, content_type: &str) -> Vec<u8> {
    let host = target.authority().map(|a| a.as_str()).unwrap_or("");
    let mut out = Vec::with_capacity(128 + body.map_or(0, |b| b.len()));
    out.extend_from_slice(format!("{method} {path_and_query} HTTP/1.1\r\nHost: {host}\r\n").as_bytes());
    if let Some(b) = body {
        out.extend_from_slice(format!("Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n", b.len()).as_bytes());
        out.extend_from_slice(b);
    } else {
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Uri;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    fn conn(uri: &Uri) -> Conn {
        Conn::new(&Arc::new(Dialer::plain(uri)))
    }

    async fn serve_once(responses: Vec<&'static [u8]>) -> Uri {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            for r in responses {
                let _ = s.read(&mut buf).await.unwrap();
                s.write_all(r).await.unwrap();
            }
        });
        format!("http://{addr}").parse().unwrap()
    }

    #[tokio::test]
    async fn reads_length_and_chunked_bodies_on_one_connection() {
        let uri = serve_once(vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
            b"HTTP/1.1 409 Conflict\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ])
        .await;
        let mut c = conn(&uri);
        let req = request_bytes("GET", &uri, "/", None);
        assert_eq!(c.send(&req).await.unwrap(), Reply { status: 200, body_len: 5 });
        assert_eq!(c.send(&req).await.unwrap(), Reply { status: 409, body_len: 5 });
        assert_eq!(c.send(&req).await.unwrap(), Reply { status: 204, body_len: 0 });
    }

    #[tokio::test]
    async fn fetch_keeps_chunked_bodies() {
        let uri = serve_once(vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"]).await;
        let mut c = conn(&uri);
        assert_eq!(c.fetch(&request_bytes("GET", &uri, "/", None)).await.unwrap(), (200, b"abcde".to_vec()));
    }

    #[test]
    fn extra_headers_follow_the_host_line() {
        let uri: Uri = "http://h:1/x".parse().unwrap();
        let r = with_headers(request_bytes("GET", &uri, "/x", None), &[("Authorization".into(), "Bearer t".into()), ("X-A".into(), "b".into())]);
        assert_eq!(r, b"GET /x HTTP/1.1\r\nHost: h:1\r\nAuthorization: Bearer t\r\nX-A: b\r\n\r\n");
    }

    #[test]
    fn bearer_requests_carry_the_token_before_the_body_headers() {
        let uri: Uri = "http://127.0.0.1:9/".parse().unwrap();
        let r = request_bytes_bearer("POST", &uri, "/x", b"{}", "t.o.k");
        assert_eq!(r, b"POST /x HTTP/1.1\r\nHost: 127.0.0.1:9\r\nAuthorization: Bearer t.o.k\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error() {
        let uri = serve_once(vec![b"SMTP ready\r\n\r\n"]).await;
        let mut c = conn(&uri);
        let err = c.send(&request_bytes("GET", &uri, "/", None)).await.unwrap_err();
        assert_eq!(err.kind(), "protocol");
    }

    #[test]
    fn serializes_requests() {
        let uri: Uri = "http://127.0.0.1:9/".parse().unwrap();
        let r = request_bytes("POST", &uri, "/x", Some(b"{}"));
        assert_eq!(r, b"POST /x HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
    }
}
