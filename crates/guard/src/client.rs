//! Who a request comes from: its token when it presented a valid one, else its network.
//!
//! Keying authenticated clients by token means many users behind one NAT or proxy do not
//! share one bucket, and a token cannot escape its limit by changing address.
//!
//! An address is keyed by its prefix: an IPv4 /32 and an IPv6 /64 by default
//! (`[guard] ipv4_prefix`, `ipv6_prefix`). One IPv6 host is routinely given a whole /64, so
//! keying by the full address would give it 2^64 keys: limits escaped, maps grown without
//! bound.
//!
//! Behind a reverse proxy, the TCP peer is the proxy. `[guard] trusted_proxies` names the
//! proxies whose `Forwarded` / `X-Forwarded-For` headers are believed: the client is then the
//! right-most hop that is not itself a trusted proxy (each proxy appends the address it
//! saw, so everything left of the last trusted one was written by the client and is
//! worth nothing). From any other peer the headers are ignored.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::extract::ConnectInfo;
use http::Request;

use crate::token::{BadTokenId, TokenId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// One address (the prefix is the whole address).
    Ip(IpAddr),
    /// A network: the address with its host bits cleared, and the prefix length.
    Net(IpAddr, u8),
    Token(TokenId),
    /// An OIDC identity, verified by the CA: the first 16 bytes of SHA-256(issuer ‖ NUL ‖
    /// subject), so that the key stays fixed-size and `Copy` ([`ClientKey::identity`]).
    Identity([u8; 16]),
    /// A client certificate's SAN (mTLS): the first 16 bytes of its SHA-256
    /// ([`ClientKey::certificate`]), fixed-size for the same reason.
    Certificate([u8; 16]),
    /// Every client not tracked while the tables are full ([`crate::ratelimit`]).
    Overflow,
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientKey::Ip(ip) => write!(f, "ip:{ip}"),
            ClientKey::Net(ip, len) => write!(f, "ip:{ip}/{len}"),
            ClientKey::Token(id) => write!(f, "token:{id}"),
            ClientKey::Identity(h) => {
                f.write_str("oidc:")?;
                h.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
            ClientKey::Certificate(h) => {
                f.write_str("cert:")?;
                h.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
            ClientKey::Overflow => write!(f, "overflow"),
        }
    }
}

/// Why text does not name a client: a client key, an address range, or a token id. Each
/// names the text given and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error(transparent)]
    TokenId(#[from] BadTokenId),
    #[error("{0:?}: an identity key is oidc: and 32 hex digits, as `signet admin ban list` prints it")]
    IdentityKey(String),
    #[error("{0:?}: a certificate key is cert: and 32 hex digits, as `signet admin ban list` prints it")]
    CertificateKey(String),
    #[error("{0:?} is not a client; expected an IP address, ip:ADDR, ip:ADDR/LEN, token:ID, oidc:KEY or cert:KEY")]
    NotAClient(String),
    #[error("{0:?} is not an address or CIDR range (e.g. 10.0.0.0/8, fd00::/8)")]
    NotAnAddress(String),
    #[error("{range:?}: the prefix length must be 0..={max}")]
    PrefixLength { range: String, max: u8 },
}

