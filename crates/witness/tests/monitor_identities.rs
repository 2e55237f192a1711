//! `signet monitor` against a real `signet serve --dev`: certificates issued to watched
//! identities raise one alert each, others none; a restart resumes where it stopped; the
//! webhook gets the alert; the Rekor v1 API is followed too.

use crate::monitor_common;

use std::sync::{Arc, Mutex};

use monitor_common::*;
use serde_json::Value;

struct Setup {
    _tmp: tempfile::TempDir,
    server: Server,
    dir: std::path::PathBuf,
    watch: String,
    state: String,
    root: String,
}

fn setup(watch: &str) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let server = Server::start(&dir.join("data"));
    let root = trust(&server, &dir).join("trusted_root.json").to_str().unwrap().to_string();
    std::fs::write(dir.join("watch.toml"), watch).unwrap();
    Setup {
        watch: dir.join("watch.toml").to_str().unwrap().to_string(),
        state: dir.join("state").to_str().unwrap().to_string(),
        root,
        dir,
        server,
        _tmp: tmp,
    }
}

impl Setup {
    fn v2(&self) -> String {
        format!("{}/api/v2", self.server.url)
    }

    fn run(&self, extra: &[&str]) -> Run {
        let v2 = self.v2();
        let mut args = vec!["--log", v2.as_str(), "--trusted-root", &self.root, "--watch", &self.watch, "--state", &self.state];
        args.extend_from_slice(extra);
        monitor(&args)
    }
}

fn only_match(run: &Run) -> &Value {
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.alerts.len(), 1, "exactly one alert: {:?}", run.alerts);
    let a = &run.alerts[0];
    assert_eq!(a["kind"], "match", "{a}");
    a
}

#[test]
fn an_identity_issued_a_certificate_raises_exactly_one_alert() {
    let s = setup("emails = [\"Alice@Example.com\"]\n");
    sign(&s.server, &s.dir, "alice@example.com", b"alice's release", false);
    sign(&s.server, &s.dir, "bob@example.com", b"bob's release", false);

    let run = s.run(&[]);
    let a = only_match(&run);
    let entry = &a["entry"];
    assert_eq!(entry["matched"][0]["rule"], "email");
    assert_eq!(entry["matched"][0]["value"], "alice@example.com");
    assert_eq!(entry["identities"][0], serde_json::json!({"type": "email", "value": "alice@example.com"}));
    // The certificate's Fulcio issuer extension is read: the dev instance's own issuer.
    assert!(entry["issuers"][0].as_str().is_some_and(|i| i.starts_with("http")), "{entry}");
    assert!(entry["digests"][0].as_str().unwrap().starts_with("sha256:"));
    // Index 0 is the log's genesis entry; alice's comes next, bob's after it.
    assert_eq!(entry["index"], 1);
    assert!(run.stderr.contains("3 entries read, 1 matched"), "{}", run.stderr);
}

#[test]
fn the_monitor_restarts_where_it_left_off() {
    let s = setup("emails = [\"alice@example.com\"]\n");
    sign(&s.server, &s.dir, "alice@example.com", b"one", false);
    let first = s.run(&[]);
    assert_eq!(only_match(&first)["entry"]["index"], 1);

    // Nothing new: no alert, nothing read again.
    let idle = s.run(&[]);
    assert_eq!((idle.code, idle.alerts.len()), (0, 0), "{}", idle.stderr);
    assert!(idle.stderr.contains("0 entries read"), "{}", idle.stderr);

    // One new entry by alice: one alert, for it alone, and only it is read.
    sign(&s.server, &s.dir, "bob@example.com", b"two", false);
    sign(&s.server, &s.dir, "alice@example.com", b"three", false);
    let next = s.run(&[]);
    assert_eq!(only_match(&next)["entry"]["index"], 3);
    assert!(next.stderr.contains("2 entries read, 1 matched"), "{}", next.stderr);
}

#[test]
fn the_webhook_receives_the_alert_after_a_retry() {
    let s = setup("san_regex = ['@example\\.org$']\n");
    sign(&s.server, &s.dir, "carol@example.org", b"carol", false);
    type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;
    let received: Received = Arc::default();
    let seen = received.clone();
    let hook = http_server(Arc::new(move |method: &str, _path: &str, body: &[u8]| {
        let mut seen = seen.lock().unwrap();
        seen.push((method.to_string(), body.to_vec()));
        // The first delivery fails: the monitor must retry.
        if seen.len() == 1 {
            (503, Vec::new())
        } else {
            (200, Vec::new())
        }
    }));
    let url = format!("{hook}/alerts");
    let run = s.run(&["--webhook", &url]);
    only_match(&run);
    let got = received.lock().unwrap();
    assert_eq!(got.len(), 2, "one failed delivery, then one that succeeded");
    let alert: Value = serde_json::from_slice(&got[1].1).unwrap();
    assert_eq!(got[1].0, "POST");
    assert_eq!(alert["kind"], "match");
    assert_eq!(alert["entry"]["matched"][0]["rule"], "san_regex");
    assert_eq!(alert["entry"]["matched"][0]["value"], "carol@example.org");
}

