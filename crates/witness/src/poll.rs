//! A witness that fetches, for logs that don't submit (`url` in `[[witness.logs]]`).
//!
//! Every interval it reads the log's checkpoint (`<url>/checkpoint`, c2sp.org/tlog-tiles) and,
//! when it is past the size held, builds the consistency proof from the log's own tiles
//! (`<url>/tile/…`) and puts the result through the same [`Witness::add_checkpoint`] a
//! submitted request takes. Nothing fetched is trusted: the signature and the proof are
//! checked there, against the stored state. The tiles only save the log from sending a proof.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use signet_core::note::{NoteError, SignedNote};
use signet_log::remote::{RemoteError, TileNodes};
use signet_tls::FetchError;

use crate::request;
use crate::store::StoreError;
use crate::witness::{Refused, Witness};

/// The most a checkpoint or a tile may weigh (a full hash tile is 8 KiB).
const MAX_FETCH: usize = 64 * 1024;

/// Why a round of polling a log failed (it is tried again at the next).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PollError {
    #[error(transparent)]
    Request(#[from] http::Error),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the checkpoint is not UTF-8")]
    NotUtf8,
    #[error(transparent)]
    Note(#[from] NoteError),
    #[error("the checkpoint's origin is {got:?}, not {want:?}")]
    Origin { got: String, want: String },
    /// A tile of the new tree could not be fetched or read.
    #[error(transparent)]
    Tiles(Box<RemoteError<PollError>>),
    /// The blocking task that fetched did not finish.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    #[error(transparent)]
    Refused(#[from] Refused),
}

/// Polls `url` for `origin`'s checkpoints until the runtime stops.
pub fn start(witness: Arc<Witness>, origin: String, url: String, every: Duration, fetcher: signet_tls::Fetcher) {
    let fetcher = fetcher.with_max_bytes(MAX_FETCH);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match poll_once(&witness, &origin, &url, &fetcher).await {
                Ok(Some(size)) => tracing::debug!(%origin, size, "cosigned a polled checkpoint"),
                Ok(None) => {}
                Err(why) => tracing::warn!(%origin, %url, error = %why, "polling the log for its checkpoint failed"),
            }
        }
    });
}

/// One round: the new size cosigned, `None` when the log has not grown.
pub async fn poll_once(witness: &Witness, origin: &str, url: &str, fetcher: &signet_tls::Fetcher) -> Result<Option<u64>, PollError> {
    let base = url.trim_end_matches('/').to_string();
    let get = {
        let fetcher = fetcher.clone();
        move |path: &str| -> Result<Vec<u8>, PollError> {
            let url = format!("{base}/{path}");
            let request = http::Request::get(&url).body(Bytes::new())?;
            let response = fetcher.send(&url, request)?;
            match response.status().as_u16() {
                200 => Ok(response.into_body().to_vec()),
                status => Err(PollError::Status { url, status }),
            }
        }
    };
    let held = witness.latest(origin).await?;
    let (note, proof) = {
        let origin = origin.to_string();
        tokio::task::spawn_blocking(move || -> Result<Option<(String, Vec<[u8; 32]>)>, PollError> {
            let note = String::from_utf8(get("checkpoint")?).map_err(|_| PollError::NotUtf8)?;
            let parsed = SignedNote::parse(&note)?;
            if parsed.checkpoint.origin != origin {
                return Err(PollError::Origin { got: parsed.checkpoint.origin, want: origin });
            }
            let held_size = held.map_or(0, |h| h.size);
            if parsed.checkpoint.size <= held_size {
                return Ok(None);
            }
            let proof = match held_size {
                0 => Vec::new(),
                old => TileNodes::new(parsed.checkpoint.size, &get).consistency_proof(old).map_err(|e| PollError::Tiles(Box::new(e)))?,
            };
            Ok(Some((note, proof)))
        })
        .await??
        .map_or((None, Vec::new()), |(n, p)| (Some(n), p))
    };
    let Some(note) = note else { return Ok(None) };
    let body = request::format(held.map_or(0, |h| h.size), &proof, &note);
    witness.add_checkpoint(body.as_bytes()).await?;
    Ok(SignedNote::parse(&note).ok().map(|n| n.checkpoint.size))
}
