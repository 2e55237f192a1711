//! Connecting to PostgreSQL the same way from every store (the logs, the guard): the URL,
//! TLS, and messages that never show a password.
//!
//! `sslmode=require` in the URL means TLS with the server's certificate verified, chain and
//! host name, as libpq's `verify-full` does: against the system's roots, or against
//! `sslrootcert=PATH`'s certificates. Encryption to a peer nobody checked protects nothing
//! from the attacker in the middle, so signet offers no weaker mode. Without `sslmode`, or
//! with `sslmode=disable`, connections are plain: keep the database on loopback or a
//! private network then. libpq's own spelling of what `require` does here, `verify-full`, is
//! accepted as the same; `verify-ca` (no host name check) is refused with the reason.

use std::future::Future;
use std::pin::Pin;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use postgres_openssl::MakeTlsConnector;
use tokio_postgres::config::SslMode;
use tokio_postgres::{Client, NoTls};

use crate::error::DbError;

/// A parsed storage URL and how to connect to it.
#[derive(Clone)]
pub struct Target {
    pub config: tokio_postgres::Config,
    tls: Option<MakeTlsConnector>,
}

/// The connection's driver, to spawn beside the client.
pub type Driver = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

impl Target {
    /// Parses `postgres://user[:password]@host[:port]/db[?sslmode=require[&sslrootcert=PATH]]`.
    pub fn parse(url: &str) -> Result<Target, DbError> {
        let (url_rest, root) = take_param(url, "sslrootcert");
        let url_rest = match take_param(&url_rest, "sslmode") {
            (rest, Some(mode)) if mode == "verify-full" => with_param(&rest, "sslmode=require"),
            (_, Some(mode)) if mode == "verify-ca" => {
                return Err(DbError::Url(format!(
                    "storage URL {}: sslmode=verify-ca skips the host name check, which signet always makes; use sslmode=verify-full (or require, the same here)",
                    redact(url)
                )))
            }
            _ => url_rest,
        };
        let mut config: tokio_postgres::Config = url_rest.parse().map_err(|e| DbError::Url(format!("storage URL {}: {e}", redact(url))))?;
        let tls = match config.get_ssl_mode() {
            SslMode::Require => {
                let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(|e| DbError::Tls(e.to_string()))?;
                builder.set_verify(SslVerifyMode::PEER);
                if let Some(path) = &root {
                    builder.set_ca_file(path).map_err(|e| DbError::Url(format!("sslrootcert {path}: {e}; expected a PEM file of CA certificates")))?;
                }
                Some(MakeTlsConnector::new(builder.build()))
            }
            SslMode::Prefer if url.contains("sslmode=prefer") => {
                return Err(DbError::Url(format!(
                    "storage URL {}: sslmode=prefer would fall back to plain text silently; use sslmode=require (TLS, verified) or sslmode=disable",
                    redact(url)
                )))
            }
            _ => {
                if root.is_some() {
                    return Err(DbError::Url(format!("storage URL {}: sslrootcert needs sslmode=require", redact(url))));
                }
                // Not "prefer" (tokio-postgres's default): without a connector it would be
                // plain text anyway, and this way the server is never asked for TLS.
                config.ssl_mode(SslMode::Disable);
                None
            }
        };
        Ok(Target { config, tls })
    }

    /// Whether connections are TLS (verified).
    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// One connection: the client, and the driver the caller spawns.
    pub async fn connect(&self) -> Result<(Client, Driver), tokio_postgres::Error> {
        match &self.tls {
            Some(tls) => {
                let (client, conn) = self.config.connect(tls.clone()).await?;
                Ok((client, Box::pin(conn)))
            }
            None => {
                let (client, conn) = self.config.connect(NoTls).await?;
                Ok((client, Box::pin(conn)))
            }
        }
    }
}

/// A driver error as the store's: the server's own words ([`message`]).
impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> DbError {
        DbError::Query(message(&e))
    }
}

/// What went wrong, for a message: the server's own words when it answered, else the driver's
/// error with every cause beneath it, each once (a TLS handshake's reason, such as
/// "certificate verify failed", can sit more than one level down).
pub fn message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        // The driver sometimes repeats its cause in its own text.
        if !why.ends_with(&s_text) {
            why = format!("{why}: {s_text}");
        }
        source = s.source();
    }
    why
}

/// Removes `key=value` from a URL's query; returns the rest and the value.
fn take_param(url: &str, key: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else { return (url.to_string(), None) };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|p| match p.split_once('=') {
            Some((k, v)) if k == key => {
                value = Some(v.to_string());
                false
            }
            _ => true,
        })
        .collect();
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    (rest, value)
}

/// `url` with `param` (`key=value`) added to its query.
fn with_param(url: &str, param: &str) -> String {
    format!("{url}{}{param}", if url.contains('?') { '&' } else { '?' })
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => match url[s + 3..at].find(':') {
            Some(colon) => format!("{}:***{}", &url[..s + 3 + colon], &url[at..]),
            None => url.to_string(),
        },
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("postgres://signet:hunter2@db:5432/signet"), "postgres://signet:***@db:5432/signet");
        assert_eq!(redact("postgres://signet@db/signet"), "postgres://signet@db/signet");
        assert_eq!(redact("host=db user=signet"), "host=db user=signet");
    }

    #[tokio::test]
    async fn a_failed_connection_says_why() {
        // A loopback port nothing listens on (the listener is dropped before the connect).
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let target = Target::parse(&format!("postgres://u@127.0.0.1:{port}/x?connect_timeout=5")).unwrap();
        let e = target.connect().await.err().unwrap();
        let why = message(&e);
        assert!(why.starts_with("error connecting to server") && why.to_lowercase().contains("refused"), "{why}");
        // Each cause once, though the driver's own text already ends with it.
        assert_eq!(why.to_lowercase().matches("refused").count(), 1, "{why}");
    }

    #[test]
    fn tls_is_verified_or_off_never_in_between() {
        assert!(!Target::parse("postgres://u@db/x").unwrap().tls());
        assert!(!Target::parse("postgres://u@db/x?sslmode=disable").unwrap().tls());
        assert!(Target::parse("postgres://u@db/x?sslmode=require").unwrap().tls());
        // libpq's name for what require is here; its weaker verify-ca is refused.
        assert!(Target::parse("postgres://u@db/x?sslmode=verify-full").unwrap().tls());
        assert!(Target::parse("postgres://u@db/x?connect_timeout=5&sslmode=verify-full").unwrap().tls());
        let e = Target::parse("postgres://u:pw@db/x?sslmode=verify-ca").err().unwrap().to_string();
        assert!(e.contains("verify-full") && !e.contains("pw@"), "{e}");
        let e = Target::parse("postgres://u:pw@db/x?sslmode=prefer").err().unwrap().to_string();
        assert!(e.contains("sslmode=require") && !e.contains("pw@"), "{e}");
        let e = Target::parse("postgres://u@db/x?sslrootcert=/nonexistent.pem").err().unwrap().to_string();
        assert!(e.contains("needs sslmode=require"), "{e}");
        let e = Target::parse("postgres://u@db/x?sslmode=require&sslrootcert=/nonexistent.pem").err().unwrap().to_string();
        assert!(e.contains("/nonexistent.pem"), "{e}");
        assert_eq!(take_param("postgres://u@h/d?a=1&sslrootcert=/c.pem&b=2", "sslrootcert"), ("postgres://u@h/d?a=1&b=2".into(), Some("/c.pem".into())));
    }
}
