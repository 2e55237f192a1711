//! The per-handshake certificate sources, report 000's two modes: `reload` reads and parses the
//! certificate and key at every handshake; `cached` does so only when its copy is older than a
//! TTL. Kept so that the comparison with `file` and `watch` (one atomic load) can be made
//! (`signet bench tls lookup`); neither is the better choice in production.
//!
//! Both keep the last good pair: a read that fails (a half-written file, a key that does not
//! match yet, garbage) never fails the handshake. It is counted as a validation error, logged
//! once, and the previous pair is served. The server refuses to start without one good pair,
//! so there always is one.
//!
//! The lookup runs inside the handshake, on the thread that drives it: the rustls certificate
//! resolver, or OpenSSL's servername callback, which OpenSSL calls for every ClientHello, with
//! or without SNI. The reads are blocking file reads on that thread; that is the cost being
//! measured.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;

use crate::backend::Backend;
use crate::certified::{CertError, CertifiedPair};
use crate::file_source::FileSource;
use crate::openssl_pair::OpensslPair;
use crate::source::{self, Freshness, CACHE_MISSES, HITS, LOADS, VALIDATION_ERRORS};

/// A pair in the forms the backends present: rustls's `CertifiedKey` (inside the pair), and
/// OpenSSL's objects when the acceptor is OpenSSL's.
pub(crate) struct Loaded {
    pub(crate) pair: CertifiedPair,
    pub(crate) openssl: Option<OpensslPair>,
}

struct Served {
    loaded: Arc<Loaded>,
    /// `cached`: served without a read until then.
    fresh_until: Instant,
}

/// What one lookup did; the unit tests check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The cached copy, still fresh.
    Hit,
    /// The cached copy, expired, while another handshake re-reads the files.
    Stale,
    /// Read and parsed now, and served.
    Loaded,
    /// Read now but unusable: the last good pair was served.
    Kept,
}

/// The certificate of an acceptor whose handshakes look it up ([`Freshness`]).
pub(crate) struct PerHandshake {
    source: FileSource,
    freshness: Freshness,
    backend: Backend,
    served: ArcSwap<Served>,
    /// `cached`: one handshake reads at a time; the others serve the copy meanwhile.
    reading: AtomicBool,
    /// The served certificate's notAfter (Unix seconds), shared with the acceptor for `/metrics`.
    not_after: Arc<AtomicI64>,
    /// Set while reads fail, so that a persisting problem is logged once.
    failing: AtomicBool,
    last_error: parking_lot::Mutex<Option<String>>,
}

impl PerHandshake {
    /// Reads the pair once now: a source that cannot start with a good pair is an error.
    pub(crate) fn new(source: &FileSource, freshness: Freshness, backend: Backend, not_after: Arc<AtomicI64>) -> Result<PerHandshake, CertError> {
        let source = FileSource { client_ca: None, ..source.clone() };
        let first = Arc::new(read(&source, backend)?);
        if let Some(warning) = first.pair.validity_warning(std::time::SystemTime::now()) {
            tracing::warn!("{warning}");
        }
        not_after.store(unix_seconds(&first.pair), Ordering::Relaxed);
        let fresh_until = match freshness {
            Freshness::Cached(ttl) => Instant::now() + ttl,
            Freshness::Reload => Instant::now(),
        };
        Ok(PerHandshake {
            source,
            freshness,
            backend,
            served: ArcSwap::from_pointee(Served { loaded: first, fresh_until }),
            reading: AtomicBool::new(false),
            not_after,
            failing: AtomicBool::new(false),
            last_error: parking_lot::Mutex::new(None),
        })
    }

    /// The pair for one handshake, handed to `present`.
    pub(crate) fn lookup<R>(&self, present: impl FnOnce(&Loaded) -> R) -> R {
        self.lookup_at(Instant::now(), present).0
    }

    pub(crate) fn lookup_at<R>(&self, now: Instant, present: impl FnOnce(&Loaded) -> R) -> (R, Outcome) {
        match self.freshness {
            Freshness::Reload => match read(&self.source, self.backend) {
                Ok(loaded) => {
                    let loaded = Arc::new(loaded);
                    self.good(&loaded);
                    self.served.store(Arc::new(Served { loaded: loaded.clone(), fresh_until: now }));
                    (present(&loaded), Outcome::Loaded)
                }
                Err(e) => {
                    self.bad(e);
                    (present(&self.served.load().loaded), Outcome::Kept)
                }
            },
            Freshness::Cached(ttl) => {
                {
                    let served = self.served.load();
                    if now < served.fresh_until {
                        HITS.add();
                        return (present(&served.loaded), Outcome::Hit);
                    }
                }
                let Some(_turn) = Turn::take(&self.reading) else {
                    HITS.add();
                    // The handshake holding the turn may have stored the new copy already.
                    let served = self.served.load();
                    let outcome = if now < served.fresh_until { Outcome::Hit } else { Outcome::Stale };
                    return (present(&served.loaded), outcome);
                };
                // Another handshake may have refreshed the copy between the check and the turn.
                let served = self.served.load_full();
                if now < served.fresh_until {
                    HITS.add();
                    return (present(&served.loaded), Outcome::Hit);
                }
                source::count(&CACHE_MISSES);
                let (loaded, outcome) = match read(&self.source, self.backend) {
                    Ok(loaded) => {
                        let loaded = Arc::new(loaded);
                        self.good(&loaded);
                        (loaded, Outcome::Loaded)
                    }
                    // The last good pair, fresh again: a broken file is retried once per TTL,
                    // not at every handshake.
                    Err(e) => {
                        self.bad(e);
                        (served.loaded.clone(), Outcome::Kept)
                    }
                };
                self.served.store(Arc::new(Served { loaded: loaded.clone(), fresh_until: now + ttl }));
                (present(&loaded), outcome)
            }
        }
    }