impl std::str::FromStr for ClientKey {
    type Err = ClientError;
    /// `ip:ADDR` (one address), `ip:ADDR/LEN`, `token:ID`, `overflow`, or a bare IP
    /// address, which names its key under the default prefixes (/32, /64): what an
    /// operator types. With other prefixes, use the form `signet admin ban list` prints.
    fn from_str(s: &str) -> Result<ClientKey, ClientError> {
        if let Some(id) = s.strip_prefix("token:") {
            return Ok(ClientKey::Token(id.parse()?));
        }
        if let Some(h) = s.strip_prefix("oidc:") {
            let bytes = hex_16(h).ok_or_else(|| ClientError::IdentityKey(s.to_string()))?;
            return Ok(ClientKey::Identity(bytes));
        }
        if let Some(h) = s.strip_prefix("cert:") {
            let bytes = hex_16(h).ok_or_else(|| ClientError::CertificateKey(s.to_string()))?;
            return Ok(ClientKey::Certificate(bytes));
        }
        if s == "overflow" {
            return Ok(ClientKey::Overflow);
        }
        let bad = || ClientError::NotAClient(s.to_string());
        let (ip, exact) = match s.strip_prefix("ip:") {
            Some(ip) => (ip, true),
            None => (s, false),
        };
        if ip.contains('/') {
            let cidr = Cidr::parse(ip).map_err(|_| bad())?;
            return Ok(Keying::key_with(cidr.addr, cidr.len, cidr.len));
        }
        let addr: IpAddr = ip.parse().map_err(|_| bad())?;
        Ok(if exact { ClientKey::Ip(addr) } else { Keying::key_with(addr, 32, 64) })
    }
}

impl ClientKey {
    /// The key of an OIDC identity: its issuer and subject, as the CA verified them.
    pub fn identity(issuer: &str, subject: &str) -> ClientKey {
        let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
        ctx.update(issuer.as_bytes());
        ctx.update(&[0]);
        ctx.update(subject.as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&ctx.finish().as_ref()[..16]);
        ClientKey::Identity(key)
    }

    /// The key of a client certificate's SAN.
    pub fn certificate(san: &str) -> ClientKey {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, san.as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest.as_ref()[..16]);
        ClientKey::Certificate(key)
    }
}

fn hex_16(s: &str) -> Option<[u8; 16]> {
    // from_str_radix would take a sign: only digits make a key.
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The bearer value of `Authorization`, if any: a signet API token, or (from Fulcio clients)
/// an OIDC identity token, which the guard leaves alone.
pub fn bearer<B>(request: &Request<B>) -> Option<&str> {
    bearer_in(request.headers())
}

/// [`bearer`] from the headers alone, for a handler that no longer has the request.
pub fn bearer_in(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
}

/// An address range: `10.0.0.0/8`, `2001:db8::/32`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, ClientError> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| ClientError::NotAnAddress(s.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l.trim().parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| ClientError::PrefixLength { range: s.to_string(), max })?,
        };
        Ok(Cidr { addr: mask(addr, len), len })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.len) == self.addr
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl std::str::FromStr for Cidr {
    type Err = ClientError;
    fn from_str(s: &str) -> Result<Cidr, ClientError> {
        Cidr::parse(s)
    }
}

/// `ip` with every bit past the first `len` cleared.
fn mask(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let keep = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            IpAddr::V4((bits & keep).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let keep = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            IpAddr::V6((bits & keep).into())
        }
    }
}

/// Most hops of a forwarding header looked at: the walk is bounded whatever a client sends.
const MAX_HOPS: usize = 32;

/// How requests are turned into client keys: the prefixes, and the trusted proxies.
#[derive(Debug, Clone)]
pub struct Keying {
    pub ipv4_prefix: u8,
    pub ipv6_prefix: u8,
    pub trusted_proxies: Vec<Cidr>,
}

impl Default for Keying {
    fn default() -> Self {
        Keying { ipv4_prefix: 32, ipv6_prefix: 64, trusted_proxies: Vec::new() }
    }
}

impl Keying {
    /// The key of address `ip`.
    pub fn key(&self, ip: IpAddr) -> ClientKey {
        Self::key_with(ip, self.ipv4_prefix, self.ipv6_prefix)
    }

    fn key_with(ip: IpAddr, v4: u8, v6: u8) -> ClientKey {
        // An IPv4-mapped IPv6 peer (::ffff:a.b.c.d) is that IPv4 client.
        let ip = match ip {
            IpAddr::V6(v6addr) => v6addr.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4addr => v4addr,
        };
        let (len, full) = if ip.is_ipv4() { (v4.min(32), 32) } else { (v6.min(128), 128) };
        if len == full {
            ClientKey::Ip(ip)
        } else {
            ClientKey::Net(mask(ip, len), len)
        }
    }

