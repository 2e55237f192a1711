//! The rate limits' state: a GCRA token bucket per client (governor), one table for reads and
//! one for writes, bounded in memory. [`crate::ratelimit`] is the layer that spends them.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::client::ClientKey;
use crate::config::RateLimitConfig;

/// The read and write buckets of every tracked client.
///
/// Memory is bounded by `max_clients` per table. When a table is full, idle clients (whose
/// buckets are full again, so forgetting them changes nothing) are swept at once, at most
/// once a second; if it is still full, clients share the [`ClientKey::Overflow`] bucket
/// until room frees up. That is safe in both directions: forgetting a bucket only ever
/// hands a client a fresh burst it would have had anyway after idling, and the overflow
/// bucket can only limit more, never less. Bans are kept apart and never evicted this way.
pub struct Limiters {
    reads: DefaultKeyedRateLimiter<ClientKey>,
    writes: DefaultKeyedRateLimiter<ClientKey>,
    clock: DefaultClock,
    max_clients: usize,
    /// Whether the read and the write table were full when last counted.
    full: [AtomicBool; 2],
    /// When a full table was last swept, in whole seconds since start.
    last_full_sweep: AtomicU64,
    started: std::time::Instant,
}

/// How many decisions a thread makes between two counts of a table.
pub const CHECK_EVERY: u32 = 256;

thread_local! {
    static CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn quota(per_second: u32, burst: u32) -> Quota {
    let nz = |n: u32| NonZeroU32::new(n.max(1)).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(nz(per_second)).allow_burst(nz(burst))
}

impl Limiters {
    pub fn new(c: &RateLimitConfig, max_clients: usize) -> Limiters {
        let writes = (c.write_per_second.unwrap_or(c.per_second), c.write_burst.unwrap_or(c.burst));
        Limiters {
            reads: DefaultKeyedRateLimiter::keyed(quota(c.per_second, c.burst)),
            writes: DefaultKeyedRateLimiter::keyed(quota(writes.0, writes.1)),
            clock: DefaultClock::default(),
            max_clients,
            full: Default::default(),
            last_full_sweep: AtomicU64::new(u64::MAX),
            started: std::time::Instant::now(),
        }
    }

    /// `Err(wait)`: refused; the bucket has room again after `wait`.
    pub fn check(&self, client: &ClientKey, write: bool) -> Result<(), Duration> {
        let (limiter, full) = if write { (&self.writes, &self.full[1]) } else { (&self.reads, &self.full[0]) };
        // Counting a table walks its shards (75 ns, three times the decision itself), so each
        // thread looks only every CHECK_EVERY decisions: a table may overshoot its cap by
        // that many clients per thread, and stays bounded.
        let n = CALLS.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n
        });
        if n % CHECK_EVERY == 0 {
            // Both tables: a caller's reads and writes may alternate in step with the count.
            self.full[0].store(self.reads.len() >= self.max_clients, Ordering::Relaxed);
            self.full[1].store(self.writes.len() >= self.max_clients, Ordering::Relaxed);
        }
        let key = if !full.load(Ordering::Relaxed) {
            client
        } else {
            let now = self.started.elapsed().as_secs();
            let last = self.last_full_sweep.load(Ordering::Relaxed);
            if last != now && self.last_full_sweep.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                self.forget_idle();
                full.store(limiter.len() >= self.max_clients, Ordering::Relaxed);
            }
            if full.load(Ordering::Relaxed) { &ClientKey::Overflow } else { client }
        };
        limiter.check_key(key).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Clients tracked (reads, writes).
    pub fn tracked(&self) -> (usize, usize) {
        (self.reads.len(), self.writes.len())
    }

    /// Drops the buckets of clients that have been idle long enough to be full again.
    pub fn forget_idle(&self) {
        self.reads.retain_recent();
        self.writes.retain_recent();
    }
}
