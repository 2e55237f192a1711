//! A record as the chain stores it: one JSON line, written from the request's own values.

use super::record::now_ms;
use super::queue::Entry;
use super::record::Record;
use super::record;

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
/// and stores: [`Record`]'s fields in its order, `note` left out (a request's record has none). Written directly from the entry's values:
/// on every request, and serde's generic path (a `Display` through an escaping adapter per
/// field) cost about twice as much. A string that needs escaping, and the two structured
/// fields, go through serde_json, so the bytes are always serde_json's.
pub fn encode(seq: u64, entry: &Entry, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"{\"seq\":");
    out.extend_from_slice(n.format(seq).as_bytes());
    out.extend_from_slice(b",\"time_ms\":");
    out.extend_from_slice(n.format(entry.time_ms).as_bytes());
    out.extend_from_slice(b",\"client\":");
    push_shown(out, &entry.client)?;
    out.extend_from_slice(b",\"method\":");
    push_str(out, entry.method.as_str())?;
    out.extend_from_slice(b",\"path\":");
    push_str(out, entry.path.as_str())?;
    out.extend_from_slice(b",\"status\":");
    out.extend_from_slice(n.format(entry.status).as_bytes());
    out.extend_from_slice(b",\"micros\":");
    out.extend_from_slice(n.format(entry.micros).as_bytes());
    if let Some(id) = &entry.request_id {
        out.extend_from_slice(b",\"request_id\":");
        push_shown(out, id)?;
    }
    if let Some(role) = &entry.role {
        out.extend_from_slice(b",\"role\":");
        push_shown(out, role)?;
    }
    if let Some(oidc) = &entry.oidc {
        out.extend_from_slice(b",\"oidc\":");
        serde_json::to_writer(&mut *out, oidc)?;
    }
    if let Some(route) = &entry.route {
        out.extend_from_slice(b",\"route\":");
        push_str(out, route.as_str())?;
    }
    if let Some(reason) = entry.reason {
        out.extend_from_slice(b",\"reason\":");
        push_str(out, reason)?;
    }
    if let Some(did) = &entry.did {
        out.extend_from_slice(b",\"did\":");
        serde_json::to_writer(&mut *out, did)?;
    }
    if let Some(cert) = &entry.cert {
        out.extend_from_slice(b",\"cert\":");
        push_str(out, cert)?;
    }
    out.push(b'}');
    Ok(())
}

/// The bytes serde_json escapes in a string: controls, the quote and the backslash.
fn plain(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\')
}

fn push_str(out: &mut Vec<u8>, s: &str) -> serde_json::Result<()> {
    if !plain(s.as_bytes()) {
        return serde_json::to_writer(&mut *out, s);
    }
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
    Ok(())
}

/// A `Display` value as a JSON string, written in place; escaped by serde_json if it must be.
fn push_shown<T: std::fmt::Display>(out: &mut Vec<u8>, v: &T) -> serde_json::Result<()> {
    use std::io::Write;
    let start = out.len();
    out.push(b'"');
    write!(out, "{v}").map_err(serde_json::Error::io)?;
    if !plain(&out[start + 1..]) {
        out.truncate(start);
        return serde_json::to_writer(&mut *out, &Shown(v));
    }
    out.push(b'"');
    Ok(())
}

/// The same bytes as [`encode`], the way the writer made them before it: through an owned
/// [`Record`] (a string per field). For the test that the two agree, and the micro bench
/// that shows what writing directly saves.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_shown_values_are_what_serde_json_writes() {
        for s in ["plain", "", "é/ü", "a\"b", "back\\slash", "\u{1}\u{1f}", "tab\there", "\u{7f}"] {
            let (mut direct, mut shown) = (Vec::new(), Vec::new());
            push_str(&mut direct, s).unwrap();
            push_shown(&mut shown, &s).unwrap();
            let expected = serde_json::to_vec(s).unwrap();
            assert_eq!(direct, expected, "{s:?}");
            assert_eq!(shown, expected, "{s:?} shown");
        }
    }
}
