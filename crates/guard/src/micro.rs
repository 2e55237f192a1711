//! The guard's criterion suite (feature `micro`): `signet bench micro guard`, `cargo bench -p signet-guard`.
//!
//! What the guard adds to every request when it is on: checking a presented API token, and
//! one rate-limit decision, on the path that admits and on the path that refuses (the one
//! that answers a flood, so it has to stay cheap); and what it adds always: validation.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use signet_core::micro::criterion::Criterion;
use signet_core::micro::{measure, Bench, Opts, Suite};

use crate::client::ClientKey;
use crate::config::RateLimitConfig;
use crate::limiters::Limiters;
use crate::token;

pub fn suite() -> Suite {
    let b = |id, about, run| Bench { id, about, run };
    Suite {
        name: "guard",
        about: "the guard's per-request work: API token check, rate-limit decisions",
        benches: vec![
            b("guard/token/check", "parse a presented sgt_ token's id and compare its SHA-256 with the stored hash in constant time", token_check),
            b("guard/ratelimit/admit", "one GCRA decision for a client with room in its bucket (keyed governor limiter)", admit),
            b("guard/ratelimit/refuse", "one GCRA decision for a client whose bucket is empty, with the wait until it refills", refuse),
            b("guard/validate/headers", "the validation layer's header and query checks on a cosign-like request (8 fields, a bearer token, a query)", validate_headers),
            b("guard/audit/encode", "one audit record written for the chain: a token-authenticated GET's JSON and its SHA-256 link", audit_encode),
            b("guard/audit/encode_owned", "the same record made as before: through an owned Record, a string per field", audit_encode_owned),
            b("guard/scope/admits", "a scoped token's check: 2 networks, 2 routes and a log, the request inside all of them", scope_admits),
        ],
    }
}

fn token_check(c: &mut Criterion, bench: &Bench) {
    let t = token::generate();
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            let presented = black_box(t.plaintext.as_str());
            black_box(token::claimed_id(presented).is_some() && token::matches(presented, &t.hash))
        })
    });
}

fn limiters(per_second: u32, burst: u32) -> Limiters {
    Limiters::new(&RateLimitConfig { enabled: true, per_second, burst, write_per_second: None, write_burst: None }, 100_000)
}

const CLIENT: ClientKey = ClientKey::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST));

fn admit(c: &mut Criterion, bench: &Bench) {
    // A bucket that never empties during a run: every decision admits.
    let l = limiters(u32::MAX, u32::MAX);
    measure(c, bench, Opts::default(), |b| b.iter(|| black_box(l.check(black_box(&CLIENT), false).is_ok())));
}

fn refuse(c: &mut Criterion, bench: &Bench) {
    let l = limiters(1, 1);
    let _ = l.check(&CLIENT, false);
    assert!(l.check(&CLIENT, false).is_err(), "the bucket is empty after its burst");
    measure(c, bench, Opts::default(), |b| b.iter(|| black_box(l.check(black_box(&CLIENT), false).is_err())));
}

fn validate_headers(c: &mut Criterion, bench: &Bench) {
    let limits = crate::InputLimits { max_body_bytes: 131_072, max_small_body_bytes: 65_536, max_header_count: 64, max_header_bytes: 16_384, max_json_depth: 32 };
    let mut h = http::HeaderMap::new();
    for (k, v) in [
        ("host", "rekor.example.com"),
        ("user-agent", "cosign/v3.0.2 (linux; amd64)"),
        ("accept", "application/json"),
        ("accept-encoding", "gzip"),
        ("content-type", "application/json"),
        ("content-length", "1873"),
        ("authorization", "Bearer sgt_00112233445566ff_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        ("x-request-id", "0123456789abcdef01234567"),
    ] {
        h.insert(http::header::HeaderName::from_static(k), http::HeaderValue::from_static(v));
    }
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            black_box(crate::validate::check_headers(black_box(&h), &limits).is_ok()
                && crate::validate::check_query(black_box(Some("logIndex=1234&x=%41"))).is_ok())
        })
    });
}

fn scope_admits(c: &mut Criterion, bench: &Bench) {
    let scope: crate::TokenScope = serde_json::from_str(
        r#"{"routes":["GET /api/v1/log","POST /api/v2/log/entries"],"logs":["rekor-v2"],"networks":["10.0.0.0/8","127.0.0.0/8"]}"#,
    )
    .unwrap_or_default();
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| black_box(scope.admits(black_box(&http::Method::POST), black_box("/api/v2/log/entries"), Some("rekor-v2"), ip).is_ok()))
    });
}

fn audit_entry() -> crate::audit::queue::Entry {
    crate::audit::queue::Entry {
        time_ms: crate::audit::chain::now_ms(),
        client: "token:5f0c3a9e1b2d4c6f".parse().unwrap_or(CLIENT),
        method: http::Method::GET,
        path: crate::audit::record::PathText::new("/api/v2/checkpoint"),
        status: 200,
        micros: 812,
        request_id: Some(signet_core::request_id::RequestId::next()),
        role: Some(crate::roles::Role::reader()),
        route: None,
        reason: None,
        oidc: None,
        did: None,
        cert: None,
    }
}

fn audit_encode(c: &mut Criterion, bench: &Bench) {
    let entry = audit_entry();
    let mut out = Vec::with_capacity(512);
    let mut head = crate::audit::record::GENESIS;
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            out.clear();
            let _ = crate::audit::encode::encode(black_box(7), black_box(&entry), &mut out);
            head = crate::audit::record::link(&head, &out);
            black_box(head)
        })
    });
}

fn audit_encode_owned(c: &mut Criterion, bench: &Bench) {
    let entry = audit_entry();
    let mut head = crate::audit::record::GENESIS;
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            let out = crate::audit::encode::encode_owned(black_box(7), black_box(&entry));
            head = crate::audit::record::link(&head, &out);
            black_box(head)
        })
    });
}
