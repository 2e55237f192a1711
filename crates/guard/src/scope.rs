//! Token scopes: where a token may be used, beyond what its role grants.
//!
//! A role says what a token may do; a scope says where and for whom. A release bot's token
//! can be limited to `POST /api/v2/log/entries`, to the build network, and to certificates
//! for `https://github.com/acme/*` workflows, so that a leaked copy is worth little.
//!
//! Every list is a limit when it is not empty, and the limits add up (a request must pass
//! each). A token presented outside its scope is refused (403 `token_out_of_scope`) even
//! on a route that needs no token: a scoped credential showing up where it was promised
//! never to be is a sign of theft, not a caller to wave through anonymously. From a
//! network outside its list, the refusal also counts towards a ban of the address.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::client::Cidr;
use crate::error::PolicyError;
use crate::logs::LOGS;

/// Most entries in one scope list, and the longest entry: a scope is read on every request
/// the token makes.
pub const MAX_ENTRIES: usize = 64;
const MAX_ENTRY_BYTES: usize = 512;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TokenScope {
    /// Routes, as `METHOD /template` or `/template` (any method), templates as the route
    /// table spells them (`/api/v1/log/entries/{uuid}`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteRule>,
    /// Logs (`rekor-v1`, `rekor-v2`, `ct`): a route of another log is out of scope; routes
    /// of no log (the CA, the TSA, trust documents) are not limited by this list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
    /// Networks the token may be used from (the client address, as the guard keys it:
    /// through trusted proxies).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Cidr>,
    /// Certificate identities (the SAN: an email or a URI) the token may request, as
    /// patterns where `*` stands for any run of characters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub identities: Vec<IdentityPattern>,
}

/// Why a request is outside a token's scope; the message names the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfScope {
    pub message: String,
    /// From a network the token is not for: counts towards a ban.
    pub network: bool,
}

impl TokenScope {
    pub fn is_unlimited(&self) -> bool {
        self.routes.is_empty() && self.logs.is_empty() && self.networks.is_empty() && self.identities.is_empty()
    }

    /// Checks every limit, and that each entry names something that exists: `routes` is
    /// the server's (method, template) list, for catching a typo at creation rather than
    /// at the first refused request.
    pub fn validate(&self, routes: &[(http::Method, &str)]) -> Result<(), PolicyError> {
        for (list, n) in [("routes", self.routes.len()), ("logs", self.logs.len()), ("networks", self.networks.len()), ("identities", self.identities.len())] {
            if n > MAX_ENTRIES {
                return Err(PolicyError::TooMany { list, max: MAX_ENTRIES, got: n });
            }
        }
        for rule in &self.routes {
            if !routes.iter().any(|(m, t)| *t == rule.template && rule.method.as_ref().is_none_or(|rm| rm == m)) {
                return Err(PolicyError::UnknownRoute(rule.to_string()));
            }
        }
        for log in &self.logs {
            if !LOGS.contains(&log.as_str()) {
                return Err(PolicyError::UnknownLog(log.clone()));
            }
        }
        Ok(())
    }

    /// Whether a request to `template` (of log `log`) by `method` from `client` is in scope.
    pub fn admits(&self, method: &http::Method, template: &str, log: Option<&str>, client: IpAddr) -> Result<(), OutOfScope> {
        let client = canonical(client);
        if !self.networks.is_empty() && !self.networks.iter().any(|n| n.contains(client)) {
            return Err(OutOfScope {
                message: format!("this token may be used only from {}; the request came from {client}", list(&self.networks)),
                network: true,
            });
        }
        // HEAD is answered by the GET route, so a GET rule covers it.
        let method = if method == http::Method::HEAD { &http::Method::GET } else { method };
        if !self.routes.is_empty() && !self.routes.iter().any(|r| r.template == template && r.method.as_ref().is_none_or(|m| m == method)) {
            return Err(OutOfScope { message: format!("this token may call only {}; not {method} {template}", list(&self.routes)), network: false });
        }
        if let Some(log) = log {
            if !self.logs.is_empty() && !self.logs.iter().any(|l| l == log) {
                return Err(OutOfScope { message: format!("this token may use only the logs {}; {template} is {log}", self.logs.join(", ")), network: false });
            }
        }
        Ok(())
    }