    /// The key of the client that sent `request` (its address, not its token).
    pub fn key_of<B>(&self, request: &Request<B>) -> ClientKey {
        self.key(self.client_ip(request))
    }

    /// The client's address: the TCP peer, or, when the peer is a trusted proxy, the
    /// right-most forwarded hop that is not itself a trusted proxy. A hop that does not
    /// parse ends the walk: the client is then the last trusted proxy before it, never an
    /// address the sender chose.
    pub fn client_ip<B>(&self, request: &Request<B>) -> IpAddr {
        let peer = peer_ip(request);
        if !self.trusted(peer) {
            return peer;
        }
        let headers = request.headers();
        let forwarded: Vec<&str> = headers.get_all(http::header::FORWARDED).iter().filter_map(|v| v.to_str().ok()).collect();
        let hops: Vec<Option<IpAddr>> = if !forwarded.is_empty() {
            forwarded.iter().flat_map(|v| v.split(',')).map(forwarded_for).collect()
        } else {
            headers
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|h| parse_hop(h.trim()))
                .collect()
        };
        let mut client = peer;
        for hop in hops.iter().rev().take(MAX_HOPS) {
            if !self.trusted(client) {
                break;
            }
            match hop {
                Some(ip) => client = *ip,
                None => break,
            }
        }
        client
    }

    fn trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|c| c.contains(ip))
    }
}

/// The address of one `Forwarded` element's `for=` parameter (RFC 7239 §5.2).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = element.split(';').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        k.trim().eq_ignore_ascii_case("for").then(|| v.trim())
    })?;
    parse_hop(value.trim_matches('"'))
}