    fn good(&self, loaded: &Loaded) {
        self.not_after.store(unix_seconds(&loaded.pair), Ordering::Relaxed);
        if self.failing.swap(false, Ordering::Relaxed) {
            *self.last_error.lock() = None;
            tracing::info!("TLS certificate {} is readable and valid again", loaded.pair.origin());
        }
    }

    fn bad(&self, e: CertError) {
        source::count(&VALIDATION_ERRORS);
        self.failing.store(true, Ordering::Relaxed);
        let why = e.to_string();
        let mut last = self.last_error.lock();
        if last.as_ref() != Some(&why) {
            tracing::warn!("TLS certificate read at a handshake failed, still serving the previous certificate: {why}");
            *last = Some(why);
        }
    }
}

/// `install` on an acceptor whose certificate is looked up: a mistake of the caller's.
pub(crate) fn install_refused(backend: &'static str) -> CertError {
    CertError::Backend {
        backend,
        why: "this acceptor looks its certificate up at each handshake (source reload or cached); a pair cannot be installed into it".into(),
    }
}

fn read(source: &FileSource, backend: Backend) -> Result<Loaded, CertError> {
    source::count(&LOADS);
    let pair = CertifiedPair::from_files(&source.cert, &source.key)?;
    let openssl = match backend {
        Backend::Openssl => Some(OpensslPair::new(&pair)?),
        Backend::Rustls => None,
    };
    Ok(Loaded { pair, openssl })
}

fn unix_seconds(pair: &CertifiedPair) -> i64 {
    pair.not_after().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The `cached` source's one reader: holds the flag until dropped.
struct Turn<'a>(&'a AtomicBool);

