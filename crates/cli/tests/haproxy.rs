//! Issue 18: three instances on one PostgreSQL behind haproxy with `deploy/haproxy.cfg`.
//! Reads spread over all three (the opposite of the pick_first bug of report 004), appends go
//! to the sequencer (issue 41), and when the sequencer dies, haproxy and the followers carry
//! on without a failed request.

use crate::common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

pub(crate) struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(crate) fn haproxy_binary() -> Option<&'static str> {
    if Command::new("haproxy").arg("-v").output().is_ok_and(|o| o.status.success()) {
        return Some("haproxy");
    }
    assert!(
        std::env::var("SIGNET_TEST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
        "haproxy is not installed; scripts/install-deps installs it"
    );
    eprintln!("haproxy is not installed: the haproxy case is skipped (scripts/test runs it)");
    None
}

impl Haproxy {
    /// haproxy with `deploy/haproxy.cfg` in front of `backends` (host:port each); returns it,
    /// its frontend's URL and its stats port, once the frontend listens.
    pub(crate) fn start(haproxy: &str, backends: [&str; 3]) -> (Haproxy, String, u16) {
        let (front, stats) = (free_port(), free_port());
        let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/haproxy.cfg");
        let proxy = Haproxy(
            Command::new(haproxy)
                .args(["-db", "-f"])
                .arg(&cfg)
                .env("SIGNET_FRONTEND", format!("127.0.0.1:{front}"))
                .env("SIGNET_HAPROXY_STATS", format!("127.0.0.1:{stats}"))
                .env("SIGNET_BACKEND_1", backends[0])
                .env("SIGNET_BACKEND_2", backends[1])
                .env("SIGNET_BACKEND_3", backends[2])
                .stdout(Stdio::null())
                .spawn()
                .expect("start haproxy"),
        );
        let url = format!("http://127.0.0.1:{front}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", front)).is_err() {
            assert!(Instant::now() < deadline, "haproxy did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        (proxy, url, stats)
    }
}

/// The responses an instance has given so far, by its own /metrics.
fn served(agent: &ureq::Agent, url: &str) -> u64 {
    let text = get(agent, &format!("{url}/metrics")).unwrap().text();
    text.lines()
        .filter(|l| l.starts_with("signet_http_responses_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

pub(crate) fn host_port(url: &str) -> &str {
    url.strip_prefix("http://").unwrap()
}

#[test]
fn three_instances_behind_haproxy_share_the_load_and_survive_the_sequencer() {
    let Some(db) = postgres_database() else { return };
    let Some(haproxy) = haproxy_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("i{i}"))).collect();
    let mut servers = vec![Server::start(&dirs[0], &["--storage", &db])];
    for d in &dirs[1..] {
        let out = Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["backup", "--data-dir", dirs[0].to_str().unwrap(), "--out", d.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        servers.push(Server::start(d, &["--storage", &db]));
    }

    let (_proxy, front, stats) = Haproxy::start(haproxy, [host_port(&servers[0].url), host_port(&servers[1].url), host_port(&servers[2].url)]);
    let agent = agent();
    let roles: HashMap<usize, String> = (0..3)
        .filter_map(|i| Some((i, get(&agent, &format!("{}/readyz", servers[i].url)).ok()?.json()["role"].as_str()?.to_string())))
        .collect();
    let sequencer = *roles.iter().find(|(_, r)| r.as_str() == "sequencer").expect("one instance sequences").0;
    // Up once every instance has passed its /readyz checks ("UP" in haproxy's CSV), and the
    // appends backend has found the sequencer among them.
    let started = Instant::now();
    loop {
        let csv = get(&agent, &format!("http://127.0.0.1:{stats}/stats;csv")).map(|r| r.text()).unwrap_or_default();
        // A server that failed one check of two is "UP 1/2", and still gets requests: wait for DOWN.
        let state = |prefix: &str, state: &str| csv.lines().filter(|l| l.starts_with(prefix) && l.contains(state)).count();
        let up = |prefix: &str| state(prefix, ",UP,");
        if up("signet,signet") == 3 && up("appends,sequencer") == 1 && state("appends,sequencer", ",DOWN,") == 2 {
            assert!(up(&format!("appends,sequencer{},", sequencer + 1)) == 1, "haproxy took another instance for the sequencer:\n{csv}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "haproxy never saw three healthy instances and one sequencer:\n{csv}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Reads and writes, through the one front door: reads on every instance, appends on the
    // sequencer alone.
    let before: Vec<u64> = servers.iter().map(|s| served(&agent, &s.url)).collect();
    let signer = Signer::new();
    let reads = 200;
    for i in 0..reads {
        let r = get(&agent, &format!("{front}/api/v1/log")).unwrap();
        assert_eq!(r.status, 200, "read {i}: {}", r.text());
    }
    let share: Vec<u64> = servers.iter().zip(&before).map(|(s, b)| served(&agent, &s.url) - b).collect();
    eprintln!("reads served per instance: {share:?} of {reads} (plus haproxy's health checks)");
    for (i, n) in share.iter().enumerate() {
        assert!(*n >= reads as u64 / 5, "instance {i} served {n} of {reads} reads: {share:?}");
    }
    let appended = |i: usize| {
        let text = get(&agent, &format!("{}/metrics", servers[i].url)).unwrap().text();
        text.lines()
            .filter(|l| l.starts_with("http_server_request_duration_seconds_count{"))
            .filter(|l| l.contains("http_request_method=\"POST\"") && l.contains("http_route=\"/api/v1/log/entries\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    // How often haproxy has taken the sequencer's line in the appends backend down (CSV column
    // chkdown): on a loaded machine a /readyz check can time out, and appends then go to the
    // backups for a second, as the config means them to.
    let taken_down = || {
        let csv = get(&agent, &format!("http://127.0.0.1:{stats}/stats;csv")).unwrap().text();
        let header: Vec<&str> = csv.lines().next().unwrap_or_default().trim_start_matches("# ").split(',').collect();
        let column = header.iter().position(|c| *c == "chkdown").expect("haproxy's CSV has chkdown");
        let line = csv.lines().find(|l| l.starts_with(&format!("appends,sequencer{},", sequencer + 1))).expect("the sequencer's line").to_string();
        line.split(',').nth(column).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let downs_before = taken_down();
    let appends = 60;
    for i in 0..appends {
        let r = post_json(&agent, &format!("{front}/api/v1/log/entries"), &signer.v1_entry(format!("spread {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let per_instance: Vec<u64> = (0..3).map(appended).collect();
    assert_eq!(per_instance.iter().sum::<u64>(), appends, "{per_instance:?}");
    if taken_down() == downs_before {
        assert_eq!(per_instance[sequencer], appends, "every append on the sequencer ({sequencer}): {per_instance:?}");
    } else {
        eprintln!("haproxy took the sequencer down during the appends (a check timed out): {per_instance:?}");
    }

    // The sequencer dies. haproxy retries what reached it on the others, and stops sending it
    // anything once its checks fail; the followers hold appends until one of them takes over.
    servers[sequencer].kill();
    let killed = Instant::now();
    let mut i = 0;
    while killed.elapsed() < Duration::from_secs(6) {
        i += 1;
        let r = post_json(&agent, &format!("{front}/api/v1/log/entries"), &signer.v1_entry(format!("after the kill {i}").as_bytes())).unwrap();
        assert_eq!(r.status, 201, "append {i}, {:?} after the kill: {}", killed.elapsed(), r.text());
        let r = get(&agent, &format!("{front}/api/v1/log")).unwrap();
        assert_eq!(r.status, 200, "read {i}, {:?} after the kill: {}", killed.elapsed(), r.text());
    }
    let sequencers = (0..3)
        .filter(|&i| i != sequencer)
        .filter(|&i| get(&agent, &format!("{}/readyz", servers[i].url)).unwrap().json()["role"] == "sequencer")
        .count();
    assert_eq!(sequencers, 1, "one survivor took over");
}
