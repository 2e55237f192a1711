//! signet's own log, witnessed (`[log.witnesses]`): each new checkpoint goes to every
//! configured witness with a consistency proof from the size that witness holds, and their
//! cosignatures are collected. The checkpoint served is the newest that a quorum (k of n)
//! cosigned, with their lines (c2sp.org/tlog-witness, c2sp.org/tlog-cosignature).
//!
//! One thread per witness: a slow or dead witness delays only its own cosignatures, and the
//! quorum goes on without it. A witness starts unknown (old size 0); its 409 says the size it
//! holds, and the next request starts there. A 409 that repeats the size just sent means the
//! witness holds another root at that size: it saw a fork, or this log was reset. That is
//! logged as an error and retried slowly; it is never papered over. A witness that holds a
//! larger tree than the log's checkpoint is told to the log ([`Head::witness_is_ahead`]):
//! if its storage holds less, it was restored, and it stops taking appends.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use signet_core::hash::Hash;
use signet_core::merkle::ProofError;
use signet_core::note::{NoteError, SignedNote};
use signet_core::notekey::{NoteKeyType, VerifierKey};
use signet_tls::FetchError;

use crate::request;

/// The log being witnessed, as the collector sees it.
pub trait Head: Send + Sync + 'static {
    /// The size and signed note of the log's latest checkpoint.
    fn latest(&self) -> (u64, Arc<str>);
    /// The consistency proof between two sizes of the log.
    fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, ProofError>;
    /// A witness holds a larger tree of this log than the checkpoint just sent: it cosigned
    /// a checkpoint that this log may no longer hold (a restored database). Called from the
    /// witness's thread; the log decides, from its storage, what that means.
    fn witness_is_ahead(&self, _witness: &str, _holds: u64) {}
}

/// A witness to ask: where, and the key its cosignatures must verify with.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The submission prefix: requests go to `<url>/add-checkpoint`.
    pub url: String,
    pub vkey: VerifierKey,
}

/// How often a witness's thread looks for a new checkpoint.
const POLL: Duration = Duration::from_millis(50);
/// The first wait after a failure; it doubles up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Sizes kept while waiting for a quorum.
const KEPT: usize = 64;

/// One witness's counters, for `/metrics` and `signet doctor`.
#[derive(Debug, Default)]
pub struct WitnessCounters {
    pub cosigned: AtomicU64,
    pub failures: AtomicU64,
    /// The size of the latest checkpoint it cosigned (0: none yet).
    pub latest_size: AtomicU64,
}

#[derive(Default)]
struct Collected {
    /// By size: the log's note, and the cosignature line of each witness (by index).
    sizes: BTreeMap<u64, (Arc<str>, BTreeMap<usize, String>)>,
    /// The newest checkpoint with a quorum, with its cosignature lines.
    served: Option<(u64, Arc<str>)>,
}

/// The collector: its witnesses, their threads, and what they collected.
pub struct Cosigning {
    endpoints: Vec<Endpoint>,
    quorum: usize,
    collected: Mutex<Collected>,
    pub counters: Vec<WitnessCounters>,
    stop: AtomicBool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error("quorum {quorum} is not between 1 and the {n} witnesses listed")]
    Quorum { quorum: usize, n: usize },
    #[error("witness {0}: its vkey must be a cosignature/v1 key (type 0x04)")]
    NotCosignatureKey(String),
}