#[test]
fn the_rekor_v1_api_is_followed_too() {
    let s = setup("emails = [\"dave@example.com\"]\n");
    sign(&s.server, &s.dir, "dave@example.com", b"dave", true);
    sign(&s.server, &s.dir, "erin@example.com", b"erin", true);
    let run = monitor(&["--rekor-v1", &s.server.url, "--trusted-root", &s.root, "--watch", &s.watch, "--state", &s.state]);
    let a = only_match(&run);
    assert_eq!(a["entry"]["entry_kind"], "hashedrekord 0.0.1");
    assert_eq!(a["entry"]["identities"][0]["value"], "dave@example.com");
    assert!(run.stderr.contains("3 entries read, 1 matched"), "{}", run.stderr);
}

#[test]
fn a_log_without_a_key_is_refused_with_exit_2() {
    let s = setup("emails = [\"a@b\"]\n");
    let v2 = s.v2();
    let run = monitor(&["--log", &v2, "--watch", &s.watch, "--state", &s.state]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no key to verify"), "{}", run.stderr);
}

/// Kills the monitor when the test ends, however it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn it_follows_a_growing_log_and_serves_metrics() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let s = setup("emails = [\"frank@example.com\"]\n");
    let v2 = s.v2();
    let mut child = Command::new(signet_bin())
        .args(["monitor", "--log", &v2, "--trusted-root", &s.root, "--watch", &s.watch, "--state", &s.state])
        .args(["--interval", "1", "--metrics-listen", "127.0.0.1:0"])
        .env("SIGNET_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let _running = Running(child);
    let metrics_line = BufReader::new(stderr).lines().next().unwrap().unwrap();
    let addr = metrics_line.split("http://").nth(1).and_then(|r| r.strip_suffix("/metrics")).unwrap_or_else(|| panic!("{metrics_line}")).to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });

    // The monitor is running when the entry is logged: a later poll finds it.
    sign(&s.server, &s.dir, "frank@example.com", b"frank", false);
    let line = rx.recv_timeout(Duration::from_secs(30)).expect("an alert within 30 s");
    let alert: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(alert["kind"], "match");
    assert_eq!(alert["entry"]["identities"][0]["value"], "frank@example.com");

    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: monitor\r\n\r\n").unwrap();
    let mut page = String::new();
    conn.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    let log = format!("log=\"{v2}\"");
    assert!(page.contains(&format!("signet_monitor_alerts_total{{{log},kind=\"match\"}} 1")), "{page}");
    assert!(page.contains(&format!("signet_monitor_alerts_total{{{log},kind=\"inconsistent\"}} 0")), "{page}");
    assert!(page.contains(&format!("signet_monitor_entries_total{{{log}}} 2")), "{page}");
    assert!(page.contains(&format!("signet_monitor_tree_size{{{log}}} 2")), "{page}");
    // Nothing more: one entry, one alert, however many polls ran.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(rx.try_recv().is_err(), "no second alert");
}

