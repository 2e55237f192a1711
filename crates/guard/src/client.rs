//! Who a request comes from: its token when it presented a valid one, else its IP.
//!
//! Keying authenticated clients by token means many users behind one NAT or proxy do not
//! share one bucket, and a token cannot escape its limit by changing address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::ConnectInfo;
use http::Request;

use crate::token::TokenId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    Ip(IpAddr),
    Token(TokenId),
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientKey::Ip(ip) => write!(f, "ip:{ip}"),
            ClientKey::Token(id) => write!(f, "token:{id}"),
        }
    }
}

impl std::str::FromStr for ClientKey {
    type Err = String;
    /// `ip:ADDR`, `token:ID`, or a bare IP address.
    fn from_str(s: &str) -> Result<ClientKey, String> {
        if let Some(id) = s.strip_prefix("token:") {
            return id.parse().map(ClientKey::Token);
        }
        let ip = s.strip_prefix("ip:").unwrap_or(s);
        ip.parse()
            .map(ClientKey::Ip)
            .map_err(|_| format!("{s:?} is not a client; expected an IP address, ip:ADDR or token:ID"))
    }
}

/// The bearer value of `Authorization`, if any: a signet API token, or (from Fulcio clients)
/// an OIDC identity token, which the guard leaves alone.
pub fn bearer<B>(request: &Request<B>) -> Option<&str> {
    request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
}

/// The peer's IP, from axum's `ConnectInfo`. Without it (a router served without connect
/// info) every request shares one key, which fails safe: limits still apply, to everyone.
pub fn peer_ip<B>(request: &Request<B>) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints() {
        for k in [ClientKey::Ip("127.0.0.1".parse().unwrap()), ClientKey::Ip("::1".parse().unwrap()), ClientKey::Token(TokenId([7; 8]))] {
            assert_eq!(k.to_string().parse::<ClientKey>().unwrap(), k);
        }
        assert_eq!("10.0.0.1".parse::<ClientKey>().unwrap(), ClientKey::Ip("10.0.0.1".parse().unwrap()));
        assert!("nobody".parse::<ClientKey>().is_err());
    }
}
