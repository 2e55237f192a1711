//! Where a log's checkpoints, proofs and entries come from: a C2SP tile log (signet's
//! `/api/v2`, Rekor v2, Sunlight, Tessera…), the Rekor v1 JSON API, or an RFC 6962 CT log
//! (signet's `/ct/v1`). Everything fetched is untrusted; the follower checks it against
//! the signed checkpoint (for CT, the signed tree head).

use bytes::Bytes;
use serde::Deserialize;
use signet_core::hash::Hash;
use signet_log::remote::{RemoteError, TileNodes};
use signet_log::tiles::{format_index, TILE_WIDTH};
use signet_tls::{FetchError, Fetcher};

/// The most a checkpoint may weigh (a note with a few dozen cosignatures is ~4 KiB).
const MAX_CHECKPOINT: usize = 64 << 10;
/// An entry bundle holds at most 256 entries of at most 64 KiB each.
const MAX_BUNDLE: usize = 256 * (2 + 65_535);
/// Rekor v1's `POST /api/v1/log/entries/retrieve` takes at most 10 indices.
const V1_RETRIEVE: u64 = 10;
/// Entries asked of one CT `get-entries` (a log may answer fewer: RFC 6962 §4.6).
const CT_PAGE: u64 = 256;

/// Why a log's checkpoint, proof or entries could not be fetched, or what fetched is not
/// what was asked for. `url` is what was fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The request could not be built (a URL that is not one).
    #[error(transparent)]
    Request(#[from] http::Error),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("{method} {url}: answered HTTP {status}; expected 200")]
    Status { method: &'static str, url: String, status: u16 },
    #[error("{url} is not UTF-8")]
    NotUtf8 { url: String },
    #[error("{url}: {source}")]
    Json { url: String, source: serde_json::Error },
    #[error("POST {url}: {source}")]
    PostJson { url: String, source: serde_json::Error },
    #[error("{url}: shard sizes overflow")]
    ShardsOverflow { url: String },
    /// A tile of the new tree could not be fetched or read.
    #[error(transparent)]
    Tiles(Box<RemoteError<SourceError>>),
    /// `path` is the proof's path under the log's URL.
    #[error("{path}: hash {hash:?} is not 32 bytes of {encoding}")]
    ProofHash { path: String, hash: String, encoding: &'static str },
    #[error("{url}: {got} entries; expected 1 to {most}")]
    CtEntries { url: String, got: usize, most: u64 },
    #[error("{url}: entry {index}'s leaf_input is not base64")]
    LeafInput { url: String, index: u64 },
    #[error("{url}: {source}")]
    Bundle { url: String, source: BundleError },
    #[error("{url}: {got} entries, expected {width}")]
    ShortBundle { url: String, got: usize, width: u64 },
    #[error("POST {url}: entry {index} body is not base64")]
    EntryBody { url: String, index: u64 },
    #[error("POST {url}: entry {index} is missing from the answer")]
    MissingEntry { url: String, index: u64 },
    /// `url` is the log's.
    #[error("{url}: asked for entries {start}..{end}, got {got}")]
    PageSize { url: String, start: u64, end: u64, got: usize },
}

/// Why bytes are not a C2SP entry bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error("truncated length prefix")]
    TruncatedLength,
    #[error("entry is shorter than its length prefix")]
    ShortEntry,
    #[error("more than 256 entries")]
    TooMany,
}

/// The API a log is followed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// C2SP tlog-tiles under the URL: `<url>/checkpoint`, `<url>/tile/…`.
    Tiles,
    /// Rekor v1 under the URL: `<url>/api/v1/log`, `…/log/proof`, `…/log/entries/retrieve`.
    V1,
    /// An RFC 6962 CT log under the URL: `<url>/ct/v1/get-sth`, `…/get-sth-consistency`,
    /// `…/get-entries`. Its entries are `MerkleTreeLeaf`s.
    Ct,
}

