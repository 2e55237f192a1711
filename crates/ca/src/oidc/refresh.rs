//! Rate-limited key set refreshes.
//!
//! The verifier refreshes an issuer's key set whenever a token names an unknown key ID.
//! Anyone can send tokens with made-up key IDs, so a key source that goes over the network
//! is wrapped here: it is called at most once per interval, and in between every caller
//! gets the outcome of the last call, the key set or the error. A forged key ID then meets
//! the old set and is refused as unknown, without a request to the issuer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::error::KeySetError;
use super::jwks::KeySet;
use super::verify::KeySource;

/// `source`, called at most once per `interval`. Concurrent callers wait for the call in
/// flight and share its outcome.
pub fn rate_limited(source: KeySource, interval: Duration) -> KeySource {
    let last: Mutex<Option<(Instant, Result<KeySet, KeySetError>)>> = Mutex::new(None);
    Arc::new(move || {
        let mut last = last.lock();
        if let Some((at, outcome)) = last.as_ref() {
            if at.elapsed() < interval {
                return outcome.clone();
            }
        }
        let outcome = source();
        *last = Some((Instant::now(), outcome.clone()));
        outcome
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counting(outcome: Result<&'static str, &'static str>) -> (KeySource, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let source: KeySource = Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            outcome.map(|jwks| KeySet::from_json(jwks).unwrap()).map_err(|why| KeySetError::Fetch { why: why.to_string() })
        });
        (source, calls)
    }

    #[test]
    fn within_the_interval_the_last_outcome_is_reused() {
        let (source, calls) = counting(Ok(r#"{"keys": []}"#));
        let limited = rate_limited(source, Duration::from_secs(3600));
        for _ in 0..5 {
            assert!(limited().unwrap().is_empty());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let (source, calls) = counting(Err("issuer down"));
        let limited = rate_limited(source, Duration::from_secs(3600));
        for _ in 0..3 {
            assert_eq!(limited().err().map(|e| e.to_string()).as_deref(), Some("issuer down"), "errors are remembered too");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn after_the_interval_the_source_is_called_again() {
        let (source, calls) = counting(Ok(r#"{"keys": []}"#));
        let limited = rate_limited(source, Duration::ZERO);
        for _ in 0..3 {
            limited().unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }
}
