//! Token scopes on a real server: a token limited to some logs, routes, networks or
//! certificate identities reaches exactly those, on every route of the router, and a refusal
//! leaves nothing behind (no certificate signed, no CT entry) but its audit record.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent, body_for, get, reply, Reply, Server};
use serde_json::{json, Value};
use signet_guard::{Needs, Roles};

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

fn create(data: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin", "token", "create", "--data-dir", data.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = signet(&all);
    assert!(out.status.success(), "signet {all:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn concrete(template: &str) -> String {
    template.replace("{name}", "trusted_root.json").replace("{uuid}", &"0".repeat(64)).replace("{*path}", "0/000")
}

fn send(a: &ureq::Agent, method: &http::Method, url: &str, token: &str, body: &[u8]) -> Reply {
    let bearer = format!("Bearer {token}");
    let sent = match method.as_str() {
        "GET" => a.get(url).header("authorization", &bearer).call(),
        "POST" => {
            let path = url.splitn(4, '/').nth(3).map_or(String::new(), |p| format!("/{p}"));
            let (content_type, body) = body_for(&path, body);
            a.post(url).header("content-type", content_type).header("authorization", &bearer).send(body)
        }
        other => panic!("a route with method {other}: add it to this test"),
    };
    reply(sent).unwrap()
}

fn refused_by_guard(r: &Reply) -> bool {
    let (status, text) = r.refusal();
    (status == 401 && text.contains("needs an API token")) || (status == 403 && (text.contains("needs permission") || text.contains("out of scope")))
}

/// Waits until the server has polled the store and knows `token`.
fn wait_known(a: &ureq::Agent, url: &str, token: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while send(a, &http::Method::GET, &format!("{url}/healthz"), token, b"").status == 401 {
        assert!(Instant::now() < deadline, "the token never became valid");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn scoped_tokens_reach_exactly_their_logs_routes_and_networks_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.auth]\nrequire = \"all\"\n[guard.audit]\nenabled = true\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let routes = signet_server::api::route_list();
    type Rule = fn(&http::Method, &str) -> bool;
    let cases: Vec<(&str, Vec<&str>, Rule)> = vec![
        ("v2-only", vec!["--log", "rekor-v2"], |_, t| signet_server::api::route_log(t).is_none_or(|l| l == "rekor-v2")),
        ("append-v1", vec!["--route", "POST /api/v1/log/entries"], |m, t| m == http::Method::POST && t == "/api/v1/log/entries"),
        ("here", vec!["--network", "127.0.0.0/8"], |_, _| true),
        ("elsewhere", vec!["--network", "10.0.0.0/8", "--network", "fd00::/8"], |_, _| false),
        // Both limits at once; the TSA's route belongs to no log, so the log list leaves it be.
        ("both", vec!["--log", "ct", "--route", "/ct/v1/get-sth", "--route", "/api/v1/timestamp/certchain", "--route", "/api/v1/log"], |_, t| {
            t == "/ct/v1/get-sth" || t == "/api/v1/timestamp/certchain"
        }),
    ];
    let signer = Roles::default().permissions(&"signer".parse().unwrap());
    let mut tokens = Vec::new();
    for (name, scope, _) in &cases {
        let mut args = vec!["--role", "signer", "--name", name];
        args.extend_from_slice(scope);
        tokens.push(create(&data, &args));
    }
    let a = agent();
    wait_known(&a, &server.url, tokens.last().unwrap());
    let mut sent = 2;
    for (method, template, needs) in &routes {
        let url = format!("{}{}", server.url, concrete(template));
        for ((name, _, in_scope), token) in cases.iter().zip(&tokens) {
            let r = send(&a, method, &url, token, b"{}");
            sent += 1;
            // Probes need nothing, so no scope limits them.
            let (granted, scoped) = match needs {
                Needs::Open => (true, false),
                Needs::Permission(p) => (signer.contains(*p), true),
            };
            let allowed = granted && (!scoped || in_scope(method, template));
            assert_eq!(!refused_by_guard(&r), allowed, "{method} {template} as {name}: {} {}", r.status, r.text());
            if granted && !allowed {
                assert!(r.refusal().1.contains("out of scope"), "{method} {template} as {name}: the refusal names the scope: {:?}", r.refusal());
            }
        }
    }
    // The refusal says what the scope is and where the request came from.
    let r = send(&a, &http::Method::GET, &format!("{}/api/v1/log", server.url), &tokens[3], b"");
    assert_eq!(r.status, 403);
    let text = r.text();
    assert!(text.contains("10.0.0.0/8, fd00::/8") && text.contains("127.0.0.1") && text.contains("out of scope"), "{text}");
    // `token list` shows each scope.
    let listed = signet(&["admin", "token", "list", "--data-dir", data.to_str().unwrap(), "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let scope_of = |name: &str| listed.as_array().unwrap().iter().find(|t| t["name"] == name).unwrap()["scope"].clone();
    assert_eq!(scope_of("both"), json!({"routes": ["/ct/v1/get-sth", "/api/v1/timestamp/certchain", "/api/v1/log"], "logs": ["ct"]}));
    assert_eq!(scope_of("here"), json!({"networks": ["127.0.0.0/8"]}));
    // Every request above is audited, refusals included.
    common::wait_for_audit_records(&data, sent);
}

#[test]
fn an_out_of_scope_token_is_refused_even_where_no_token_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    // Limits on: the guard's public layer runs, and anonymous callers may append.
    std::fs::write(&config, "[guard.rate_limit]\nenabled = true\nper_second = 1000\nburst = 1000\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let token = create(&data, &["--role", "reader", "--network", "192.0.2.0/24"]);
    let a = agent();
    wait_known(&a, &server.url, &create(&data, &["--role", "reader"]));
    let url = format!("{}/api/v1/log", server.url);
    assert_eq!(get(&a, &url).unwrap().status, 200, "anonymous reads are open");
    let r = send(&a, &http::Method::GET, &url, &token, b"");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("192.0.2.0/24"), "{}", r.text());
}

#[test]
fn a_token_scoped_to_identities_gets_certificates_for_those_only_and_nothing_is_signed_for_others() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.auth]\nrequire = \"writes\"\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let token = create(&data, &["--role", "signer", "--identity", "*@acme.dev", "--identity", "release@example.com"]);
    let a = agent();
    wait_known(&a, &server.url, &token);
    let oidc = |email: &str| {
        let out = signet(&["dev-token", "--data-dir", data.to_str().unwrap(), "--subject", email]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let url = format!("{}/api/v2/signingCert", server.url);
    let ct_size = || get(&a, &format!("{}/ct/v1/get-sth", server.url)).unwrap().json()["tree_size"].as_u64().unwrap();
        for email in ["ci@acme.dev", "release@example.com"] {
        let r = send(&a, &http::Method::POST, &url, &token, &common::cert_request(&oidc(email), email));
        assert_eq!(r.status, 200, "{email}: {}", r.text());
    }
    let before = ct_size();
    for email in ["eve@evil.dev", "ci@acme.dev.evil.dev", "release@example.co"] {
        let r = send(&a, &http::Method::POST, &url, &token, &common::cert_request(&oidc(email), email));
        assert_eq!(r.status, 403, "{email}: {}", r.text());
        let text = r.text();
        assert!(text.contains("out of scope") && text.contains("*@acme.dev") && text.contains(email), "{text}");
    }
    assert_eq!(ct_size(), before, "no precertificate was logged for a refused identity");
    // A signet token in the header and no OIDC token in the body: said plainly, not sent
    // to the OIDC verifier as if it were one.
    let mut body: Value = serde_json::from_slice(&common::cert_request("", "x@acme.dev")).unwrap();
    body.as_object_mut().unwrap().remove("credentials");
    let body = serde_json::to_vec(&body).unwrap();
    let r = send(&a, &http::Method::POST, &url, &token, &body);
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("credentials.oidcIdentityToken"), "{}", r.text());
}

#[test]
fn token_create_refuses_a_scope_that_names_nothing_real() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let d = data.to_str().unwrap();
    for (scope, needle) in [
        (vec!["--route", "GET /api/v2/log/entries"], "GET /api/v2/log/entries"),
        (vec!["--route", "/api/v3/nothing"], "/api/v3/nothing"),
        (vec!["--log", "rekor-v9"], "rekor-v9"),
        (vec!["--network", "10.0.0.0/33"], "10.0.0.0/33"),
        (vec!["--identity", "*"], "matches every identity"),
        (vec!["--identity", "\u{0430}lice@example.com"], "printable ASCII"),
    ] {
        let mut args = vec!["admin", "token", "create", "--data-dir", d, "--role", "signer"];
        args.extend_from_slice(&scope);
        let out = signet(&args);
        assert_eq!(out.status.code(), Some(2), "{scope:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{scope:?}: {err}");
        assert!(out.stdout.is_empty(), "{scope:?}: no token printed");
    }
    let listed = signet(&["admin", "token", "list", "--data-dir", d]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 1, "no token was stored");
}