pub struct Source {
    pub url: String,
    pub api: Api,
    /// What state, alerts and metrics name the log by: the URL, and for a CT log the URL of
    /// its API (`<url>/ct/v1`), so that an instance's CT log and its Rekor v1 log, both
    /// under one URL, are two logs.
    id: String,
    fetcher: Fetcher,
    bundles: Fetcher,
}

impl Source {
    pub fn new(url: &str, api: Api, fetcher: Fetcher) -> Source {
        let url = url.trim_end_matches('/').to_string();
        let id = match api {
            Api::Ct => format!("{url}/ct/v1"),
            Api::Tiles | Api::V1 => url.clone(),
        };
        let bundles = fetcher.clone().with_max_bytes(MAX_BUNDLE);
        Source { url, api, id, fetcher: fetcher.with_max_bytes(MAX_CHECKPOINT), bundles }
    }

    /// The log's name in state, alerts and metrics.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Entries fetched in one unit of work: one entry bundle, or 100 v1 entries.
    pub fn page(&self) -> u64 {
        match self.api {
            Api::Tiles => TILE_WIDTH,
            Api::V1 => 10 * V1_RETRIEVE,
            Api::Ct => CT_PAGE,
        }
    }

    fn get(&self, fetcher: &Fetcher, path: &str) -> Result<Bytes, SourceError> {
        let url = format!("{}/{path}", self.url);
        let request = http::Request::get(&url).body(Bytes::new())?;
        let response = fetcher.send(&url, request)?;
        match response.status() {
            http::StatusCode::OK => Ok(response.into_body()),
            s => Err(SourceError::Status { method: "GET", url, status: s.as_u16() }),
        }
    }

    /// The log's latest checkpoint, as the signed note text, and (v1) the virtual index of
    /// its tree's entry 0: the sizes of the frozen shards before it.
    pub fn checkpoint(&self) -> Result<(String, u64), SourceError> {
        match self.api {
            Api::Tiles => {
                let bytes = self.get(&self.fetcher, "checkpoint")?;
                let note = String::from_utf8(bytes.to_vec()).map_err(|_| SourceError::NotUtf8 { url: format!("{}/checkpoint", self.url) })?;
                Ok((note, 0))
            }
            Api::V1 => {
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Info {
                    signed_tree_head: String,
                    #[serde(default)]
                    inactive_shards: Vec<Shard>,
                }
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Shard {
                    tree_size: u64,
                }
                let bytes = self.get(&self.fetcher, "api/v1/log")?;
                let url = || format!("{}/api/v1/log", self.url);
                let info: Info = serde_json::from_slice(&bytes).map_err(|source| SourceError::Json { url: url(), source })?;
                let offset = info.inactive_shards.iter().try_fold(0u64, |a, s| a.checked_add(s.tree_size));
                Ok((info.signed_tree_head, offset.ok_or_else(|| SourceError::ShardsOverflow { url: url() })?))
            }
            // The signed tree head's JSON, as served: `keys::verify_sth` reads and checks it.
            Api::Ct => {
                let bytes = self.get(&self.fetcher, "ct/v1/get-sth")?;
                let sth = String::from_utf8(bytes.to_vec()).map_err(|_| SourceError::NotUtf8 { url: format!("{}/ct/v1/get-sth", self.url) })?;
                Ok((sth, 0))
            }
        }
    }

