//! An authority whose key hands over to a successor at a set second (`signet trust rotate
//! --at`).
//!
//! The trusted root is published before the hand-over with the old key's window ending
//! there and the new one's starting there. So the key that signs must be chosen by the very
//! time the signature states (a timestamp's genTime, a certificate's notBefore), not by when
//! a timer fires: [`Handover::at`] takes that time. Past the old window's end, with no
//! successor loaded, it signs nothing rather than something no client would accept.

use std::sync::Arc;

use arc_swap::ArcSwap;

pub struct Handover<T> {
    now: ArcSwap<State<T>>,
}

struct State<T> {
    current: Arc<T>,
    /// The second the current key's window ends (Unix), once a successor is announced.
    until: Option<i64>,
    /// The successor and its first second.
    next: Option<(i64, Arc<T>)>,
}

/// Why nothing may sign at the time asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the key's window ended at {ended} (Unix) and its successor is not loaded yet")]
pub struct Ended {
    pub ended: i64,
}

impl<T> Handover<T> {
    pub fn new(current: T) -> Handover<T> {
        Handover { now: ArcSwap::from_pointee(State { current: Arc::new(current), until: None, next: None }) }
    }

    /// The one that signs at `unix` seconds.
    pub fn at(&self, unix: i64) -> Result<Arc<T>, Ended> {
        let state = self.now.load();
        if let Some((from, next)) = &state.next {
            if unix >= *from {
                return Ok(next.clone());
            }
        }
        match state.until {
            Some(ended) if unix >= ended => Err(Ended { ended }),
            _ => Ok(state.current.clone()),
        }
    }

    /// The one that signs now, or the current one when none may (for what describes the
    /// authority rather than signs: its chain).
    pub fn now(&self) -> Arc<T> {
        let state = self.now.load();
        self.at(unix_now()).unwrap_or_else(|_| state.current.clone())
    }

    /// Announces that the current key stops signing at `until`, before its successor can be
    /// loaded (or when loading it failed).
    pub fn end_at(&self, until: i64) {
        self.now.rcu(|s| Arc::new(State { current: s.current.clone(), until: Some(until), next: s.next.clone() }));
    }

    /// `next` signs from `from` on; the current key stops there.
    pub fn hand_over_at(&self, from: i64, next: T) {
        let next = Arc::new(next);
        self.now.rcu(|s| Arc::new(State { current: s.current.clone(), until: Some(from), next: Some((from, next.clone())) }));
    }

    /// Whether a successor from `from` is loaded.
    pub fn has_next_from(&self, from: i64) -> bool {
        self.now.load().next.as_ref().is_some_and(|(f, _)| *f == from)
    }

    /// Once the successor signs, it becomes the current one: what a later hand-over starts
    /// from.
    pub fn settle(&self, unix: i64) {
        self.now.rcu(|s| match &s.next {
            Some((from, next)) if unix >= *from => Arc::new(State { current: next.clone(), until: None, next: None }),
            _ => s.clone(),
        });
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_signed_chooses_the_key() {
        let h = Handover::new("old");
        assert_eq!(*h.at(1_000).unwrap(), "old");
        h.end_at(2_000);
        assert_eq!(*h.at(1_999).unwrap(), "old");
        assert_eq!(h.at(2_000).unwrap_err(), Ended { ended: 2_000 }, "nothing signs past the window with no successor");
        h.hand_over_at(2_000, "new");
        assert!(h.has_next_from(2_000) && !h.has_next_from(2_001));
        assert_eq!(*h.at(1_999).unwrap(), "old");
        assert_eq!(*h.at(2_000).unwrap(), "new");
        h.settle(1_999);
        assert_eq!(*h.at(1_999).unwrap(), "old", "not settled before the hand-over");
        h.settle(2_000);
        assert_eq!(*h.at(1_000).unwrap(), "new", "settled: the successor is the current one");
        assert!(!h.has_next_from(2_000));
    }
}
