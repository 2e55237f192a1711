//! OIDC identities as principals on a real server: the identity behind a signing request has
//! its own write bucket and ban, whatever API token or address it comes through, and the
//! audit record names it, refused or not.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent, get, reply, Reply, Server};
use serde_json::Value;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = signet(args);
    assert!(out.status.success(), "signet {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn sign_up(a: &ureq::Agent, url: &str, token: &str, oidc: &str, email: &str) -> Reply {
    let r = a
        .post(&format!("{url}/api/v2/signingCert"))
        .header("content-type", "application/json")
        .header("authorization", &format!("Bearer {token}"))
        .send(common::cert_request(oidc, email));
    reply(r).unwrap()
}

fn audit(data: &Path) -> Vec<Value> {
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let mut q = conn.prepare("SELECT records FROM audit ORDER BY first_seq").unwrap();
    let batches: Vec<Vec<u8>> = q.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    batches.iter().flat_map(|b| b.split(|c| *c == b'\n').map(|l| serde_json::from_slice(l).unwrap()).collect::<Vec<_>>()).collect()
}

#[test]
fn an_identity_is_limited_and_banned_through_any_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    // Each token's own bucket allows 2 writes at once, and so does each identity's.
    std::fs::write(
        &config,
        "[guard.auth]\nrequire = \"writes\"\n\
         [guard.rate_limit]\nenabled = true\nper_second = 1000\nburst = 1000\nwrite_per_second = 1\nwrite_burst = 2\n\
         [guard.ban]\nenabled = true\nmax_refusals = 1\nwindow_secs = 60\nduration_secs = 600\n\
         [guard.audit]\nenabled = true\n",
    )
    .unwrap();
    let d = data.to_str().unwrap();
    // Made before the server starts, which loads them: polling until a running server picks
    // them up would be refused meanwhile, and with max_refusals = 1, get 127.0.0.1 banned.
    std::fs::create_dir_all(&data).unwrap();
    let tokens: Vec<String> =
        (0..4).map(|i| stdout(&["admin", "token", "create", "--data-dir", d, "--role", "signer", "--name", &format!("t{i}")])).collect();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let a = agent();
    let oidc = |email: &str| stdout(&["dev-token", "--data-dir", d, "--subject", email]);
    let (alice, bob) = ("alice@example.com", "bob@example.com");
    let ct_size = || get(&a, &format!("{}/ct/v1/get-sth", server.url)).unwrap().json()["tree_size"].as_u64().unwrap();

    // Identity tokens made first: the buckets refill at 1/s, and a `dev-token` process on a
    // loaded machine can take that long, which would let the refusals below through.
    let alice_ids: Vec<String> = (0..5).map(|_| oidc(alice)).collect();
    // Two tokens with room in their own buckets: the identity's burst of 2 is spent...
    for (t, id) in tokens[..2].iter().zip(&alice_ids) {
        let r = sign_up(&a, &server.url, t, id, alice);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let before = ct_size();
    // ...so a third token, fresh, is refused for alice: the limit is the identity's.
    let r = sign_up(&a, &server.url, &tokens[2], &alice_ids[2], alice);
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.text().contains("oidc:"), "the refusal names the identity's key: {}", r.text());
    assert!(r.header("retry-after").is_some());
    // A second refusal crosses max_refusals = 1: alice is banned, from any token...
    assert_eq!(sign_up(&a, &server.url, &tokens[3], &alice_ids[3], alice).status, 429);
    let r = sign_up(&a, &server.url, &tokens[0], &alice_ids[4], alice);
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("banned"), "{}", r.text());
    assert_eq!(ct_size(), before, "nothing was logged or signed for a refused identity");
    // ...while the tokens themselves, and other identities, are not.
    // (tokens[2] spent one of its own two writes on alice's refusal.)
    let r = sign_up(&a, &server.url, &tokens[2], &oidc(bob), bob);
    assert_eq!(r.status, 200, "{}", r.text());

    // The ban is the store's too, with the identity named in its reason; lifting it works
    // by the key the list shows.
    let deadline = Instant::now() + Duration::from_secs(5);
    let listed = loop {
        let listed = stdout(&["admin", "ban", "list", "--data-dir", d, "--json"]);
        if listed.contains("oidc:") {
            break listed;
        }
        assert!(Instant::now() < deadline, "the identity's ban never reached the store: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let bans: Value = serde_json::from_str(&listed).unwrap();
    let ban = bans.as_array().unwrap().iter().find(|b| b["client"].as_str().unwrap().starts_with("oidc:")).unwrap();
    assert!(ban["reason"].as_str().unwrap().contains(alice), "{ban}");
    let key = ban["client"].as_str().unwrap();
    stdout(&["admin", "ban", "lift", "--data-dir", d, key]);
    // The server picks the lift up from the store within ~200 ms, and the buckets refill at
    // 1/s (retrying sooner would be refused, and strike the token).
    std::thread::sleep(Duration::from_millis(2500));
    let r = sign_up(&a, &server.url, &tokens[1], &oidc(alice), alice);
    assert_eq!(r.status, 200, "alice is admitted again once lifted: {}", r.text());

    // Every signing request's record names its identity, the refused ones with their reason.
    let records: Vec<Value> = audit(&data).into_iter().filter(|r| r["path"] == "/api/v2/signingCert").collect();
    assert!(records.iter().all(|r| r["oidc"]["issuer"].is_string()), "{records:#?}");
    let of = |who: &str, status: u64| records.iter().filter(|r| r["oidc"]["subject"] == who && r["status"] == status).count();
    assert!(of(alice, 200) >= 3 && of(bob, 200) == 1, "{records:#?}");
    assert_eq!(of(alice, 429), 2);
    assert_eq!(of(alice, 403), 1);
    assert!(records.iter().any(|r| r["status"] == 429 && r["reason"] == "rate_limited"));
}

/// Without rate limits or bans, an identity is not limited, but still named in the audit.
#[test]
fn without_limits_an_identity_is_only_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let d = data.to_str().unwrap();
    let a = agent();
    let email = "carol@example.com";
    for _ in 0..5 {
        let oidc = stdout(&["dev-token", "--data-dir", d, "--subject", email]);
        let r = common::post_raw(&a, &format!("{}/api/v2/signingCert", server.url), "application/json", common::cert_request(&oidc, email)).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let named = audit(&data).iter().filter(|r| r["oidc"]["subject"] == email && r["did"]["issued"]["identity"] == email).count();
    assert_eq!(named, 5);
}
