//! The guard on a real server: rate limits, bans, API tokens, and `signet admin` changing
//! a running server through the shared data dir.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent, get, get_bearer, Server};

fn signet(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn admin(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin"];
    all.extend_from_slice(&args[..2]);
    all.extend_from_slice(&["--data-dir", dir.to_str().unwrap()]);
    all.extend_from_slice(&args[2..]);
    let (ok, out, err) = signet(&all);
    assert!(ok, "signet {all:?} failed: {err}");
    out
}

fn start(dir: &Path, config: &str) -> Server {
    let file = dir.join("signet.toml");
    std::fs::write(&file, config).unwrap();
    Server::start(&dir.join("data"), &["--config", file.to_str().unwrap()])
}

/// Polls `check` for up to 5 s: admin changes reach the server on its next store poll.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn rate_limit_refuses_beyond_burst_with_retry_after_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "[guard.rate_limit]\nenabled = true\nper_second = 2\nburst = 5\n");
    let a = agent();
    let url = format!("{}/api/v1/log", server.url);
    for i in 0..5 {
        assert_eq!(get(&a, &url).unwrap().status, 200, "request {i} is within the burst");
    }
    let r = get(&a, &url).unwrap();
    assert_eq!(r.status, 429);
    let retry: u64 = r.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=2).contains(&retry), "retry after {retry}");
    let body = r.json();
    assert_eq!(body["code"], 429);
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("rate limit exceeded for ip:127.0.0.1") && message.contains("burst of 5"), "{message}");
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(get(&a, &url).unwrap().status, 200, "the bucket refills at 2/s");
    let metrics = get(&a, &format!("{}/metrics", server.url)).unwrap().text();
    assert!(metrics.contains("reason=\"rate_limited\"} 1"), "{metrics}");
}

/// A search is a POST that reads: it spends the read bucket, not the write one, so a
/// client that searches a lot can still append (and one that appends cannot search more).
#[test]
fn searches_spend_the_read_bucket_and_appends_the_write_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        "[guard.rate_limit]\nenabled = true\nper_second = 1\nburst = 20\nwrite_per_second = 1\nwrite_burst = 2\n",
    );
    let a = agent();
    let search = serde_json::json!({"hash": format!("sha256:{}", "0".repeat(64))});
    for i in 0..10 {
        let r = common::post_json(&a, &format!("{}/api/v1/index/retrieve", server.url), &search).unwrap();
        assert_eq!(r.status, 200, "search {i}: {}", r.text());
    }
    let signer = common::Signer::new();
    for i in 0..2 {
        let r = common::post_json(&a, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(format!("artifact {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "append {i} after 10 searches: {}", r.text());
    }
    let r = common::post_json(&a, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"one too many")).unwrap();
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(r.text().contains("writes"), "{}", r.text());
}

#[test]
fn ban_engages_after_refusals_and_admin_lift_clears_it_on_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        "[guard.rate_limit]\nenabled = true\nper_second = 1\nburst = 1\n\
         [guard.ban]\nenabled = true\nmax_refusals = 3\nwindow_secs = 60\nduration_secs = 600\n",
    );
    let data = dir.path().join("data");
    let a = agent();
    let url = format!("{}/api/v2/checkpoint", server.url);
    assert_eq!(get(&a, &url).unwrap().status, 200);
    for _ in 0..4 {
        assert_eq!(get(&a, &url).unwrap().status, 429, "refused, and counted");
    }
    let r = get(&a, &url).unwrap();
    assert_eq!(r.status, 403, "the fourth refusal within the window bans: {}", r.text());
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("ip:127.0.0.1 is banned") && message.contains("signet admin ban lift"), "{message}");
    assert!(r.header("retry-after").is_some());

    eventually("the ban is in the store", || admin(&data, &["ban", "list"]).contains("ip:127.0.0.1"));
    let listed = admin(&data, &["ban", "list", "--json"]);
    assert!(listed.contains("more than 3 refusals"), "{listed}");
    admin(&data, &["ban", "lift", "127.0.0.1"]);
    assert!(!admin(&data, &["ban", "list"]).contains("127.0.0.1"));
    eventually("the running server lifts the ban", || get(&a, &url).unwrap().status != 403);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(get(&a, &url).unwrap().status, 200);
    let (ok, _, err) = signet(&["admin", "ban", "lift", "--data-dir", data.to_str().unwrap(), "127.0.0.1"]);
    assert!(!ok && err.contains("not banned"), "{err}");
}