    /// The consistency proof from size `old` to `new` (0 < old < new), as the log serves it
    /// (v1) or as built from the new tree's tiles (tile logs serve no proofs).
    pub fn consistency_proof(&self, old: u64, new: u64) -> Result<Vec<Hash>, SourceError> {
        match self.api {
            Api::Tiles => {
                let fetch = |path: &str| self.get(&self.fetcher.clone().with_max_bytes(8192), path).map(|b| b.to_vec());
                TileNodes::new(new, &fetch).consistency_proof(old).map_err(|e| SourceError::Tiles(Box::new(e)))
            }
            Api::V1 => {
                #[derive(Deserialize)]
                struct Proof {
                    hashes: Vec<String>,
                }
                let path = format!("api/v1/log/proof?firstSize={old}&lastSize={new}");
                let bytes = self.get(&self.fetcher, &path)?;
                let proof: Proof = serde_json::from_slice(&bytes).map_err(|source| SourceError::Json { url: format!("{}/{path}", self.url), source })?;
                proof
                    .hashes
                    .iter()
                    .map(|h| {
                        hex::decode(h).ok().and_then(|b| <Hash>::try_from(b).ok()).ok_or_else(|| SourceError::ProofHash { path: path.clone(), hash: h.clone(), encoding: "hex" })
                    })
                    .collect()
            }
            Api::Ct => {
                #[derive(Deserialize)]
                struct Proof {
                    consistency: Vec<String>,
                }
                let path = format!("ct/v1/get-sth-consistency?first={old}&second={new}");
                let bytes = self.get(&self.fetcher, &path)?;
                let proof: Proof = serde_json::from_slice(&bytes).map_err(|source| SourceError::Json { url: format!("{}/{path}", self.url), source })?;
                proof
                    .consistency
                    .iter()
                    .map(|h| {
                        signet_core::b64::decode(h)
                            .ok()
                            .and_then(|b| <Hash>::try_from(b).ok())
                            .ok_or_else(|| SourceError::ProofHash { path: path.clone(), hash: h.clone(), encoding: "base64" })
                    })
                    .collect()
            }
        }
    }

    /// The bodies of entries `start..end` of the tree of `size` leaves; `start..end` lies
    /// within one page. `offset` (v1 only) is the virtual index of the tree's entry 0.
    pub fn entries(&self, start: u64, end: u64, size: u64, offset: u64) -> Result<Vec<Vec<u8>>, SourceError> {
        match self.api {
            Api::Tiles => self.bundle(start, end, size),
            Api::V1 => {
                let mut out = Vec::with_capacity((end - start) as usize);
                let mut at = start;
                while at < end {
                    let upto = (at + V1_RETRIEVE).min(end);
                    out.extend(self.v1_entries(at, upto, offset)?);
                    at = upto;
                }
                Ok(out)
            }
            Api::Ct => {
                let mut out = Vec::with_capacity((end - start) as usize);
                while (out.len() as u64) < end - start {
                    let got = self.ct_entries(start + out.len() as u64, end)?;
                    out.extend(got);
                }
                Ok(out)
            }
        }
    }

    /// `get-entries` from `start` up to `end` (exclusive): the `leaf_input`s of at least one
    /// entry, at most the page asked for.
    fn ct_entries(&self, start: u64, end: u64) -> Result<Vec<Vec<u8>>, SourceError> {
        #[derive(Deserialize)]
        struct Entries {
            entries: Vec<Entry>,
        }
        #[derive(Deserialize)]
        struct Entry {
            leaf_input: String,
        }
        let path = format!("ct/v1/get-entries?start={start}&end={}", end - 1);
        let bytes = self.get(&self.bundles, &path)?;
        let url = || format!("{}/{path}", self.url);
        let page: Entries = serde_json::from_slice(&bytes).map_err(|source| SourceError::Json { url: url(), source })?;
        if page.entries.is_empty() || page.entries.len() as u64 > end - start {
            return Err(SourceError::CtEntries { url: url(), got: page.entries.len(), most: end - start });
        }
        page.entries
            .iter()
            .enumerate()
            .map(|(i, e)| signet_core::b64::decode(&e.leaf_input).map_err(|_| SourceError::LeafInput { url: url(), index: start + i as u64 }))
            .collect()
    }

