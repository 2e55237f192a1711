//! Bans: a client refused too often within a window is shut out for a while.
//!
//! The point is cost: a banned client gets a 403 from one map lookup, before token checks,
//! rate-limit buckets or handlers. Strikes use a fixed window per client (count, window
//! start), which is all a threshold needs and costs one map entry per misbehaving client.
//!
//! - [`layer`]: the tower layer that refuses banned clients and counts strikes.
//! - [`Bans`], [`Strikes`]: the state it keeps, in the [`crate::Guard`].

use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;

use crate::client::ClientKey;
use crate::config::BanConfig;
use crate::store::BanRecord;

pub mod layer;

/// The bans in force, as the server sees them (its own, and the store's).
#[derive(Default)]
pub struct Bans {
    until: DashMap<ClientKey, u64>,
    /// Kept beside the map so that the common case, no bans at all, costs one atomic load.
    len: AtomicUsize,
}

impl Bans {
    /// No ban in force anywhere: the common case, one atomic load.
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Relaxed) == 0
    }

    /// Until when (unix seconds) `client` is banned, if it is at `now`.
    pub fn banned_until(&self, client: &ClientKey, now: u64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        self.until.get(client).map(|u| *u).filter(|u| *u > now)
    }

    pub fn insert(&self, client: ClientKey, until: u64) {
        self.until.insert(client, until);
        self.len.store(self.until.len(), Ordering::Relaxed);
    }

    /// Replaces every ban with the store's list (after `signet admin ban lift`).
    pub fn replace(&self, bans: &[BanRecord]) {
        self.until.retain(|k, _| bans.iter().any(|b| b.client == *k));
        for b in bans {
            self.until.insert(b.client, b.until);
        }
        self.len.store(self.until.len(), Ordering::Relaxed);
    }

    /// Lifts the ban of `client`; whether it had one.
    pub fn lift(&self, client: &ClientKey) -> bool {
        let had = self.until.remove(client).is_some();
        self.len.store(self.until.len(), Ordering::Relaxed);
        had
    }

    /// The bans in force at `now`: client and until, soonest to end first.
    pub fn list(&self, now: u64) -> Vec<(ClientKey, u64)> {
        let mut all: Vec<(ClientKey, u64)> = self.until.iter().map(|e| (*e.key(), *e.value())).filter(|(_, u)| *u > now).collect();
        all.sort_by_key(|(c, u)| (*u, c.to_string()));
        all
    }

    pub fn forget_expired(&self, now: u64) {
        self.until.retain(|_, u| *u > now);
        self.len.store(self.until.len(), Ordering::Relaxed);
    }
}

/// Refusals per client within the current window.
/// At most `max_clients` are counted: past that, old windows are dropped, and if the table is
/// still full a new client's refusal is not counted (it is still refused; only its progress
/// towards a ban is lost, which bans exist to save work, not to enforce limits).
pub struct Strikes {
    cfg: BanConfig,
    counts: DashMap<ClientKey, (u64, u32)>,
    max_clients: usize,
}

impl Strikes {
    pub fn new(cfg: BanConfig, max_clients: usize) -> Strikes {
        Strikes { cfg, counts: DashMap::new(), max_clients }
    }

    /// Clients with refusals counted now.
    pub fn tracked(&self) -> usize {
        self.counts.len()
    }

    /// Counts one refusal of `client` at `now`; returns the ban to impose when this one
    /// crosses the threshold. The count restarts then, so that a lifted ban needs as many
    /// fresh refusals as the first.
    pub fn strike(&self, client: ClientKey, now: u64, why: &str) -> Option<BanRecord> {
        if !self.cfg.enabled {
            return None;
        }
        if self.counts.len() >= self.max_clients && !self.counts.contains_key(&client) {
            self.forget_old(now);
            if self.counts.len() >= self.max_clients {
                return None;
            }
        }
        let mut entry = self.counts.entry(client).or_insert((now, 0));
        let (start, count) = &mut *entry;
        if now.saturating_sub(*start) >= self.cfg.window_secs {
            (*start, *count) = (now, 0);
        }
        *count += 1;
        if *count <= self.cfg.max_refusals {
            return None;
        }
        *count = 0;
        Some(BanRecord {
            client,
            reason: format!("more than {} refusals ({why}) within {} s", self.cfg.max_refusals, self.cfg.window_secs),
            since: now,
            until: now + self.cfg.duration_secs,
        })
    }

    pub fn forget_old(&self, now: u64) {
        self.counts.retain(|_, (start, _)| now.saturating_sub(*start) < self.cfg.window_secs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bans_after_threshold_within_window_only() {
        let s = Strikes::new(BanConfig { enabled: true, max_refusals: 3, window_secs: 10, duration_secs: 60 }, 1000);
        let k: ClientKey = "10.0.0.9".parse().unwrap();
        for _ in 0..3 {
            assert!(s.strike(k, 100, "rate limited").is_none());
        }
        let ban = s.strike(k, 105, "rate limited").expect("the fourth refusal bans");
        assert_eq!((ban.since, ban.until), (105, 165));
        assert!(ban.reason.contains("more than 3 refusals"));
        for t in [106, 107, 108] {
            assert!(s.strike(k, t, "x").is_none());
        }
        assert!(s.strike(k, 120, "x").is_none(), "a new window starts the count again");

        let bans = Bans::default();
        assert_eq!(bans.banned_until(&k, 100), None);
        bans.insert(k, 165);
        assert_eq!(bans.banned_until(&k, 100), Some(165));
        assert_eq!(bans.banned_until(&k, 165), None, "expired");
        bans.replace(&[]);
        assert_eq!(bans.banned_until(&k, 100), None, "lifted");
    }
}