/// The HTTP admin surface for bans and the audit chain: a token client banned for its 429s is
/// listed by `GET /api/admin/bans` and lifted by `POST /api/admin/bans/lift` (here at once,
/// and in the store), and `GET /api/admin/audit/verify` checks the chain for an auditor.
#[test]
fn bans_are_listed_and_lifted_and_the_audit_chain_checked_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = |role: &str| admin(&data, &["token", "create", "--role", role]).trim().to_string();
    let (noisy, operator, auditor, reader) = (token("reader"), token("admin"), token("auditor"), token("reader"));
    let server = start(
        dir.path(),
        "[guard.rate_limit]\nenabled = true\nper_second = 1\nburst = 10\n\
         [guard.ban]\nenabled = true\nmax_refusals = 2\nwindow_secs = 60\nduration_secs = 600\n\
         [guard.audit]\nenabled = true\n",
    );
    let a = agent();
    let url = format!("{}/api/v2/checkpoint", server.url);
    let statuses: Vec<u16> = (0..13).map(|_| get_bearer(&a, &url, &noisy).unwrap().status).collect();
    assert_eq!(statuses[10..], [429, 429, 429], "three 429s past two allowed refusals ban the token: {statuses:?}");
    assert!(statuses[..10].iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(get_bearer(&a, &url, &noisy).unwrap().status, 403);
    let id = &noisy[4..20];
    // The operator's own requests stay within its burst of 10.
    let metric = |name: &str| -> f64 {
        let text = get_bearer(&a, &format!("{}/metrics", server.url), &operator).unwrap().text();
        let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("no {name} in /metrics"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(metric("signet_guard_active_bans"), 1.0);
    let listed = get_bearer(&a, &format!("{}/api/admin/bans", server.url), &operator).unwrap();
    assert_eq!(listed.status, 200, "{}", listed.text());
    let client = format!("token:{id}");
    assert!(listed.json()["bans"].as_array().unwrap().iter().any(|b| b["client"] == client.as_str()), "{}", listed.text());
    assert_eq!(get_bearer(&a, &format!("{}/api/admin/bans", server.url), &reader).unwrap().status, 403, "admin.bans is needed");
    eventually("the ban is in the store", || admin(&data, &["ban", "list"]).contains(&client));

    let lift = |body: serde_json::Value| {
        common::reply(
            a.post(&format!("{}/api/admin/bans/lift", server.url))
                .header("authorization", &format!("Bearer {operator}"))
                .header("content-type", "application/json")
                .send(serde_json::to_vec(&body).unwrap()),
        )
        .unwrap()
    };
    let r = lift(serde_json::json!({"client": client}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["was_banned_here"], true);
    assert_ne!(get_bearer(&a, &url, &noisy).unwrap().status, 403, "lifted here at once");
    eventually("the store has it lifted too", || !admin(&data, &["ban", "list"]).contains(&client));
    assert_eq!(metric("signet_guard_active_bans"), 0.0);
    let r = lift(serde_json::json!({"client": "nobody"}));
    assert_eq!(r.status, 400, "a client that does not parse is named: {}", r.text());
    assert!(r.text().contains("nobody"), "{}", r.text());

    let verify = get_bearer(&a, &format!("{}/api/admin/audit/verify", server.url), &auditor).unwrap();
    assert_eq!(verify.status, 200, "{}", verify.text());
    let v = verify.json();
    assert!(v["ok"] == true && v["records"].as_u64().unwrap() >= 10 && v["head"].as_str().unwrap().len() == 64, "{v}");
    assert_eq!(get_bearer(&a, &format!("{}/api/admin/audit/verify", server.url), &reader).unwrap().status, 403, "audit.read is needed");
    // The verify flushed the writer: what it counted is what /metrics says was written.
    assert!(metric("signet_audit_records_written_total") >= v["records"].as_f64().unwrap(), "written since start");
    assert_eq!(metric("signet_audit_records_lost_total"), 0.0);
    assert_eq!(metric("signet_audit_write_failures_total"), 0.0);
    assert!(metric("signet_audit_queue_depth") >= 0.0);
}

#[test]
fn tokens_authenticate_by_role_and_revocation_reaches_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "[guard.auth]\nrequire = \"all\"\n");
    let data = dir.path().join("data");
    let a = agent();
    let url = format!("{}/api/v1/log", server.url);

    // Created while the server runs.
    let signer = admin(&data, &["token", "create", "--role", "signer", "--name", "ci"]).trim().to_string();
    let root = admin(&data, &["token", "create", "--role", "admin", "--name", "root", "--ttl", "3600"]).trim().to_string();
    assert!(signer.starts_with("sgt_") && !signer.contains(char::is_whitespace), "the token alone: {signer:?}");

    let r = get(&a, &url).unwrap();
    assert_eq!(r.status, 401);
    assert!(r.json()["message"].as_str().unwrap().contains("needs an API token"));
    assert_eq!(get(&a, &format!("{}/healthz", server.url)).unwrap().status, 200, "probes stay open");
    // Two writes: the server's poll may reread the store between them, so wait for both.
    eventually("the new tokens are accepted", || {
        get_bearer(&a, &url, &signer).unwrap().status == 200 && get_bearer(&a, &url, &root).unwrap().status == 200
    });

    let mut wrong = signer.clone();
    wrong.pop();
    wrong.push(if signer.ends_with('x') { 'y' } else { 'x' });
    let r = get_bearer(&a, &url, &wrong).unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["message"], "the API token is not valid");

    let tokens_url = format!("{}/api/admin/tokens", server.url);
    let r = get_bearer(&a, &tokens_url, &signer).unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("needs permission admin.tokens"));
    let r = get_bearer(&a, &tokens_url, &root).unwrap();
    assert_eq!(r.status, 200);
    let listed = r.text();
    assert!(listed.contains("\"ci\"") && listed.contains("\"signer\"") && listed.contains("\"root\""), "{listed}");
    assert!(!listed.contains(&signer[20..]) && !listed.contains(&root[20..]), "no secrets listed");

    let list = admin(&data, &["token", "list"]);
    assert!(list.contains("ci") && list.contains("signer") && list.contains("root"), "{list}");
    assert!(!list.contains(&signer[20..]), "list never shows a token");
    let disk = std::fs::read(data.join("guard.sqlite")).unwrap();
    for t in [&signer, &root] {
        // `sgt_<16 hex id>_<secret>`; the secret is base64url, so it may itself hold `_`.
        let secret = t["sgt_".len() + 17..].as_bytes();
        assert_eq!(secret.len(), 43, "32 bytes of base64url: {t}");
        assert!(!disk.windows(secret.len()).any(|w| w == secret), "the store holds no plaintext token");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(data.join("guard.sqlite")).unwrap().permissions().mode() & 0o777, 0o600);
    }

    admin(&data, &["token", "revoke", "ci"]);
    eventually("the revoked token is refused", || get_bearer(&a, &url, &signer).unwrap().status == 401);
    assert_eq!(get_bearer(&a, &url, &signer).unwrap().json()["message"], "the API token has been revoked");
    assert!(admin(&data, &["token", "list", "--json"]).contains("\"revoked\": 1"), "revocation time listed");
    assert_eq!(get_bearer(&a, &url, &root).unwrap().status, 200);
}