    fn bundle(&self, start: u64, end: u64, size: u64) -> Result<Vec<Vec<u8>>, SourceError> {
        let tile = start / TILE_WIDTH;
        let width = (size - tile * TILE_WIDTH).min(TILE_WIDTH);
        let mut path = format!("tile/entries/{}", format_index(tile));
        if width < TILE_WIDTH {
            path.push_str(&format!(".p/{width}"));
        }
        let bytes = self.get(&self.bundles, &path)?;
        let entries = split_bundle(&bytes).map_err(|source| SourceError::Bundle { url: format!("{}/{path}", self.url), source })?;
        // A full bundle may answer for a partial one; fewer entries than asked for may not.
        if (entries.len() as u64) < width {
            return Err(SourceError::ShortBundle { url: format!("{}/{path}", self.url), got: entries.len(), width });
        }
        let from = (start - tile * TILE_WIDTH) as usize;
        let to = (end - tile * TILE_WIDTH) as usize;
        Ok(entries.get(from..to).map(|s| s.iter().map(|e| e.to_vec()).collect()).unwrap_or_default())
    }

    fn v1_entries(&self, start: u64, end: u64, offset: u64) -> Result<Vec<Vec<u8>>, SourceError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Entry {
            body: String,
            log_index: u64,
        }
        let url = format!("{}/api/v1/log/entries/retrieve", self.url);
        let indexes: Vec<u64> = (start..end).map(|i| i + offset).collect();
        let body = serde_json::json!({ "logIndexes": indexes }).to_string();
        let request = http::Request::post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Bytes::from(body))?;
        let response = self.bundles.send(&url, request)?;
        if response.status() != http::StatusCode::OK {
            return Err(SourceError::Status { method: "POST", url, status: response.status().as_u16() });
        }
        let found: Vec<std::collections::HashMap<String, Entry>> =
            serde_json::from_slice(response.body()).map_err(|source| SourceError::PostJson { url: url.clone(), source })?;
        let mut by_index: std::collections::HashMap<u64, Vec<u8>> = std::collections::HashMap::new();
        for e in found.into_iter().flat_map(|m| m.into_values()) {
            let body = signet_core::b64::decode(&e.body).map_err(|_| SourceError::EntryBody { url: url.clone(), index: e.log_index })?;
            by_index.insert(e.log_index, body);
        }
        indexes
            .iter()
            .map(|i| by_index.remove(i).ok_or_else(|| SourceError::MissingEntry { url: url.clone(), index: *i }))
            .collect()
    }
}

/// The entries of a C2SP entry bundle: each a big-endian u16 length, then that many bytes.
pub fn split_bundle(mut bytes: &[u8]) -> Result<Vec<&[u8]>, BundleError> {
    let mut out = Vec::with_capacity(TILE_WIDTH as usize);
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<2>().ok_or(BundleError::TruncatedLength)?;
        let len = u16::from_be_bytes(*len) as usize;
        let (entry, after) = rest.split_at_checked(len).ok_or(BundleError::ShortEntry)?;
        out.push(entry);
        bytes = after;
        if out.len() > TILE_WIDTH as usize {
            return Err(BundleError::TooMany);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_split_and_truncation_is_an_error() {
        let b = signet_log::tiles::entry_bundle([&b"ab"[..], &b""[..], &b"xyz"[..]]).unwrap();
        assert_eq!(split_bundle(&b).unwrap(), vec![&b"ab"[..], b"", b"xyz"]);
        assert!(split_bundle(&b[..b.len() - 1]).is_err());
        assert!(split_bundle(&[0]).is_err());
    }

    #[test]
    fn any_bytes_split_or_fail_without_panic() {
        let b = signet_log::tiles::entry_bundle([&b"entry one"[..], &[7u8; 300][..]]).unwrap();
        for cut in 0..=b.len() {
            let _ = split_bundle(&b[..cut]);
        }
        // 257 empty entries: more than a bundle holds.
        assert!(split_bundle(&[0u8; 514]).is_err());
    }
}