/// `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:443`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let (addr, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    addr.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
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
        for k in [
            ClientKey::Ip("127.0.0.1".parse().unwrap()),
            ClientKey::Ip("::1".parse().unwrap()),
            ClientKey::Token(TokenId([7; 8])),
            ClientKey::identity("https://issuer.example", "alice@example.com"),
        ] {
            assert_eq!(k.to_string().parse::<ClientKey>().unwrap(), k);
        }
        assert_eq!("10.0.0.1".parse::<ClientKey>().unwrap(), ClientKey::Ip("10.0.0.1".parse().unwrap()));
        assert!("nobody".parse::<ClientKey>().is_err());
        let net = Keying::default().key("2001:db8:1:2:3:4:5:6".parse().unwrap());
        assert_eq!(net.to_string(), "ip:2001:db8:1:2::/64");
        assert_eq!(net.to_string().parse::<ClientKey>().unwrap(), net);
        assert_eq!("2001:db8:1:2::99".parse::<ClientKey>().unwrap(), net, "a bare IPv6 address names its /64");
        assert_eq!(ClientKey::Overflow.to_string().parse::<ClientKey>().unwrap(), ClientKey::Overflow);
        assert!("ip:10.0.0.0/33".parse::<ClientKey>().is_err());
        let alice = ClientKey::identity("https://issuer.example", "alice@example.com");
        assert_ne!(alice, ClientKey::identity("https://issuer.example", "bob@example.com"));
        assert_ne!(alice, ClientKey::identity("https://other.example", "alice@example.com"), "the same subject of another issuer");
        assert_ne!(ClientKey::identity("a", "bc"), ClientKey::identity("ab", "c"), "the separator keeps the split");
        for bad in ["oidc:", "oidc:+f", &format!("oidc:{}", "+1".repeat(16)), &format!("oidc:{}", "é".repeat(16))] {
            assert!(bad.parse::<ClientKey>().is_err(), "{bad}");
        }
        // A client certificate's SAN: its own key, printed and parsed back as `ban lift` takes it.
        let ci = ClientKey::certificate("spiffe://example.org/ci");
        assert!(ci.to_string().starts_with("cert:") && ci.to_string().len() == 5 + 32, "{ci}");
        assert_eq!(ci.to_string().parse::<ClientKey>().unwrap(), ci);
        assert_ne!(ci, ClientKey::certificate("spiffe://example.org/cd"));
        assert!("cert:xyz".parse::<ClientKey>().is_err());
    }

    #[test]
    fn one_slash_64_is_one_client() {
        let k = Keying::default();
        let base: u128 = u128::from("2001:db8:aa:bb::".parse::<std::net::Ipv6Addr>().unwrap());
        let first = k.key(IpAddr::V6((base + 1).into()));
        for host in [2u128, 1 << 20, u64::MAX as u128] {
            assert_eq!(k.key(IpAddr::V6((base + host).into())), first);
        }
        assert_ne!(k.key(IpAddr::V6((base + (1u128 << 64)).into())), first, "the next /64 is another client");
        let v4 = Keying { ipv4_prefix: 24, ..Keying::default() };
        assert_eq!(v4.key("10.1.2.3".parse().unwrap()), v4.key("10.1.2.200".parse().unwrap()));
        assert_eq!(k.key("::ffff:10.1.2.3".parse().unwrap()), ClientKey::Ip("10.1.2.3".parse().unwrap()), "IPv4-mapped");
    }

    fn request(peer: &str, headers: &[(&'static str, &str)]) -> Request<()> {
        let mut r = Request::new(());
        r.extensions_mut().insert(ConnectInfo::<SocketAddr>(format!("{peer}:5000").parse().unwrap()));
        for (k, v) in headers {
            r.headers_mut().append(*k, v.parse().unwrap());
        }
        r
    }

    #[test]
    fn forwarded_headers_count_only_from_trusted_proxies() {
        let k = Keying { trusted_proxies: vec![Cidr::parse("10.0.0.0/8").unwrap(), Cidr::parse("fd00::/8").unwrap()], ..Keying::default() };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // From an untrusted peer, a spoofed header changes nothing.
        assert_eq!(k.client_ip(&request("203.0.113.9", &[("x-forwarded-for", "1.2.3.4")])), ip("203.0.113.9"));
        assert_eq!(k.client_ip(&request("203.0.113.9", &[("forwarded", "for=1.2.3.4")])), ip("203.0.113.9"));
        // From a trusted proxy: the right-most hop that is not a trusted proxy.
        let via = |h: &'static str, v: &str| k.client_ip(&request("10.0.0.1", &[(h, v)]));
        assert_eq!(via("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.2"), ip("198.51.100.7"), "the client's own claim (6.6.6.6) is ignored");
        assert_eq!(via("forwarded", "for=6.6.6.6, for=\"[2001:db8::7]:4711\";proto=https"), ip("2001:db8::7"));
        assert_eq!(via("forwarded", "for=198.51.100.7:80;by=10.0.0.1"), ip("198.51.100.7"));
        // Headers across several lines are one list, in order.
        let two = k.client_ip(&request("10.0.0.1", &[("x-forwarded-for", "6.6.6.6"), ("x-forwarded-for", "198.51.100.8")]));
        assert_eq!(two, ip("198.51.100.8"));
        // Garbage ends the walk at the last trusted proxy; nothing panics.
        assert_eq!(via("x-forwarded-for", "1.2.3.4, garbage"), ip("10.0.0.1"));
        assert_eq!(via("forwarded", "for=unknown"), ip("10.0.0.1"));
        assert_eq!(via("forwarded", ";;;=,=;for"), ip("10.0.0.1"));
        assert_eq!(via("x-forwarded-for", ""), ip("10.0.0.1"));
        assert_eq!(k.client_ip(&request("10.0.0.1", &[])), ip("10.0.0.1"));
    }
}
