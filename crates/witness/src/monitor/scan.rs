//! Reading entries fast: pages (entry bundles) are fetched, hashed, parsed and matched by a
//! few worker threads, then consumed strictly in order. Work goes in rounds of a bounded
//! number of pages, so memory stays bounded however far behind the monitor is.

use std::sync::atomic::{AtomicUsize, Ordering};

use signet_core::hash::Hash;
use signet_core::merkle::leaf_hash;

use super::alert::EntryAlert;
use super::entries::{self, San};
use super::error::MonitorError;
use super::source::{Source, SourceError};
use super::watch::WatchList;

/// Pages each worker takes per round.
const PAGES_PER_WORKER: usize = 4;

/// One page, read: its leaf hashes in order, and the entries that matched.
pub struct Page {
    pub start: u64,
    pub leaves: Vec<Hash>,
    pub hits: Vec<EntryAlert>,
    pub unparsed: u64,
    /// Bytes of the entries' bodies.
    pub bytes: u64,
}

/// The work of one scan: entries `from..to` of the tree of `size` leaves.
pub struct Scan<'a> {
    pub source: &'a Source,
    pub watch: &'a WatchList,
    pub size: u64,
    /// The virtual index of the tree's entry 0 (v1 shards), added to reported indices.
    pub offset: u64,
    pub workers: usize,
}

impl Scan<'_> {
    /// Reads `from..to`, handing each page to `consume` in order. Stops at the first
    /// failure (of a fetch, or of `consume`), after consuming every page before it.
    pub fn run(&self, from: u64, to: u64, mut consume: impl FnMut(Page) -> Result<(), MonitorError>) -> Result<(), MonitorError> {
        let page = self.source.page();
        let mut bounds = Vec::new();
        let mut at = from;
        while at < to {
            let end = ((at / page + 1) * page).min(to);
            bounds.push((at, end));
            at = end;
        }
        let workers = self.workers.max(1);
        for round in bounds.chunks(workers * PAGES_PER_WORKER) {
            let next = AtomicUsize::new(0);
            let mut results: Vec<Option<Result<Page, SourceError>>> = (0..round.len()).map(|_| None).collect();
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..workers.min(round.len()))
                    .map(|_| {
                        s.spawn(|| {
                            let mut done = Vec::new();
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                let Some(&(start, end)) = round.get(i) else { break };
                                done.push((i, self.read(start, end)));
                            }
                            done
                        })
                    })
                    .collect();
                for h in handles {
                    match h.join() {
                        Ok(done) => {
                            for (i, r) in done {
                                if let Some(slot) = results.get_mut(i) {
                                    *slot = Some(r);
                                }
                            }
                        }
                        Err(_) => tracing::error!("a monitor worker panicked; its pages are read again next poll"),
                    }
                }
            });
            for r in results {
                consume(r.ok_or(MonitorError::PageNotRead)??)?;
            }
        }
        Ok(())
    }

    fn read(&self, start: u64, end: u64) -> Result<Page, SourceError> {
        let bodies = self.source.entries(start, end, self.size, self.offset)?;
        if bodies.len() as u64 != end - start {
            return Err(SourceError::PageSize { url: self.source.url.clone(), start, end, got: bodies.len() });
        }
        let bytes = bodies.iter().map(|b| b.len() as u64).sum();
        let mut page = Page { start, leaves: Vec::with_capacity(bodies.len()), hits: Vec::new(), unparsed: 0, bytes };
        for (i, body) in bodies.iter().enumerate() {
            let leaf = leaf_hash(body);
            page.leaves.push(leaf);
            let parsed = match self.source.api {
                super::source::Api::Ct => entries::parse_ct_leaf(body),
                super::source::Api::Tiles | super::source::Api::V1 => entries::parse(body),
            };
            let facts = match parsed {
                Ok(f) => f,
                Err(why) => {
                    tracing::debug!(log = %self.source.id(), index = start + i as u64, %why, "entry not read");
                    page.unparsed += 1;
                    continue;
                }
            };
            let matched = self.watch.matches(&facts);
            if matched.is_empty() {
                continue;
            }
            let identities: Vec<San> = facts.signers.iter().flat_map(|s| s.sans.iter().cloned()).collect();
            page.hits.push(EntryAlert {
                index: self.offset + start + i as u64,
                leaf_hash: hex::encode(leaf),
                entry_kind: facts.kind.clone(),
                matched,
                identities,
                issuers: facts.signers.iter().filter_map(|s| s.issuer.clone()).collect(),
                digests: facts.digests.clone(),
            });
        }
        Ok(page)
    }
}