    /// Whether a certificate for `subject` (the SAN the CA would write) is in scope.
    pub fn admits_identity<'a>(&'a self, subject: &'a str) -> Result<(), IdentityOutOfScope<'a>> {
        if self.identities.is_empty() || self.identities.iter().any(|p| p.matches(subject)) {
            return Ok(());
        }
        Err(IdentityOutOfScope { allowed: &self.identities, subject })
    }
}

/// A certificate identity outside a token's scope. It borrows the scope and the subject: a
/// refusal on the signing path costs no copy until it is written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this token may request certificates only for {}; not for {subject:?}", list(allowed))]
pub struct IdentityOutOfScope<'a> {
    pub allowed: &'a [IdentityPattern],
    pub subject: &'a str,
}

/// An IPv4-mapped IPv6 peer (`::ffff:a.b.c.d`) is that IPv4 client, as the keying has it.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// `METHOD /template` or `/template`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRule {
    pub method: Option<http::Method>,
    pub template: String,
}

impl std::str::FromStr for RouteRule {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<RouteRule, PolicyError> {
        let s = s.trim();
        let (method, template) = match s.split_once(' ') {
            Some((m, t)) => {
                let method = Some(m)
                    .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_alphabetic()))
                    .and_then(|m| http::Method::from_bytes(m.to_ascii_uppercase().as_bytes()).ok())
                    .ok_or_else(|| PolicyError::NotAMethod { route: s.to_string(), method: m.to_string() })?;
                (Some(method), t.trim())
            }
            None => (None, s),
        };
        if !template.starts_with('/') || template.len() > MAX_ENTRY_BYTES {
            return Err(PolicyError::RouteShape(s.to_string()));
        }
        Ok(RouteRule { method, template: template.to_string() })
    }
}

impl fmt::Display for RouteRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.method {
            Some(m) => write!(f, "{m} {}", self.template),
            None => f.write_str(&self.template),
        }
    }
}

/// An identity pattern: `*` matches any run of characters (none included), everything else
/// itself, case-sensitively: `*@example.com`, `https://github.com/acme/*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityPattern(String);

impl std::str::FromStr for IdentityPattern {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<IdentityPattern, PolicyError> {
        // Certified identities are ASCII (signet_ca::identity), so a pattern that is not
        // could never match: a look-alike letter is a mistake to report, not to store.
        if s.is_empty() || s.len() > MAX_ENTRY_BYTES || !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(PolicyError::PatternShape { pattern: s.to_string(), max: MAX_ENTRY_BYTES });
        }
        if s.bytes().all(|b| b == b'*') {
            return Err(PolicyError::PatternMatchesAll(s.to_string()));
        }
        Ok(IdentityPattern(s.to_string()))
    }
}

impl fmt::Display for IdentityPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl IdentityPattern {
    /// Wildcard matching in O(pattern × subject) at worst, with no recursion: the greedy
    /// walk that backs up only to the last `*`.
    pub fn matches(&self, subject: &str) -> bool {
        let (p, s) = (self.0.as_bytes(), subject.as_bytes());
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            match p.get(pi) {
                Some(b'*') => {
                    star = Some((pi, si));
                    pi += 1;
                }
                Some(&c) if c == s[si] => {
                    pi += 1;
                    si += 1;
                }
                _ => match star {
                    Some((sp, ss)) => {
                        pi = sp + 1;
                        si = ss + 1;
                        star = Some((sp, ss + 1));
                    }
                    None => return false,
                },
            }
        }
        p.get(pi..).is_some_and(|rest| rest.iter().all(|&b| b == b'*'))
    }
}