#[test]
fn tokens_expire_in_a_day_by_default_and_rotate_to_a_new_secret() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "[guard.auth]\nrequire = \"all\"\n");
    let data = dir.path().join("data");
    let a = agent();
    let url = format!("{}/api/v1/log", server.url);
    let old = admin(&data, &["token", "create", "--role", "reader", "--name", "ci"]).trim().to_string();
    let forever = admin(&data, &["token", "create", "--role", "reader", "--name", "svc", "--no-expiry"]).trim().to_string();
    let listed: serde_json::Value = serde_json::from_str(&admin(&data, &["token", "list", "--json"])).unwrap();
    let expires = |name: &str| listed.as_array().unwrap().iter().find(|t| t["name"] == name).unwrap()["expires"].clone();
    let (created, ci_expires) = (listed[0]["created"].as_u64().unwrap(), expires("ci").as_u64().unwrap());
    assert_eq!(ci_expires - created, 86_400, "a day by default");
    assert!(expires("svc").is_null(), "--no-expiry");
    // Two writes: the server's poll may reread the store between them, so wait for both.
    eventually("both tokens are accepted", || {
        get_bearer(&a, &url, &old).unwrap().status == 200 && get_bearer(&a, &url, &forever).unwrap().status == 200
    });

    let new = admin(&data, &["token", "rotate", "ci", "--ttl", "600"]).trim().to_string();
    assert!(new.starts_with(&old[..21]) && new != old, "same id, new secret: {new}");
    eventually("the old secret is refused", || get_bearer(&a, &url, &old).unwrap().status == 401);
    assert_eq!(get_bearer(&a, &url, &new).unwrap().status, 200);
    let listed: serde_json::Value = serde_json::from_str(&admin(&data, &["token", "list", "--json"])).unwrap();
    let ci = listed.as_array().unwrap().iter().find(|t| t["name"] == "ci").unwrap().clone();
    let left = ci["expires"].as_u64().unwrap().saturating_sub(signet_guard::store::now());
    assert!((590..=600).contains(&left), "a new expiry: {ci}");

    admin(&data, &["token", "revoke", "ci"]);
    let (ok, _, err) = signet(&["admin", "token", "rotate", "--data-dir", data.to_str().unwrap(), "ci"]);
    assert!(!ok && err.contains("is revoked"), "{err}");
    let (ok, _, err) = signet(&["admin", "token", "rotate", "--data-dir", data.to_str().unwrap(), "nobody"]);
    assert!(!ok && err.contains("no token named"), "{err}");
    let (ok, _, err) = signet(&["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--role", "reader", "--ttl", "0"]);
    assert!(!ok && err.contains("--ttl must be at least 1 second"), "{err}");
}