#[test]
fn the_ct_log_is_followed_too_both_kinds_of_entry() {
    use bytes::Bytes;
    let s = setup("emails = [\"gina@example.com\"]\n");
    sign(&s.server, &s.dir, "hank@example.com", b"hank", true);
    sign(&s.server, &s.dir, "gina@example.com", b"gina", false);
    // gina's certificate logged once more, as an X.509 entry (add-chain): the CT log then
    // holds hank's precertificate, gina's, and gina's certificate.
    let bundle: Value = serde_json::from_slice(&std::fs::read(s.dir.join("artifact.sigstore.json")).unwrap()).unwrap();
    let leaf = bundle["verificationMaterial"]["certificate"]["rawBytes"].as_str().unwrap().to_string();
    let root: Value = serde_json::from_slice(&std::fs::read(&s.root).unwrap()).unwrap();
    let intermediate = root["certificateAuthorities"][0]["certChain"]["certificates"][0]["rawBytes"].as_str().unwrap().to_string();
    let url = format!("{}/ct/v1/add-chain", s.server.url);
    let body = serde_json::json!({"chain": [leaf, intermediate]}).to_string();
    let request = http::Request::post(&url).header("content-type", "application/json").body(Bytes::from(body)).unwrap();
    let fetcher = signet_tls::Fetcher::new(signet_tls::client_config(&signet_tls::Trust::Platform).unwrap());
    let answer = fetcher.send(&url, request).unwrap();
    assert_eq!(answer.status(), 200, "{}", String::from_utf8_lossy(answer.body()));

    // The CT log and the Rekor v1 log under the same URL are two logs, with two states.
    let run = monitor(&["--ct", &s.server.url, "--rekor-v1", &s.server.url, "--trusted-root", &s.root, "--watch", &s.watch, "--state", &s.state]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let kinds: Vec<(&str, u64, &str)> = run
        .alerts
        .iter()
        .map(|a| (a["log"].as_str().unwrap(), a["entry"]["index"].as_u64().unwrap(), a["entry"]["entry_kind"].as_str().unwrap()))
        .collect();
    let ct = format!("{}/ct/v1", s.server.url);
    assert_eq!(kinds, vec![(ct.as_str(), 1, "ct precert_entry"), (ct.as_str(), 2, "ct x509_entry")], "{:?}", run.alerts);
    for a in &run.alerts {
        assert_eq!(a["entry"]["identities"][0]["value"], "gina@example.com", "{a}");
        assert!(a["entry"]["issuers"][0].as_str().is_some_and(|i| i.starts_with("http")), "{a}");
    }
    assert!(run.stderr.contains(" entries read, 2 matched"), "{}", run.stderr);
    // The log grows by one: the new tree head is proved consistent with the last one seen
    // (get-sth-consistency), and only the new entry is read.
    sign(&s.server, &s.dir, "hank@example.com", b"hank again", false);
    let again = monitor(&["--ct", &s.server.url, "--trusted-root", &s.root, "--watch", &s.watch, "--state", &s.state]);
    assert_eq!((again.code, again.alerts.len()), (0, 0), "{}", again.stderr);
    assert!(again.stderr.contains("1 entries read, 0 matched"), "{}", again.stderr);
}

#[test]
fn a_rekor_v1_shard_rotation_is_followed_to_the_new_shard_once_the_root_lists_its_key() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let s = setup("emails = [\"ivy@example.com\"]\n");
    sign(&s.server, &s.dir, "ivy@example.com", b"ivy before", true);
    // The monitor's own copy of the trusted root, as an operator keeps it: sign() rewrites
    // s.root with every export, this one changes only when copied below.
    let root = s.dir.join("monitor_root.json");
    std::fs::copy(&s.root, &root).unwrap();
    let child = Command::new(signet_bin())
        .args(["monitor", "--rekor-v1", &s.server.url, "--trusted-root", root.to_str().unwrap(), "--watch", &s.watch, "--state", &s.state, "--interval", "1"])
        .env("SIGNET_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Running(child);
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(serde_json::from_str::<Value>(&line.unwrap()).unwrap());
        }
    });
    let next = |what: &str| rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no {what} alert within 30 s"));
    let before = next("first match");
    assert_eq!(before["kind"], "match", "{before}");

    let data = s.server.data_dir.to_str().unwrap().to_string();
    let token = signet(&["admin", "token", "create", "--role", "admin", "--data-dir", &data]).trim().to_string();
    let rotated = (0..25).any(|_| {
        std::thread::sleep(Duration::from_millis(200));
        Command::new(signet_bin()).args(["admin", "log", "rotate", "--log", "rekor-v1", "--url", &s.server.url, "--token", &token]).output().unwrap().status.success()
    });
    assert!(rotated, "the rotation never went through");
    sign(&s.server, &s.dir, "ivy@example.com", b"ivy after", true);
    // The new shard's tree head is signed by a key the monitor's root does not list yet: it
    // says so, and keeps polling rather than stopping.
    let unknown = next("bad signature");
    assert_eq!(unknown["kind"], "bad_signature", "{unknown}");
    // The operator's root is updated (sign() exported it with the new shard's key): the running
    // monitor reads it again, sees the rotation, and reads the new shard.
    std::fs::copy(&s.root, &root).unwrap();
    // (One more bad_signature may come first: one per distinct tree head seen before the copy.)
    let rotation = std::iter::repeat_with(|| next("rotated")).find(|a| a["kind"] != "bad_signature").unwrap();
    assert_eq!(rotation["kind"], "rotated", "{rotation}");
    let after = next("second match");
    assert_eq!(after["kind"], "match", "{after}");
    assert_eq!(after["entry"]["identities"][0]["value"], "ivy@example.com");
    assert!(after["entry"]["index"].as_u64() > before["entry"]["index"].as_u64(), "the new shard's entries come next in the virtual index: {after}");
}