/// Why asking a witness to cosign failed (it is asked again after a backoff).
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error(transparent)]
    Request(#[from] http::Error),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("the answer is not UTF-8")]
    NotUtf8,
    #[error("its answer does not parse as signature lines: {0}")]
    Lines(#[source] NoteError),
    #[error("no line of its answer verifies with {0}")]
    NoLine(VerifierKey),
    #[error("409 with a body that is not a size: {0:?}")]
    NotASize(String),
    /// Any other answer: its status and its body, trimmed.
    #[error("HTTP {status}: {body}")]
    Status { status: u16, body: String },
}

impl Cosigning {
    /// Starts one thread per witness, asking with `fetcher`.
    pub fn start(head: Arc<dyn Head>, endpoints: Vec<Endpoint>, quorum: usize, fetcher: signet_tls::Fetcher) -> Result<Arc<Cosigning>, SetupError> {
        if quorum == 0 || quorum > endpoints.len() {
            return Err(SetupError::Quorum { quorum, n: endpoints.len() });
        }
        if let Some(e) = endpoints.iter().find(|e| e.vkey.kind != NoteKeyType::Cosignature) {
            return Err(SetupError::NotCosignatureKey(e.url.clone()));
        }
        let counters = endpoints.iter().map(|_| WitnessCounters::default()).collect();
        let me = Arc::new(Cosigning { endpoints, quorum, collected: Mutex::default(), counters, stop: AtomicBool::new(false) });
        for i in 0..me.endpoints.len() {
            let (asker, head, fetcher) = (me.clone(), head.clone(), fetcher.clone());
            let spawned = std::thread::Builder::new().name(format!("witness-{i}")).spawn(move || asker.ask(i, &*head, &fetcher));
            if let Err(e) = spawned {
                tracing::error!(witness = %me.endpoints[i].url, error = %e, "cannot start the thread that asks this witness");
            }
        }
        Ok(me)
    }

    /// The newest checkpoint a quorum cosigned, with their lines; `None` until one has.
    pub fn served(&self) -> Option<(u64, Arc<str>)> {
        self.collected.lock().served.clone()
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Stops asking (at shutdown).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// One witness's loop.
    fn ask(&self, i: usize, head: &dyn Head, fetcher: &signet_tls::Fetcher) {
        let endpoint = &self.endpoints[i];
        let url = format!("{}/add-checkpoint", endpoint.url.trim_end_matches('/'));
        // What the witness holds: unknown until it says (a 409) or cosigns.
        let mut held: u64 = 0;
        let mut cosigned: Option<u64> = None;
        let mut backoff = BACKOFF;
        while !self.stop.load(Ordering::Relaxed) {
            // Another witness's newest cosigned size first, so that a quorum forms on one
            // checkpoint even while the log moves on; else the log's latest.
            let (size, note) = self.wanted(i, cosigned).unwrap_or_else(|| head.latest());
            if cosigned == Some(size) {
                std::thread::sleep(POLL);
                continue;
            }
            match self.submit(endpoint, &url, head, fetcher, held, size, &note) {
                Ok(Answer::Cosigned(line)) => {
                    held = size;
                    cosigned = Some(size);
                    backoff = BACKOFF;
                    self.counters[i].cosigned.fetch_add(1, Ordering::Relaxed);
                    self.counters[i].latest_size.store(size, Ordering::Relaxed);
                    self.record(i, size, note, line);
                    continue;
                }
                Ok(Answer::Holds(n)) if n != held && n <= size => {
                    held = n;
                    continue;
                }
                Ok(Answer::Holds(n)) => {
                    if n > size {
                        head.witness_is_ahead(&endpoint.url, n);
                    }
                    tracing::error!(
                    witness = %endpoint.url, holds = n, sent_old = held, size,
                    "the witness holds a tree this log cannot extend: another root at that size, or a larger tree (a fork, or this log was reset)"
                    )
                }
                Err(why) => tracing::warn!(witness = %endpoint.url, error = %why, "asking the witness to cosign failed; retrying"),
            }
            self.counters[i].failures.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn submit(&self, endpoint: &Endpoint, url: &str, head: &dyn Head, fetcher: &signet_tls::Fetcher, held: u64, size: u64, note: &str) -> Result<Answer, AskError> {
        let proof = match held {
            0 => Vec::new(),
            h if h >= size => Vec::new(),
            h => head.consistency_proof(h, size)?,
        };
        let body = request::format(held, &proof, note);
        let req = http::Request::post(url)
            .header(http::header::CONTENT_TYPE, "text/plain")
            .body(Bytes::from(body))?;
        let response = fetcher.send(url, req)?;
        let text = std::str::from_utf8(response.body()).map_err(|_| AskError::NotUtf8)?;
        match response.status().as_u16() {
            200 => {
                // The lines, appended to the note, must hold one that verifies with this
                // witness's key; lines by other keys are ignored, as the spec says.
                let cosigned = SignedNote::parse(&format!("{note}{text}")).map_err(AskError::Lines)?;
                let line = cosigned
                    .signatures
                    .iter()
                    .find(|s| endpoint.vkey.check(&cosigned.text, s).is_some())
                    .ok_or_else(|| AskError::NoLine(endpoint.vkey.clone()))?;
                Ok(Answer::Cosigned(signet_core::notekey::signature_line(line)))
            }
            409 => text.trim_end_matches('\n').parse().map(Answer::Holds).map_err(|_| AskError::NotASize(text.to_string())),
            status => Err(AskError::Status { status, body: text.trim().to_string() }),
        }
    }

    /// The newest size some witness cosigned and witness `i` has not, past what it cosigned.
    fn wanted(&self, i: usize, cosigned: Option<u64>) -> Option<(u64, Arc<str>)> {
        let c = self.collected.lock();
        let served = c.served.as_ref().map(|(s, _)| *s);
        let (size, (note, _)) = c.sizes.iter().rev().find(|(_, (_, lines))| !lines.contains_key(&i))?;
        (Some(*size) > cosigned && Some(*size) > served).then(|| (*size, note.clone()))
    }

    fn record(&self, i: usize, size: u64, note: Arc<str>, line: String) {
        let mut c = self.collected.lock();
        let entry = c.sizes.entry(size).or_insert_with(|| (note, BTreeMap::new()));
        entry.1.insert(i, line);
        if entry.1.len() >= self.quorum && c.served.as_ref().is_none_or(|(s, _)| *s < size) {
            let (note, lines) = &c.sizes[&size];
            let served: String = std::iter::once(note.to_string()).chain(lines.values().cloned()).collect();
            c.served = Some((size, served.into()));
            c.sizes.retain(|s, _| *s >= size);
        }
        while c.sizes.len() > KEPT {
            c.sizes.pop_first();
        }
    }
}

enum Answer {
    Cosigned(String),
    /// A 409: the size the witness holds.
    Holds(u64),
}