impl<'a> Turn<'a> {
    fn take(flag: &'a AtomicBool) -> Option<Turn<'a>> {
        flag.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).ok().map(|_| Turn(flag))
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use crate::testing::{ServerPem, TestPki};

    struct Files {
        _dir: tempfile::TempDir,
        source: FileSource,
    }

    impl Files {
        fn new(pem: &ServerPem) -> Files {
            let dir = tempfile::tempdir().unwrap();
            let source = FileSource::new(dir.path().join("tls.crt"), dir.path().join("tls.key"));
            let files = Files { _dir: dir, source };
            files.write(pem);
            files
        }

        fn write(&self, pem: &ServerPem) {
            std::fs::write(&self.source.cert, &pem.chain).unwrap();
            std::fs::write(&self.source.key, &pem.key).unwrap();
        }
    }

    fn leaf(loaded: &Loaded) -> Vec<u8> {
        loaded.pair.chain()[0].to_vec()
    }

    fn errors() -> u64 {
        VALIDATION_ERRORS.load(Ordering::Relaxed)
    }

    #[test]
    fn reload_reads_at_every_handshake_and_keeps_the_last_good_pair() {
        let pki = TestPki::new();
        let (a, b) = (pki.server_pem(), pki.issue_server());
        for backend in Backend::ALL {
            let files = Files::new(&a);
            let not_after = Arc::new(AtomicI64::new(0));
            let source = PerHandshake::new(&files.source, Freshness::Reload, backend, not_after.clone()).unwrap();
            assert!(not_after.load(Ordering::Relaxed) > 0, "{backend}");
            let now = Instant::now();
            assert_eq!(source.lookup_at(now, leaf), (a.leaf_der.clone(), Outcome::Loaded), "{backend}");

            files.write(&b);
            assert_eq!(source.lookup_at(now, leaf), (b.leaf_der.clone(), Outcome::Loaded), "{backend}: the very next lookup");
            assert_eq!(source.lookup_at(now, |l| l.openssl.is_some()).0, backend == Backend::Openssl, "{backend}");

            // A half-written certificate, garbage for a key, a missing file: B keeps serving.
            let before = errors();
            std::fs::write(&files.source.cert, &a.chain[..a.chain.len() / 2]).unwrap();
            assert_eq!(source.lookup_at(now, leaf), (b.leaf_der.clone(), Outcome::Kept), "{backend}");
            std::fs::write(&files.source.cert, &a.chain).unwrap();
            std::fs::write(&files.source.key, "not a key\n").unwrap();
            assert_eq!(source.lookup_at(now, leaf), (b.leaf_der.clone(), Outcome::Kept), "{backend}");
            std::fs::remove_file(&files.source.key).unwrap();
            assert_eq!(source.lookup_at(now, leaf), (b.leaf_der.clone(), Outcome::Kept), "{backend}");
            // The key of another certificate: a mismatch.
            std::fs::write(&files.source.key, &b.key).unwrap();
            assert_eq!(source.lookup_at(now, leaf), (b.leaf_der.clone(), Outcome::Kept), "{backend}");
            assert!(errors() >= before + 4, "{backend}: each failed read is a validation error");

            std::fs::write(&files.source.key, &a.key).unwrap();
            assert_eq!(source.lookup_at(now, leaf), (a.leaf_der.clone(), Outcome::Loaded), "{backend}: whole again");
        }
    }

    #[test]
    fn cached_serves_its_copy_within_the_ttl_and_rereads_after_it() {
        let pki = TestPki::new();
        let (a, b) = (pki.server_pem(), pki.issue_server());
        let ttl = Duration::from_secs(60);
        for backend in Backend::ALL {
            let files = Files::new(&a);
            let source = PerHandshake::new(&files.source, Freshness::Cached(ttl), backend, Arc::default()).unwrap();
            let start = Instant::now();
            assert_eq!(source.lookup_at(start, leaf), (a.leaf_der.clone(), Outcome::Hit), "{backend}");

            files.write(&b);
            let within = start + ttl - Duration::from_secs(1);
            assert_eq!(source.lookup_at(within, leaf), (a.leaf_der.clone(), Outcome::Hit), "{backend}: the copy, within the TTL");

            let after = start + ttl + Duration::from_secs(1);
            assert_eq!(source.lookup_at(after, leaf), (b.leaf_der.clone(), Outcome::Loaded), "{backend}: re-read after the TTL");
            assert_eq!(source.lookup_at(after, leaf), (b.leaf_der.clone(), Outcome::Hit), "{backend}: and cached again");

            // A broken file at expiry: the last good pair, fresh for another TTL (no re-read
            // at every handshake), then read again.
            std::fs::write(&files.source.key, "-----BEGIN PRIVATE KEY-----\ngarbage\n").unwrap();
            let later = after + ttl + Duration::from_secs(1);
            let before = errors();
            assert_eq!(source.lookup_at(later, leaf), (b.leaf_der.clone(), Outcome::Kept), "{backend}");
            assert!(errors() > before, "{backend}: counted");
            assert_eq!(source.lookup_at(later + Duration::from_secs(1), leaf), (b.leaf_der.clone(), Outcome::Hit), "{backend}");
            files.write(&a);
            let retry = later + ttl + Duration::from_secs(1);
            assert_eq!(source.lookup_at(retry, leaf), (a.leaf_der.clone(), Outcome::Loaded), "{backend}");
        }
    }

    #[test]
    fn an_expired_copy_is_reread_by_one_handshake_while_the_others_serve_it() {
        let pki = TestPki::new();
        let (a, b) = (pki.server_pem(), pki.issue_server());
        let ttl = Duration::from_secs(60);
        let files = Files::new(&a);
        let source = Arc::new(PerHandshake::new(&files.source, Freshness::Cached(ttl), Backend::Rustls, Arc::default()).unwrap());
        files.write(&b);
        let expired = Instant::now() + ttl * 2;
        let barrier = Arc::new(std::sync::Barrier::new(32));
        let threads: Vec<_> = (0..32)
            .map(|_| {
                let (source, barrier) = (source.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    source.lookup_at(expired, leaf)
                })
            })
            .collect();
        let results: Vec<(Vec<u8>, Outcome)> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let reads = results.iter().filter(|(_, o)| *o == Outcome::Loaded).count();
        assert_eq!(reads, 1, "exactly one handshake re-reads: {:?}", results.iter().map(|r| r.1).collect::<Vec<_>>());
        for (served, outcome) in &results {
            match outcome {
                Outcome::Stale => assert_eq!(served, &a.leaf_der, "a handshake that did not wait serves the old copy"),
                Outcome::Loaded | Outcome::Hit => assert_eq!(served, &b.leaf_der),
                Outcome::Kept => panic!("nothing failed"),
            }
        }
    }

    #[test]
    fn a_source_that_cannot_start_with_a_good_pair_is_refused() {
        let pki = TestPki::new();
        let files = Files::new(&pki.server_pem());
        std::fs::write(&files.source.key, &pki.issue_server().key).unwrap();
        let err = PerHandshake::new(&files.source, Freshness::Reload, Backend::Rustls, Arc::default()).err().unwrap();
        assert!(matches!(err, CertError::KeyMismatch { .. }), "{err}");
    }
}
