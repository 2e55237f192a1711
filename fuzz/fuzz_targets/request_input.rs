//! The validation layer's readers of raw request bytes (signet_guard::validate) and the
//! scope pattern matched against OIDC subjects (signet_guard::scope).
//!
//! - The JSON depth scan agrees with a real parser: whatever serde_json parses is refused
//!   exactly when its nesting exceeds the limit.
//! - The credential finder never misses a literal `sgt_` and never panics.
//! - Identity patterns agree with a plain dynamic-programming matcher.
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use signet_guard::scope::IdentityPattern;
use signet_guard::validate::{credential_in_query, within_depth};

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn reference_match(p: &[u8], s: &[u8]) -> bool {
    // m[i][j]: p[..i] matches s[..j].
    let mut m = vec![vec![false; s.len() + 1]; p.len() + 1];
    m[0][0] = true;
    for i in 1..=p.len() {
        for j in 0..=s.len() {
            m[i][j] = if p[i - 1] == b'*' {
                m[i - 1][j] || (j > 0 && m[i][j - 1])
            } else {
                j > 0 && m[i - 1][j - 1] && p[i - 1] == s[j - 1]
            };
        }
    }
    m[p.len()][s.len()]
}

fuzz_target!(|data: &[u8]| {
    let limit = 1 + usize::from(data.first().copied().unwrap_or(0) % 8);
    let verdict = within_depth(data, limit);
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        assert_eq!(verdict.is_ok(), depth(&v) <= limit, "depth {} against limit {limit}", depth(&v));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let found = credential_in_query(text);
        if text.contains("sgt_") {
            assert!(found.is_some(), "a literal token is found");
        }
        if let Some((pattern, subject)) = text.split_once('\n') {
            if let Ok(p) = pattern.parse::<IdentityPattern>() {
                if pattern.len() <= 64 && subject.len() <= 256 {
                    assert_eq!(p.matches(subject), reference_match(pattern.as_bytes(), subject.as_bytes()), "{pattern:?} ~ {subject:?}");
                }
            }
        }
    }
});
