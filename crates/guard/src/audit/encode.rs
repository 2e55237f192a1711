//! A record as the chain stores it: one JSON line, written from the request's own values.

use super::record::now_ms;
use super::queue::Entry;
use super::record::Record;
use super::record;
use crate::client::ClientKey;

/// A batch as the writer builds it: the records' JSON lines, their chained hashes, and the
/// chain's last seq and hash so far.
pub(super) struct Encoded {
    pub(super) lines: Vec<u8>,
    pub(super) hashes: Vec<u8>,
    pub(super) seq: u64,
    pub(super) head: [u8; 32],
    /// Records that did not encode (it cannot happen: strings and integers into a Vec);
    /// dropped and counted as lost rather than taking the writer down.
    pub(super) dropped: u64,
}

impl Encoded {
    /// Numbers and chains one record written by `json`; false when it did not encode.
    pub(super) fn push(&mut self, json: impl FnOnce(&mut Vec<u8>, u64) -> serde_json::Result<()>) -> bool {
        let start = self.lines.len();
        if json(&mut self.lines, self.seq + 1).is_err() {
            self.lines.truncate(start);
            self.dropped += 1;
            return false;
        }
        self.seq += 1;
        self.head = record::link(&self.head, &self.lines[start..]);
        self.hashes.extend_from_slice(&self.head);
        self.lines.push(b'\n');
        true
    }
}

/// Appends the JSON of `entry`'s record, numbered `seq`, to `out`: the bytes the chain hashes
/// and stores. Written from the entry's own values ([`RecordOut`]), allocating nothing but
/// `out`'s growth.
pub fn encode(seq: u64, entry: &Entry, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let record = RecordOut {
        seq,
        time_ms: entry.time_ms,
        client: Shown(&entry.client),
        method: entry.method.as_str(),
        path: entry.path.as_str(),
        status: entry.status,
        micros: entry.micros,
        request_id: entry.request_id.as_ref().map(Shown),
        role: entry.role.as_ref().map(Shown),
        oidc: entry.oidc.as_ref(),
        route: entry.route.as_ref().map(|r| r.as_str()),
        reason: entry.reason,
        did: entry.did.as_ref(),
        cert: entry.cert.as_deref(),
    };
    serde_json::to_writer(out, &record)
}

/// The same bytes as [`encode`], the way the writer made them before it: through an owned
/// [`Record`] (a string per field). For the test that the two agree, and the micro bench
/// that shows what borrowing saves.
#[cfg(any(test, feature = "micro"))]
pub fn encode_owned(seq: u64, e: &Entry) -> Vec<u8> {
    #[allow(clippy::expect_used)]
    serde_json::to_vec(&Record {
        seq,
        time_ms: e.time_ms,
        client: e.client.to_string(),
        method: e.method.as_str().to_string(),
        path: e.path.as_str().to_string(),
        status: e.status,
        micros: e.micros,
        request_id: e.request_id.map(|id| id.to_string()),
        note: None,
        role: e.role.as_ref().map(|r| r.to_string()),
        oidc: e.oidc.clone(),
        route: e.route.as_ref().map(|r| r.as_str().to_string()),
        reason: e.reason.map(str::to_string),
        did: e.did.clone(),
        cert: e.cert.as_deref().map(str::to_string),
    })
    .expect("a record serializes")
}

/// [`Record`]'s fields, names and order, borrowed from an [`Entry`] (`note` is never set on a
/// request's record, so it is left out, as `Record` skips it when absent).
#[derive(serde::Serialize)]
pub(super) struct RecordOut<'a> {
    pub(super) seq: u64,
    pub(super) time_ms: u64,
    pub(super) client: Shown<'a, ClientKey>,
    pub(super) method: &'a str,
    pub(super) path: &'a str,
    pub(super) status: u16,
    pub(super) micros: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) request_id: Option<Shown<'a, signet_core::request_id::RequestId>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) role: Option<Shown<'a, crate::roles::Role>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) oidc: Option<&'a super::Oidc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) route: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) did: Option<&'a super::Did>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cert: Option<&'a str>,
}

/// A value written as its `Display` string, without making the string first.
pub(super) struct Shown<'a, T>(&'a T);

impl<T: std::fmt::Display> serde::Serialize for Shown<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
    }
}

pub(super) fn own_record(note: String) -> Record {
    Record {
        seq: 0,
        time_ms: now_ms(),
        client: "signet".into(),
        method: "-".into(),
        path: "-".into(),
        status: 0,
        micros: 0,
        request_id: None,
        note: Some(note),
        role: None,
        oidc: None,
        route: None,
        reason: None,
        did: None,
        cert: None,
    }
}
