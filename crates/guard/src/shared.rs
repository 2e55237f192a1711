//! Rate limits and bans shared by many instances, in Redis (`[guard.redis]`).
//!
//! Behind a load balancer, per-instance buckets give a client N times its limit, and a ban
//! on one instance is none on the others. With Redis, each request costs one script call
//! that does, atomically on the Redis side:
//!
//! 1. the shared ban check (`signet:ban:<client>`);
//! 2. GCRA (the same algorithm governor runs in memory) on the client's read or write
//!    bucket, keyed by the client and kept only until the bucket is full again;
//! 3. on a refusal, the strike count towards a ban, and the ban itself past the threshold.
//!
//! Time is Redis's own (`TIME`), the one clock every instance shares. Redis holds nothing
//! that must survive: losing it resets buckets and lifts bans. What happens while it is
//! unreachable is `on_failure`: `open` admits requests (counted and logged: availability
//! over limits), `closed` refuses them with 503 (limits over availability).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;

use crate::client::ClientKey;
use crate::config::{BanConfig, OnFailure, RateLimitConfig, RedisConfig};
use crate::redis_client::{client, redact, RedisClientError};

/// What the shared limiter decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Over the limit; the bucket has room again after this long.
    Refuse(Duration),
    /// Banned (by any instance) until this unix time.
    Banned(u64),
    /// Redis could not be asked; `on_failure` decides.
    Unavailable,
}

