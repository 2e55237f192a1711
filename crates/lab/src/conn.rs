//! One HTTP/1.1 keep-alive connection per generator worker, reconnected after failures.

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("http: {0}")]
    Http(#[from] hyper::Error),
}

impl ConnError {
    pub fn kind(&self) -> &'static str {
        match self {
            ConnError::Connect(_) => "connect",
            ConnError::Http(_) => "http",
        }
    }
}

pub struct Conn {
    authority: String,
    sender: Option<http1::SendRequest<Full<Bytes>>>,
}

impl Conn {
    pub fn new(target: &Uri) -> Conn {
        let authority = target.authority().map(|a| a.to_string()).unwrap_or_default();
        Conn { authority, sender: None }
    }

    /// Opens the connection now, so that connection setup is not billed to the first request.
    pub async fn warm_up(&mut self) -> Result<(), ConnError> {
        self.connect().await.map(|_| ())
    }

    async fn connect(&mut self) -> Result<&mut http1::SendRequest<Full<Bytes>>, ConnError> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            let stream = TcpStream::connect(&self.authority).await.map_err(ConnError::Connect)?;
            stream.set_nodelay(true).map_err(ConnError::Connect)?;
            let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.sender = Some(sender);
        }
        Ok(self.sender.as_mut().expect("just set"))
    }

    /// Sends one request and reads the whole response body.
    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Response<Bytes>, ConnError> {
        let result = async {
            let sender = self.connect().await?;
            sender.ready().await?;
            let resp = sender.send_request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok(Response::from_parts(parts, body))
        }
        .await;
        if result.is_err() {
            self.sender = None;
        }
        result
    }
}