#[test]
fn off_by_default_yet_admin_routes_need_an_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &[]);
    let data = dir.path().join("data");
    let a = agent();
    for _ in 0..50 {
        assert_eq!(get(&a, &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
    }
    // An OIDC-looking bearer on a public route is not the guard's business.
    assert_eq!(get_bearer(&a, &format!("{}/api/v1/log", server.url), "eyJ.a.b").unwrap().status, 200);
    let tokens_url = format!("{}/api/admin/tokens", server.url);
    assert_eq!(get(&a, &tokens_url).unwrap().status, 401);
    let reader = admin(&data, &["token", "create", "--role", "reader"]).trim().to_string();
    let root = admin(&data, &["token", "create", "--role", "admin"]).trim().to_string();
    eventually("the admin token is accepted", || get_bearer(&a, &tokens_url, &root).unwrap().status == 200);
    assert_eq!(get_bearer(&a, &tokens_url, &reader).unwrap().status, 403);
    let (ok, _, err) = signet(&["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--role", "root"]);
    assert!(!ok && err.contains("\"root\" is not defined (defined: admin, auditor, reader, signer)"), "{err}");
}

/// The validation layer's typed bodies: on every route that takes JSON, a body with the
/// wrong shape is refused before its handler runs, with the JSON path of the field at fault
/// in the error, and nothing is logged, issued or stamped.
#[test]
fn every_json_body_is_typed_and_its_errors_name_the_field() {
    use common::{post_json, Signer};
    use serde_json::{json, Value};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "");
    let data = dir.path().join("data");
    let a = agent();
    let root = admin(&data, &["token", "create", "--role", "admin"]).trim().to_string();
    let tokens_url = format!("{}/api/admin/tokens", server.url);
    eventually("the admin token is accepted", || get_bearer(&a, &tokens_url, &root).unwrap().status == 200);
    let signer = Signer::new();
    let v1 = |f: &dyn Fn(&mut Value)| {
        let mut v = signer.v1_entry(b"typed");
        f(&mut v);
        v
    };
    let v2 = |f: &dyn Fn(&mut Value)| {
        let mut v = signer.v2_entry(b"typed");
        f(&mut v);
        v
    };
    let cert = |f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_slice(&common::cert_request("eyJ.a.b", "a@example.com")).unwrap();
        f(&mut v);
        v
    };
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        // Rekor v1 entries: unknown, missing, wrong type, bad encodings, an array for an object.
        ("/api/v1/log/entries", v1(&|v| v["spec"]["data"]["hash"]["extra"] = json!(1)), "spec.data.hash.extra", "unknown field"),
        ("/api/v1/log/entries", v1(&|v| drop(v["spec"]["signature"].as_object_mut().unwrap().remove("content"))), "spec.signature.content", "required"),
        ("/api/v1/log/entries", v1(&|v| v["spec"]["signature"]["content"] = json!(12)), "spec.signature.content", "invalid type"),
        ("/api/v1/log/entries", v1(&|v| v["spec"]["signature"]["publicKey"]["content"] = json!("@@")), "spec.signature.publicKey.content", "not base64"),
        ("/api/v1/log/entries", v1(&|v| v["spec"]["data"]["hash"]["value"] = json!("xyz")), "spec.data.hash.value", "not hex"),
        ("/api/v1/log/entries", v1(&|v| v["spec"]["data"] = json!([{"algorithm": "sha256"}])), "spec.data", "expected a JSON object"),
        ("/api/v1/log/entries", v1(&|v| v["spec"]["data"]["hash"]["algorithm"] = json!("md5")), "spec.data.hash.algorithm", "sha256"),
        ("/api/v1/log/entries", v1(&|v| v["spec"]["signature"]["publicKey"]["content"] = json!(signet_core::b64::encode("no pem"))), "spec.signature.publicKey.content", "PEM"),
        // Rekor v1 lookups.
        ("/api/v1/log/entries/retrieve", json!({"logIndexes": [1, -1]}), "logIndexes[1]", "invalid value"),
        ("/api/v1/log/entries/retrieve", json!({"logIndexes": [9223372036854775808u64]}), "logIndexes[0]", "out of range"),
        ("/api/v1/log/entries/retrieve", json!({"entryUUIDs": ["ab", 7]}), "entryUUIDs[1]", "invalid type"),
        ("/api/v1/log/entries/retrieve", json!({"entryUUIDs": ["zz"]}), "entryUUIDs[0]", "not hex"),
        ("/api/v1/log/entries/retrieve", json!({"logIndexes": (0..11).collect::<Vec<_>>()}), "logIndexes", "at most 10"),
        ("/api/v1/log/entries/retrieve", json!({"entries": [signer.v1_entry(b"ok"), v1(&|v| v["kind"] = json!(3))]}), "entries[1].kind", "invalid type"),
        ("/api/v1/index/retrieve", json!({"hash": 5}), "hash", "invalid type"),
        ("/api/v1/index/retrieve", json!({"hash": "sha256:00", "operator": "xor"}), "operator", "unknown variant"),
        ("/api/v1/index/retrieve", json!({"hash": "sha256:00"}), "hash", "64 hex"),
        // Rekor v2.
        ("/api/v2/log/entries", v2(&|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["publicKey"]["rawBytes"] = json!("%%")), "hashedRekordRequestV002.signature.verifier.publicKey.rawBytes", "not base64"),
        ("/api/v2/log/entries", v2(&|v| v["hashedRekordRequestV002"]["signature"]["verifier"]["keyDetails"] = json!(["PKIX"])), "hashedRekordRequestV002.signature.verifier.keyDetails", "invalid type"),
        ("/api/v2/log/entries", v2(&|v| v["hashedRekordRequestV002"]["digest"] = json!(signet_core::b64::encode([0u8; 31]))), "hashedRekordRequestV002.digest", "32-byte"),
        // Fulcio: refused before the token is even looked at.
        ("/api/v2/signingCert", cert(&|v| v["publicKeyRequest"]["proofOfPossession"] = json!("***")), "publicKeyRequest.proofOfPossession", "not base64"),
        ("/api/v2/signingCert", cert(&|v| v["publicKeyRequest"]["publicKey"]["kind"] = json!("x")), "publicKeyRequest.publicKey.kind", "unknown field"),
        ("/api/v2/signingCert", cert(&|v| v["credentials"] = json!("token")), "credentials", "expected a JSON object"),
        // The TSA's JSON form.
        ("/api/v1/timestamp", json!({"artifactHash": "AAAA", "nonce": -3}), "nonce", "invalid value"),
        ("/api/v1/timestamp", json!({"artifactHash": "AAAA", "hashAlgorithm": "sha1"}), "hashAlgorithm", "unknown variant"),
        ("/api/v1/timestamp", json!({"artifactHash": "AAAA", "certificates": "yes"}), "certificates", "invalid type"),
        ("/api/v1/timestamp", json!({"artifactHash": "AAAA", "tsaPolicyOID": "not.an.oid"}), "tsaPolicyOID", "not an OID"),
        // Admin routes, with an admin token.
        ("/api/admin/log/rotate", json!({"log": "rekor-v1", "force": true}), "force", "unknown field"),
        ("/api/admin/log/rotate", json!({"log": "rekor-v9"}), "log", "rekor-v1"),
        ("/api/admin/bans/lift", json!({}), "client", "required"),
        ("/api/admin/bans/lift", json!({"client": "nonsense"}), "client", "ip:"),
    ];
    for (route, body, path, needle) in &cases {
        let r = common::reply(
            a.post(&format!("{}{route}", server.url))
                .header("content-type", "application/json")
                .header("authorization", &format!("Bearer {root}"))
                .send(serde_json::to_vec(body).unwrap()),
        )
        .unwrap();
        let e = r.json();
        assert_eq!((r.status, e["path"].as_str()), (400, Some(*path)), "{route} {body}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(needle) && !message.contains("line 1"), "{route} {body}: {message:?} should say {needle:?}");
    }
    // Not JSON at all is 400 too, without a path; nothing above was logged.
    let r = post_json(&a, &format!("{}/api/v1/log/entries", server.url), &json!("a string")).unwrap();
    assert_eq!((r.status, r.json().get("path").is_none()), (400, true), "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("expected a JSON object"), "{}", r.text());
    let r = common::post_raw(&a, &format!("{}/api/v1/log/entries", server.url), "application/json", b"{\"kind\":".to_vec()).unwrap();
    assert_eq!((r.status, r.json().get("path").is_none()), (400, true), "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("not valid JSON"), "{}", r.text());
    assert_eq!(get(&a, &format!("{}/api/v1/log", server.url)).unwrap().json()["treeSize"], 1, "only the genesis entry");
    // The same bodies, well-formed, go through.
    assert_eq!(post_json(&a, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"typed")).unwrap().status, 201);
    assert_eq!(post_json(&a, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"typed")).unwrap().status, 201);
}