macro_rules! as_string {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

as_string!(RouteRule);
as_string!(IdentityPattern);
as_string!(Cidr);

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn pattern(s: &str) -> IdentityPattern {
        s.parse().unwrap()
    }

    #[test]
    fn identity_patterns_match_whole_subjects() {
        assert!(pattern("*@example.com").matches("alice@example.com"));
        assert!(!pattern("*@example.com").matches("alice@example.com.evil"));
        assert!(!pattern("*@example.com").matches("alice@EXAMPLE.com"));
        assert!(pattern("https://github.com/acme/*").matches("https://github.com/acme/app/.github/workflows/r.yml@refs/heads/main"));
        assert!(!pattern("https://github.com/acme/*").matches("https://github.com/acme-evil/app"));
        assert!(pattern("a*b*c").matches("abc") && pattern("a*b*c").matches("axxbyyc") && !pattern("a*b*c").matches("axxbyy"));
        assert!(pattern("bob@example.com").matches("bob@example.com") && !pattern("bob@example.com").matches("bob@example.co"));
        // A Cyrillic "а" in the subject is not the Latin one in the pattern.
        assert!(!pattern("alice@example.com").matches("\u{0430}lice@example.com"));
        // Worst case stays quick: many stars against a long near-miss.
        let long = "a".repeat(1000);
        assert!(!pattern("*a*a*a*a*a*b").matches(&long));
        for bad in ["", "*", "**", "al ice@x", "\u{0430}@x", &"x".repeat(513)] {
            assert!(bad.parse::<IdentityPattern>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn each_limit_is_checked_and_named() {
        let scope: TokenScope = serde_json::from_str(
            r#"{"routes":["POST /api/v2/log/entries","/api/v2/checkpoint"],"logs":["rekor-v2"],"networks":["10.0.0.0/8"],"identities":["*@acme.dev"]}"#,
        )
        .unwrap();
        let inside = ip("10.1.2.3");
        assert_eq!(scope.admits(&Method::POST, "/api/v2/log/entries", Some("rekor-v2"), inside), Ok(()));
        assert_eq!(scope.admits(&Method::HEAD, "/api/v2/checkpoint", Some("rekor-v2"), inside), Ok(()));
        assert_eq!(scope.admits(&Method::GET, "/api/v2/checkpoint", Some("rekor-v2"), ip("::ffff:10.0.0.1")), Ok(()));
        let outside = scope.admits(&Method::POST, "/api/v2/log/entries", Some("rekor-v2"), ip("192.0.2.1")).unwrap_err();
        assert!(outside.network && outside.message.contains("10.0.0.0/8") && outside.message.contains("192.0.2.1"), "{outside:?}");
        let route = scope.admits(&Method::POST, "/api/v1/log/entries", Some("rekor-v1"), inside).unwrap_err();
        assert!(!route.network && route.message.contains("POST /api/v1/log/entries"), "{route:?}");
        let method = scope.admits(&Method::POST, "/api/v2/checkpoint", Some("rekor-v2"), inside);
        assert!(method.is_ok(), "a rule without a method admits any method");
        let logs: TokenScope = serde_json::from_str(r#"{"logs":["rekor-v1"]}"#).unwrap();
        assert!(logs.admits(&Method::POST, "/api/v2/log/entries", Some("rekor-v2"), inside).unwrap_err().message.contains("rekor-v1"));
        assert_eq!(logs.admits(&Method::POST, "/api/v1/timestamp", None, inside), Ok(()), "routes of no log are not limited by logs");
        assert_eq!(scope.admits_identity("ci@acme.dev"), Ok(()));
        assert!(scope.admits_identity("ci@evil.dev").unwrap_err().to_string().contains("*@acme.dev"));
        assert_eq!(TokenScope::default().admits_identity("anyone@anywhere"), Ok(()));
    }

    #[test]
    fn scopes_round_trip_and_refuse_what_does_not_exist() {
        let routes = [(Method::POST, "/api/v2/log/entries"), (Method::GET, "/api/v2/checkpoint")];
        let scope: TokenScope = serde_json::from_str(r#"{"routes":["post /api/v2/log/entries"],"networks":["fd00::/8","127.0.0.1"]}"#).unwrap();
        assert_eq!(scope.validate(&routes), Ok(()));
        let text = serde_json::to_string(&scope).unwrap();
        assert_eq!(text, r#"{"routes":["POST /api/v2/log/entries"],"networks":["fd00::/8","127.0.0.1/32"]}"#);
        assert_eq!(serde_json::from_str::<TokenScope>(&text).unwrap(), scope);
        assert_eq!(serde_json::to_string(&TokenScope::default()).unwrap(), "{}");
        let typo: TokenScope = serde_json::from_str(r#"{"routes":["GET /api/v2/log/entries"]}"#).unwrap();
        assert!(typo.validate(&routes).unwrap_err().to_string().contains("GET /api/v2/log/entries"));
        let log: TokenScope = serde_json::from_str(r#"{"logs":["rekor-v3"]}"#).unwrap();
        assert!(log.validate(&routes).unwrap_err().to_string().contains("rekor-v3"));
        assert!(serde_json::from_str::<TokenScope>(r#"{"networks":["10.0.0.0/40"]}"#).is_err());
        assert!(serde_json::from_str::<TokenScope>(r#"{"route":[]}"#).is_err(), "unknown fields are refused");
        assert!("api/v1/log".parse::<RouteRule>().is_err() && "FROB! /x".parse::<RouteRule>().is_err());
    }
}
