//! `signet admin log reindex` (`POST /api/admin/log/reindex`): [`signet_log::reindex`] over
//! every shard of the Rekor v1 log, as one background job per instance. The request starts
//! it, or finds it running, and is answered at once; `GET` says how far it is.
//!
//! Online: appends and searches go on meanwhile, and an entry is found by identity and key
//! as soon as its window is done. Resumable: a client that hangs up does not stop the job; a
//! restart does, and the next run goes on from each shard's cursor, in storage. Instances on
//! one PostgreSQL share the cursors, so a run through any of them resumes any other's.

use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use signet_log::{reindex, Log};

use super::error::ShardError;

/// The job's state on this instance, as `GET /api/admin/log/reindex` shows it.
#[derive(Clone, Serialize)]
pub struct Status {
    /// `idle` (never run since start), `running`, `done` or `failed`.
    state: &'static str,
    started: Option<String>,
    finished: Option<String>,
    shards: Vec<ShardStatus>,
    /// Why it failed; a run started again resumes from the cursors.
    error: Option<String>,
}

impl Default for Status {
    fn default() -> Self {
        Status { state: "idle", started: None, finished: None, shards: Vec::new(), error: None }
    }
}

#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardStatus {
    #[serde(rename = "treeID")]
    tree_id: String,
    /// Where this run began: the cursor a run before left, 0 the first time.
    from: u64,
    /// Every entry below this has been looked at.
    through: u64,
    /// The shard's size when the run reached it; entries logged since have their keys.
    tree_size: u64,
    /// Entries without keys found by this run, and of those the ones given keys.
    missing: u64,
    indexed: u64,
}

#[derive(Default)]
pub struct Reindexing {
    status: Arc<Mutex<Status>>,
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Reindexing {
    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    /// Starts a run over `shards` (tree ID and log, oldest first) unless one is running, and
    /// answers the status either way.
    pub fn start(&self, shards: Vec<(i64, Log)>) -> Status {
        let mut s = self.status.lock();
        if s.state == "running" {
            return s.clone();
        }
        *s = Status { state: "running", started: Some(now()), ..Status::default() };
        let answer = s.clone();
        drop(s);
        let status = self.status.clone();
        // Storage calls block (SQLite's writer, PostgreSQL waited for in place): a thread of
        // the blocking pool, never a runtime worker.
        tokio::task::spawn_blocking(move || {
            let outcome = run(&status, &shards);
            let mut s = status.lock();
            s.finished = Some(now());
            match outcome {
                Ok(()) => {
                    s.state = "done";
                    let (missing, indexed) = s.shards.iter().fold((0, 0), |(m, i), sh| (m + sh.missing, i + sh.indexed));
                    tracing::info!(missing, indexed, shards = s.shards.len(), "reindex: done; entries logged before the search keys were kept are searchable by identity and key");
                }
                Err(why) => {
                    s.state = "failed";
                    tracing::warn!(error = %why, "reindex: stopped; a run started again resumes where this one stopped");
                    s.error = Some(why.to_string());
                }
            }
        });
        answer
    }
}

fn run(status: &Mutex<Status>, shards: &[(i64, Log)]) -> Result<(), ShardError> {
    for &(tree_id, ref log) in shards {
        let size = log.durable_size();
        let mut from = reindex::cursor(log).map_err(|source| ShardError::ReindexCursor { tree_id, source })?;
        let at = {
            let mut s = status.lock();
            s.shards.push(ShardStatus { tree_id: tree_id.to_string(), from, through: from, tree_size: size, missing: 0, indexed: 0 });
            s.shards.len() - 1
        };
        while from < size {
            let step = reindex::step(log, from, size).map_err(|source| ShardError::ReindexStep { tree_id, from, source })?;
            if step.through <= from {
                // The shard holds fewer durable entries than its size said (a follower's
                // head moved back cannot happen; a storage answer short of it can).
                return Err(ShardError::ReindexShort { tree_id, from, size });
            }
            from = step.through;
            let mut s = status.lock();
            let sh = &mut s.shards[at];
            sh.through = step.through;
            sh.missing += step.missing;
            sh.indexed += step.indexed;
        }
    }
    Ok(())
}