/// GCRA and strikes in one atomic step. KEYS: bucket, ban, strikes. ARGV: the emission
/// interval and the burst in microseconds' worth of intervals, whether bans are on, the
/// refusals allowed per window, the window and the ban's length in seconds.
const SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local banned = redis.call('GET', KEYS[2])
if banned then return {2, tonumber(banned)} end
local interval = tonumber(ARGV[1])
local capacity = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - capacity
if allow_at <= now then
  redis.call('SET', KEYS[1], new_tat, 'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
  return {0, 0}
end
if ARGV[3] == '1' then
  local strikes = redis.call('INCR', KEYS[3])
  if strikes == 1 then redis.call('EXPIRE', KEYS[3], tonumber(ARGV[5])) end
  if strikes > tonumber(ARGV[4]) then
    local untl = tonumber(t[1]) + tonumber(ARGV[6])
    redis.call('SET', KEYS[2], untl, 'EX', tonumber(ARGV[6]))
    redis.call('DEL', KEYS[3])
    return {3, untl}
  end
end
return {1, allow_at - now}
"#;

pub struct SharedLimits {
    client: redis::Client,
    /// The connection (a multiplexed one: clones share it). Read on every request.
    conn: parking_lot::RwLock<Option<ConnectionManager>>,
    /// Held by the one request that (re)connects; the others do not queue behind it.
    connecting: tokio::sync::Mutex<()>,
    script: redis::Script,
    /// (interval µs, burst) of reads and writes.
    shape: [(u64, u64); 2],
    ban: BanConfig,
    pub on_failure: OnFailure,
    timeout: Duration,
    /// When a connection attempt last failed: attempts are spaced, so an outage costs
    /// one attempt per `RETRY`, not one per request.
    last_attempt: parking_lot::Mutex<Option<Instant>>,
    failing: AtomicBool,
    checks: AtomicU64,
    failures: AtomicU64,
}

/// How often a lost Redis is tried again.
const RETRY: Duration = Duration::from_millis(250);

impl SharedLimits {
    pub fn new(cfg: &RedisConfig, limits: &RateLimitConfig, ban: &BanConfig) -> Result<SharedLimits, RedisClientError> {
        let client = client(&cfg.url, cfg.ca_file.as_deref())?;
        let shape = |per_second: u32, burst: u32| (1_000_000 / u64::from(per_second.max(1)), u64::from(burst.max(1)));
        Ok(SharedLimits {
            client,
            conn: parking_lot::RwLock::new(None),
            connecting: tokio::sync::Mutex::new(()),
            script: redis::Script::new(SCRIPT),
            shape: [
                shape(limits.per_second, limits.burst),
                shape(limits.write_per_second.unwrap_or(limits.per_second), limits.write_burst.unwrap_or(limits.burst)),
            ],
            ban: ban.clone(),
            on_failure: cfg.on_failure,
            timeout: Duration::from_millis(cfg.timeout_ms.max(1)),
            last_attempt: Default::default(),
            failing: AtomicBool::new(false),
            checks: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        })
    }

    /// The connection, made on first use and remade after an outage (at most every `RETRY`).
    async fn connection(&self) -> Option<ConnectionManager> {
        if let Some(c) = self.conn.read().as_ref() {
            return Some(c.clone());
        }
        // One request connects; the rest count as failures meanwhile instead of waiting.
        let Ok(_one) = self.connecting.try_lock() else { return None };
        if let Some(c) = self.conn.read().as_ref() {
            return Some(c.clone());
        }
        if self.last_attempt.lock().is_some_and(|t| t.elapsed() < RETRY) {
            return None;
        }
        *self.last_attempt.lock() = Some(Instant::now());
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(self.timeout)
            .set_response_timeout(self.timeout)
            .set_number_of_retries(1);
        match tokio::time::timeout(self.timeout * 2, ConnectionManager::new_with_config(self.client.clone(), config)).await {
            Ok(Ok(c)) => {
                *self.conn.write() = Some(c.clone());
                Some(c)
            }
            _ => None,
        }
    }

    /// One request's decision for `client`.
    pub async fn check(&self, client: &ClientKey, write: bool) -> Decision {
        self.checks.fetch_add(1, Ordering::Relaxed);
        let answer = match self.connection().await {
            Some(mut conn) => {
                let (interval, burst) = self.shape[usize::from(write)];
                let mut call = self.script.prepare_invoke();
                call.key(format!("signet:rl:{}:{client}", if write { "w" } else { "r" }))
                    .key(format!("signet:ban:{client}"))
                    .key(format!("signet:strikes:{client}"))
                    .arg(interval)
                    .arg(burst)
                    .arg(if self.ban.enabled { "1" } else { "0" })
                    .arg(self.ban.max_refusals)
                    .arg(self.ban.window_secs)
                    .arg(self.ban.duration_secs);
                match tokio::time::timeout(self.timeout, call.invoke_async::<(i64, i64)>(&mut conn)).await {
                    Ok(Ok(answer)) => Some(answer),
                    Ok(Err(e)) => {
                        self.note_failure(&e.to_string());
                        None
                    }
                    Err(_) => {
                        self.note_failure(&format!("no answer within {:?}", self.timeout));
                        None
                    }
                }
            }
            None => {
                self.note_failure("cannot connect");
                None
            }
        };
        let Some((code, value)) = answer else { return Decision::Unavailable };
        if self.failing.swap(false, Ordering::Relaxed) {
            tracing::info!("Redis answers again: rate limits and bans are shared again");
        }
        match code {
            0 => Decision::Allow,
            1 => Decision::Refuse(Duration::from_micros(value.max(0) as u64)),
            2 | 3 => {
                if code == 3 {
                    tracing::warn!(client = %client, until = value, "client banned on every instance (shared through Redis)");
                }
                Decision::Banned(value.max(0) as u64)
            }
            other => {
                self.note_failure(&format!("unexpected answer {other} from the limiter script"));
                Decision::Unavailable
            }
        }
    }

    /// Makes a ban imposed by this instance (say, for failed authentication) shared.
    pub async fn publish_ban(&self, client: ClientKey, until: u64, now: u64) {
        let Some(mut conn) = self.connection().await else { return };
        let secs = until.saturating_sub(now).max(1);
        let set = redis::cmd("SET").arg(format!("signet:ban:{client}")).arg(until).arg("EX").arg(secs).to_owned();
        if let Ok(Err(e)) = tokio::time::timeout(self.timeout, set.query_async::<()>(&mut conn)).await {
            self.note_failure(&e.to_string());
        }
    }

    /// Lifts `client`'s shared ban and forgets its strikes (`signet admin ban lift --redis`).
    /// `Ok(false)`: it had no shared ban.
    /// `ca_file` as `guard.redis.ca_file`.
    pub fn lift(url: &str, ca_file: Option<&std::path::Path>, client: &ClientKey) -> Result<bool, RedisClientError> {
        let unreachable = |source| RedisClientError::Unreachable { url: redact(url), source };
        let c = crate::redis_client::client(url, ca_file)?;
        let mut conn = c.get_connection_with_timeout(Duration::from_secs(5)).map_err(unreachable)?;
        let removed: i64 = redis::cmd("DEL").arg(format!("signet:ban:{client}")).query(&mut conn).map_err(unreachable)?;
        redis::cmd("DEL").arg(format!("signet:strikes:{client}")).query::<()>(&mut conn).map_err(unreachable)?;
        Ok(removed > 0)
    }

    fn note_failure(&self, why: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if !self.failing.swap(true, Ordering::Relaxed) {
            let policy = match self.on_failure {
                OnFailure::Open => "admitting requests unlimited (on_failure = \"open\")",
                OnFailure::Closed => "refusing requests with 503 (on_failure = \"closed\")",
            };
            tracing::warn!(error = why, "Redis cannot be reached for rate limits and bans; {policy} until it can");
        }
    }

    /// (checks, failures) since start, for `/metrics`.
    pub fn counts(&self) -> (u64, u64) {
        (self.checks.load(Ordering::Relaxed), self.failures.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_is_named_without_its_password() {
        let cfg = RedisConfig { url: "http://user:hunter2@host".into(), ..Default::default() };
        let e = SharedLimits::new(&cfg, &RateLimitConfig::default(), &BanConfig::default()).err().unwrap().to_string();
        assert!(e.contains("guard.redis.url") && e.contains("redis://") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn a_ca_file_is_for_tls_and_must_be_pem() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let cases = [
            ("redis://:hunter2@127.0.0.1:6379", junk.clone(), "is for TLS"),
            ("rediss://127.0.0.1:6379", dir.path().join("missing.pem"), "missing.pem"),
            ("rediss://:hunter2@127.0.0.1:6379", junk.clone(), "PEM"),
        ];
        for (url, ca, why) in cases {
            let e = client(url, Some(&ca)).err().unwrap().to_string();
            assert!(e.contains(why) && !e.contains("hunter2"), "{url}: {e}");
        }
        assert!(client("rediss://127.0.0.1:6379", None).is_ok(), "the system's roots");
    }
}
