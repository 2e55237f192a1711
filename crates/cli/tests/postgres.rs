//! signet on PostgreSQL, end to end: `signet migrate`, a server that logs, restarts and
//! reads back from the database, and a database that goes away and comes back under load.

use crate::chaos;
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap()
}

/// The crate that owns a table applies its migration: the guard's token store opened on an
/// empty database makes its own tables (versions 4 and 6) and nothing of the log's; `signet
/// migrate` then applies every other crate's, and no version twice.
#[test]
fn each_store_applies_its_own_migrations() {
    let Some(db) = postgres_database() else { return };
    let store = signet_guard::store::Store::open_postgres(&db).unwrap();
    assert!(store.tokens().unwrap().is_empty());
    assert_eq!(query_text(&db, "SELECT string_agg(version::text, ',' ORDER BY version) FROM signet_schema"), "4,6");
    assert_eq!(query_text(&db, "SELECT (to_regclass('entries') IS NULL)::text"), "true", "the log's tables are the log's to make");
    // doctor counts the schema up to the first version missing, and changes nothing.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, format!("storage = \"{db}\"\n")).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let doctor = signet(&["doctor", "--config", config.to_str().unwrap(), "--data-dir", dir.path().join("data").to_str().unwrap(), "--offline"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    let newest = signet_db::migrations::newest();
    assert!(text.contains(&format!("schema at version 0, this signet's is {newest}; run `signet migrate`")), "{text}");
    assert_eq!(query_text(&db, "SELECT count(*)::text FROM signet_schema"), "2", "doctor migrated nothing");
    let rest = signet(&["migrate", "--storage", &db]);
    assert!(String::from_utf8_lossy(&rest.stdout).contains("applied schema migrations 1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13\n"), "{rest:?}");
    let expected: Vec<String> = signet_db::migrations::REGISTRY.iter().map(|(v, _)| v.to_string()).collect();
    assert_eq!(query_text(&db, "SELECT string_agg(version::text, ',' ORDER BY version) FROM signet_schema"), expected.join(","));
}

#[test]
fn migrate_applies_the_schema_once() {
    let Some(db) = postgres_database() else { return };
    let first = signet(&["migrate", "--storage", &db]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stdout).contains("applied schema migrations 1, 2, 3, 4"), "{first:?}");
    let again = signet(&["migrate", "--storage", &db]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("schema already current"), "{again:?}");

    // The same command on the embedded default.
    let dir = tempfile::tempdir().unwrap();
    let sqlite = signet(&["migrate", "--data-dir", dir.path().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&sqlite.stdout).contains("applied schema migrations 1"), "{sqlite:?}");

    // A URL that is not one: exit 2, naming what is expected, and no password echoed.
    let bad = signet(&["migrate", "--storage", "mysql://root:hunter2@db/x"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("expected sqlite://PATH or postgres://") && !err.contains("hunter2"), "{err}");
}

#[test]
fn a_server_on_postgres_logs_restarts_and_reads_back() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let agent = agent();
    let signer = Signer::new();
    let (v1_index, v2_index, head) = {
        let server = Server::start(dir.path(), &["--storage", &db]);
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"on postgres v1")).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let v1_index = r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap();
        let dup = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"on postgres v1")).unwrap();
        // ECDSA signatures differ each time, so this is a new entry; the exact same body must be a 409.
        assert_eq!(dup.status, 201);
        let r = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"on postgres v2")).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let v2_index = r.json()["logIndex"].as_str().unwrap().parse::<u64>().unwrap();
        let head = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
        (v1_index, v2_index, head)
    };
    // Nothing of the log lives in the data dir: a server on a fresh data dir with the same keys
    // would read the same log. Here, the same data dir restarts and rebuilds from PostgreSQL.
    let server = Server::start(dir.path(), &["--storage", &db]);
    let again = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    assert_eq!(again["rootHash"], head["rootHash"]);
    assert_eq!(again["treeSize"], head["treeSize"]);
    let e = get(&agent, &format!("{}/api/v1/log/entries?logIndex={v1_index}", server.url)).unwrap();
    assert_eq!(e.status, 200, "{}", e.text());
    let bundle = get(&agent, &format!("{}/api/v2/tile/entries/000.p/{}", server.url, v2_index + 1)).unwrap();
    assert_eq!(bundle.status, 200);
    assert!(!dir.path().join("signet.sqlite").exists(), "no SQLite file beside a PostgreSQL store");
}

/// A PostgreSQL cluster of this test's own, so that stopping it disturbs no other test.
struct OwnCluster {
    dir: tempfile::TempDir,
    url: String,
}

fn services_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/services")
}

impl OwnCluster {
    fn start() -> OwnCluster {
        Self::start_in(Path::new("/tmp"))
    }

    /// A cluster whose data lives under `parent` (a small disk, to fill).
    fn start_in(parent: &Path) -> OwnCluster {
        let dir = tempfile::Builder::new().prefix("signet-pg-").tempdir_in(parent).unwrap();
        let out = Command::new(services_script()).args(["start"]).arg(dir.path()).env("SIGNET_SERVICES", "postgres").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let url = text
            .lines()
            .find_map(|l| l.strip_prefix("export SIGNET_TEST_POSTGRES="))
            .expect("the services script prints the URL")
            .to_string();
        OwnCluster { dir, url }
    }

    fn pg_ctl(&self, what: &[&str]) {
        let out = Command::new(services_script()).arg(what[0]).arg(self.dir.path()).env("SIGNET_SERVICES", "postgres").output().unwrap();
        assert!(out.status.success(), "{what:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Whether the postmaster runs (it exits when it cannot recover, say on a full disk).
    fn running(&self) -> bool {
        let pid = std::fs::read_to_string(self.dir.path().join("postgres/postmaster.pid")).ok();
        let pid: Option<i32> = pid.and_then(|p| p.lines().next()?.trim().parse().ok());
        // SAFETY: signal 0 only asks whether the process exists.
        pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0)
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Command::new(services_script()).arg("stop").arg(self.dir.path()).output();
    }
}

/// Issue 18, "Database down": stop PostgreSQL under load. Clients get clean 503s with
/// Retry-After (never a 500, never a hang), reads served from memory go on, and appends
/// succeed again once the database is back, with no restart of signet. Issue 41: past a lease
/// lifetime without a renewal, `/readyz` says the sequencer stepped down, until it renews.
#[test]
fn a_database_outage_costs_503s_and_heals_without_a_restart() {
    if postgres_database().is_none() {
        return;
    }
    let cluster = OwnCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--storage", &cluster.url]);
    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Arc<Mutex<Vec<(u16, Option<String>)>>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (url, stop, statuses) = (server.url.clone(), stop.clone(), statuses.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (agent(), Signer::new());
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let entry = signer.v1_entry(format!("outage writer {w} entry {i}").as_bytes());
                    let r = post_json(&agent, &format!("{url}/api/v1/log/entries"), &entry).unwrap();
                    statuses.lock().unwrap().push((r.status, r.header("retry-after").map(str::to_string)));
                    if r.status != 201 {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
        })
        .collect();
    let agent = agent();
    std::thread::sleep(Duration::from_millis(500));

    cluster.pg_ctl(&["stop"]);
    std::thread::sleep(Duration::from_millis(1500));
    // Served from memory: the tree head, and an entry the sequencer kept as it landed (the
    // entry cache), with its proof.
    assert_eq!(get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
    let kept = get(&agent, &format!("{}/api/v1/log/entries?logIndex=0", server.url)).unwrap();
    assert_eq!(kept.status, 200, "{}", kept.text());
    // Needs the database (the digest index): a clean 503 that says why, at once.
    let started = Instant::now();
    let search = json!({"hash": format!("sha256:{}", "ab".repeat(32))});
    let r = post_json(&agent, &format!("{}/api/v1/index/retrieve", server.url), &search).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("storage is unavailable"), "{}", r.text());
    assert!(started.elapsed() < Duration::from_secs(6), "the refusal took {:?}", started.elapsed());
    // A lease lifetime (3 s) without a renewal: the sequencer steps down and says so.
    let down = Instant::now();
    loop {
        let r = get(&agent, &format!("{}/readyz", server.url)).unwrap();
        if r.status == 503 && r.text().contains("stepped down") {
            break;
        }
        assert!(down.elapsed() < Duration::from_secs(10), "/readyz did not report the step-down: {} {}", r.status, r.text());
        std::thread::sleep(Duration::from_millis(200));
    }

    cluster.pg_ctl(&["start"]);
    let healed = Instant::now();
    let signer = Signer::new();
    loop {
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"after the outage")).unwrap();
        if r.status == 201 {
            break;
        }
        assert!(healed.elapsed() < Duration::from_secs(20), "appends did not resume: {} {}", r.status, r.text());
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());
    // The renewal succeeded again (the lease was still this instance's): ready again.
    let back = Instant::now();
    while get(&agent, &format!("{}/readyz", server.url)).unwrap().status != 200 {
        assert!(back.elapsed() < Duration::from_secs(10), "/readyz did not recover after the outage");
        std::thread::sleep(Duration::from_millis(200));
    }

    let statuses = statuses.lock().unwrap();
    let refused: Vec<_> = statuses.iter().filter(|(s, _)| *s != 201).collect();
    assert!(!refused.is_empty(), "the outage was not seen by the writers");
    assert!(statuses.iter().any(|(s, _)| *s == 201), "nothing was appended before the outage");
    for (status, retry_after) in refused {
        assert_eq!(*status, 503, "an outage answers 503, not {status}");
        assert_eq!(retry_after.as_deref(), Some("1"), "a 503 says when to retry");
    }
    // The log is whole: the head verifies and every entry in it reads back.
    let head = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let size = head["treeSize"].as_u64().unwrap();
    let page = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, size - 1)).unwrap();
    assert_eq!(page.status, 200, "{}", page.text());
}

/// The role `/readyz` reports: "sequencer" or "follower" (None if the instance does not answer).
fn role(agent: &ureq::Agent, url: &str) -> Option<String> {
    let r = get(agent, &format!("{url}/readyz")).ok()?;
    r.json()["role"].as_str().map(str::to_string)
}

/// One v1 entry posted: its index, body and checkpoint, when the answer is 201.
fn append_v1(agent: &ureq::Agent, url: &str, signer: &Signer, what: &str) -> Result<(u64, String, String), String> {
    let r = post_json(agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(what.as_bytes())).map_err(|e| e.to_string())?;
    if r.status != 201 {
        return Err(format!("{} {}", r.status, r.text()));
    }
    let map = r.json();
    let e = map.as_object().unwrap().values().next().unwrap().clone();
    Ok((
        e["logIndex"].as_u64().unwrap(),
        e["body"].as_str().unwrap().to_string(),
        e["verification"]["inclusionProof"]["checkpoint"].as_str().unwrap().to_string(),
    ))
}

/// Every acknowledged entry is in the log with the body it was acknowledged with, and every
/// checkpoint handed out is consistent with the final head.
fn check_log(agent: &ureq::Agent, url: &str, acked: &[(u64, String)], checkpoints: &[String]) {
    let head = get(agent, &format!("{url}/api/v1/log")).unwrap().json();
    let size = head["treeSize"].as_u64().unwrap();
    let root = hex32(head["rootHash"].as_str().unwrap());
    let mut seen = std::collections::HashMap::new();
    for (index, body) in acked {
        if let Some(other) = seen.insert(*index, body) {
            assert_eq!(other, body, "index {index} acknowledged for two different entries");
        }
        let r = get(agent, &format!("{url}/api/v1/log/entries?logIndex={index}")).unwrap();
        assert_eq!(r.status, 200, "acknowledged entry {index} lost: {}", r.text());
        let stored = r.json();
        let got = stored.as_object().unwrap().values().next().unwrap()["body"].as_str().unwrap().to_string();
        assert_eq!(&got, body, "entry {index} is not the one acknowledged");
    }
    let pem = get(agent, &format!("{url}/api/v1/log/publicKey")).unwrap().text();
    let spki = signet_core::pem::decode_first(pem.as_bytes()).unwrap().der;
    let mut sizes = std::collections::BTreeMap::new();
    for note in checkpoints {
        let cp = signet_log::checkpoint::verify(note, "127.0.0.1", &spki).unwrap();
        if let Some(root) = sizes.insert(cp.size, cp.root_hash) {
            assert_eq!(root, cp.root_hash, "two roots for size {}", cp.size);
        }
    }
    for (first, first_root) in sizes {
        let p = get(agent, &format!("{url}/api/v1/log/proof?firstSize={first}&lastSize={size}")).unwrap().json();
        let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
        signet_log::merkle::verify_consistency(first, size, &hashes, &first_root, &root)
            .unwrap_or_else(|e| panic!("checkpoint {first} is not a prefix of the log at {size}: {e:?}"));
    }
}

/// A sequencer stopped on purpose (SIGTERM: a rolling restart) gives its lease up once it has
/// drained, so the follower does not wait out the lease: the lease row is free (or already
/// the follower's) the moment the old sequencer has exited, where before it stayed the old
/// one's for up to 2.5 s.
#[test]
fn a_sequencer_that_stops_gives_its_lease_up() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let (agent, signer) = (agent(), Signer::new());
    let mut a = Server::start(&a_dir, &["--storage", &db]);
    append_v1(&agent, &a.url, &signer, "before the restart").unwrap();
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let b = Server::start(&b_dir, &["--storage", &db]);
    assert_eq!(role(&agent, &b.url).as_deref(), Some("follower"));

    // SAFETY: a signal to a child process this test started.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGTERM) };
    let exit = a.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let free = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (out, url) = (free.clone(), db.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            let row = client.query_one("SELECT holder, expires_at <= now() FROM leases", &[]).await.unwrap();
            *out.lock().unwrap() = Some((row.get::<_, String>(0), row.get::<_, bool>(1)));
        });
    })
    .join()
    .unwrap();
    let (holder, lapsed) = free.lock().unwrap().clone().unwrap();
    let a_pid = format!("pid {} ", a.child.id());
    assert!(lapsed || !holder.contains(&a_pid), "the stopped sequencer still holds the lease: {holder}");
    // And the follower takes over and logs.
    let after = append_v1(&agent, &b.url, &signer, "after the restart").unwrap();
    assert!(after.0 >= 1);
    assert_eq!(role(&agent, &b.url).as_deref(), Some("sequencer"));
}

/// Issue 18, "Exactly one sequencer per log" and "every instance serves reads and accepts
/// writes": a second instance on the same database follows it. It serves the log and takes
/// appends, which the sequencer logs. When the sequencer is paused (SIGSTOP) past its lease,
/// the follower takes over; when the old one wakes (SIGCONT), it writes nothing and stops.
#[test]
fn a_follower_serves_takes_over_from_a_paused_sequencer_and_the_old_one_is_fenced() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let agent = agent();
    let signer = Signer::new();
    let mut a = Server::start(&a_dir, &["--storage", &db]);
    let (mut acked, mut checkpoints) = (Vec::new(), Vec::new());
    let mut record = |r: (u64, String, String)| {
        acked.push((r.0, r.1));
        checkpoints.push(r.2);
        r.0
    };
    for i in 0..5 {
        record(append_v1(&agent, &a.url, &signer, &format!("before {i}")).unwrap());
    }
    // The follower shares the keys (a copy of A's data dir) and the database.
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let b = Server::start(&b_dir, &["--storage", &db]);
    assert_eq!(role(&agent, &a.url).as_deref(), Some("sequencer"));
    assert_eq!(role(&agent, &b.url).as_deref(), Some("follower"));
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex=3", b.url)).unwrap();
    assert_eq!(r.status, 200, "the follower serves the log: {}", r.text());
    let through_b = record(append_v1(&agent, &b.url, &signer, "through the follower").unwrap());
    assert_eq!(get(&agent, &format!("{}/api/v1/log/entries?logIndex={through_b}", a.url)).unwrap().status, 200);
    // An attestation goes through the queue with its entry: the sequencer serves it.
    let statement = br#"{"_type":"https://in-toto.io/Statement/v1","subject":[],"predicateType":"p","predicate":{}}"#;
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", b.url), &signer.v1_intoto_entry(statement)).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let uuid = r.header("etag").unwrap().to_string();
    let read = get(&agent, &format!("{}/api/v1/log/entries/{uuid}", a.url)).unwrap().json();
    assert_eq!(read[&uuid]["attestation"]["data"], signet_core::b64::encode(statement), "{read}");

    // SAFETY: signals to a child process this test started.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGSTOP) };
    let paused = Instant::now();
    // Taken at once, answered once B has taken over and logged it.
    record(append_v1(&agent, &b.url, &signer, "after the takeover").unwrap());
    let takeover = paused.elapsed();
    eprintln!("append answered {takeover:?} after SIGSTOP of the sequencer");
    assert!(takeover < Duration::from_secs(10), "the follower took {takeover:?} to take over");
    assert_eq!(role(&agent, &b.url).as_deref(), Some("sequencer"));

    // The old sequencer wakes: it must not write, and it stops by itself.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGCONT) };
    let woke = Instant::now();
    let status = loop {
        if let Some(s) = a.child.try_wait().unwrap() {
            break s;
        }
        // Whatever it answers meanwhile, it is never a new entry.
        if let Ok(r) = post_json(&agent, &format!("{}/api/v1/log/entries", a.url), &signer.v1_entry(b"to the old sequencer")) {
            assert_ne!(r.status, 201, "the fenced sequencer logged an entry: {}", r.text());
        }
        assert!(woke.elapsed() < Duration::from_secs(10), "the old sequencer did not stop");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!status.success(), "the old sequencer exited with {status}");
    a.kill();
    check_log(&agent, &b.url, &acked, &checkpoints);
}

/// Issue 18, "Sequencer kill": three instances under steady write load through all three;
/// the sequencer is SIGKILLed five times (and restarted, as a follower). Nothing acknowledged
/// is lost, every checkpoint is consistent with every later one, and writes resume within
/// 5 s of each kill.
#[test]
fn three_instances_survive_five_sequencer_kills_under_load() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("i{i}"))).collect();
    let mut servers = vec![Server::start(&dirs[0], &["--storage", &db])];
    for d in &dirs[1..] {
        let copy = signet(&["backup", "--data-dir", dirs[0].to_str().unwrap(), "--out", d.to_str().unwrap()]);
        assert!(copy.status.success(), "{copy:?}");
        servers.push(Server::start(d, &["--storage", &db]));
    }
    let urls: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(servers.iter().map(|s| s.url.clone()).collect()));
    let stop = Arc::new(AtomicBool::new(false));
    // When the request was sent, and what its 201 said.
    type Acks = Vec<(Instant, u64, String, String)>;
    let acks: Arc<Mutex<Acks>> = Arc::default();
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (urls, stop, acks) = (urls.clone(), stop.clone(), acks.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (agent(), Signer::new());
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let url = { let u = urls.lock().unwrap(); u[(w + n) % u.len()].clone() };
                    let sent = Instant::now();
                    match append_v1(&agent, &url, &signer, &format!("writer {w} entry {n}")) {
                        Ok((index, body, cp)) => acks.lock().unwrap().push((sent, index, body, cp)),
                        // A dead instance refuses at once; a fenced one answers 503.
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    let agent = agent();
    std::thread::sleep(Duration::from_secs(1));
    let mut resumed = Vec::new();
    for round in 0..5 {
        let s = (0..servers.len())
            .find(|&i| role(&agent, &servers[i].url).as_deref() == Some("sequencer"))
            .unwrap_or_else(|| panic!("round {round}: no instance says it sequences"));
        servers[s].kill();
        let killed = Instant::now();
        // Resumed: a request sent after the kill is acknowledged (it may wait, queued, for
        // the takeover).
        let after = loop {
            if acks.lock().unwrap().iter().any(|a| a.0 > killed) {
                break killed.elapsed();
            }
            assert!(killed.elapsed() < Duration::from_secs(20), "round {round}: writes did not resume");
            std::thread::sleep(Duration::from_millis(5));
        };
        eprintln!("round {round}: killed instance {s}; writes resumed after {after:?}");
        resumed.push(after);
        servers[s] = Server::start(&dirs[s], &["--storage", &db]);
        urls.lock().unwrap()[s] = servers[s].url.clone();
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            servers.iter().any(|x| role(&agent, &x.url).as_deref() == Some("sequencer")),
            "round {round}: writes resumed, yet no instance says it sequences"
        );
    }
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());
    // Followers poll every 50 ms: let them see the last checkpoint before their heads are read.
    std::thread::sleep(Duration::from_millis(300));

    let acks = acks.lock().unwrap();
    eprintln!("{} entries acknowledged across 5 sequencer kills", acks.len());
    assert!(acks.len() > 50, "too little load to mean anything: {}", acks.len());
    let acked: Vec<(u64, String)> = acks.iter().map(|a| (a.1, a.2.clone())).collect();
    let checkpoints: Vec<String> = acks.iter().map(|a| a.3.clone()).collect();
    for s in &servers {
        check_log(&agent, &s.url, &acked, &checkpoints);
    }
    for (round, after) in resumed.iter().enumerate() {
        assert!(*after < Duration::from_secs(5), "round {round}: writes resumed only after {after:?}");
    }
}

/// Issue 18, "PostgreSQL implements … the guard's tokens, bans": on a shared database, a
/// token made with `signet admin --storage` works on every instance, and its revocation
/// reaches all of them, without a restart.
#[test]
fn tokens_in_the_database_work_on_every_instance_and_revocation_reaches_all() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.auth]\nrequire = \"all\"\n").unwrap();
    let args = ["--storage", db.as_str(), "--config", config.to_str().unwrap()];
    let a = Server::start(&dir.path().join("a"), &args);
    let copy = signet(&["backup", "--data-dir", dir.path().join("a").to_str().unwrap(), "--out", dir.path().join("b").to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let b = Server::start(&dir.path().join("b"), &args);
    let admin = |what: &[&str]| {
        let mut all = vec!["admin", what[0], what[1], "--storage", db.as_str()];
        all.extend_from_slice(&what[2..]);
        let out = signet(&all);
        assert!(out.status.success(), "signet {all:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let token = admin(&["token", "create", "--role", "reader", "--name", "shared"]);
    assert!(token.starts_with("sgt_"), "{token}");
    let agent = agent();
    let status = |url: &str| get_bearer(&agent, &format!("{url}/api/v1/log"), &token).unwrap().status;
    let wait_for = |what: &str, check: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !check() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("both instances accept the token", &|| status(&a.url) == 200 && status(&b.url) == 200);
    assert!(admin(&["token", "list"]).contains("shared"));
    // Nothing of it in either data dir.
    for d in ["a", "b"] {
        let file = dir.path().join(d).join("guard.sqlite");
        assert!(!file.exists(), "{} exists beside a PostgreSQL store", file.display());
    }
    // A rotation: the new secret works on both, the old one on neither.
    let rotated = admin(&["token", "rotate", "shared"]);
    let status_of = |url: &str, t: &str| get_bearer(&agent, &format!("{url}/api/v1/log"), t).unwrap().status;
    wait_for("both instances take the rotated token and refuse the old one", &|| {
        [&a.url, &b.url].iter().all(|u| status_of(u, &rotated) == 200 && status_of(u, &token) == 401)
    });
    admin(&["token", "revoke", "shared"]);
    wait_for("both instances refuse the revoked token", &|| status_of(&a.url, &rotated) == 401 && status_of(&b.url, &rotated) == 401);
    let out = signet(&["admin", "token", "rotate", "--storage", db.as_str(), "shared"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is revoked"), "{out:?}");
    // A scope is stored with the token and binds on every instance.
    let scoped = admin(&["token", "create", "--role", "reader", "--name", "elsewhere", "--network", "192.0.2.0/24"]);
    assert!(admin(&["token", "list"]).contains("192.0.2.0/24"));
    wait_for("both instances refuse the token outside its network", &|| {
        [&a.url, &b.url].iter().all(|u| {
            let r = get_bearer(&agent, &format!("{u}/api/v1/log"), &scoped).unwrap();
            r.status == 403 && r.text().contains("out of scope")
        })
    });
}

/// Runs one query on `url` from a thread of its own and returns the first column of its
/// only row, as text.
pub(crate) fn query_text(url: &str, sql: &str) -> String {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            client.query_one(&sql, &[]).await.unwrap().get::<_, String>(0)
        })
    })
    .join()
    .unwrap()
}

/// A CA and a certificate it issued for 127.0.0.1, made with the openssl CLI.
fn make_certs(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let [ca_key, ca, key, csr, cert, ext] =
        ["ca.key", "ca.pem", "server.key", "server.csr", "server.crt", "ext.cnf"].map(|f| dir.join(format!("{name}-{f}")));
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).output().expect("openssl (scripts/install-deps installs it)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    openssl(&["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", &format!("/CN={name} test CA"), "-keyout", &s(&ca_key), "-out", &s(&ca)]);
    openssl(&["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", &s(&key), "-out", &s(&csr)]);
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    openssl(&["x509", "-req", "-in", &s(&csr), "-CA", &s(&ca), "-CAkey", &s(&ca_key), "-CAcreateserial", "-days", "2", "-extfile", &s(&ext), "-out", &s(&cert)]);
    (ca, cert, key)
}

/// TLS to PostgreSQL: with `sslmode=require` and the server's CA, signet (the logs and the
/// guard) connects over verified TLS; with another CA it refuses to connect, saying why.
#[test]
fn postgres_over_verified_tls_and_a_wrong_ca_is_refused() {
    if postgres_database().is_none() {
        return;
    }
    let cluster = OwnCluster::start();
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(certs.path(), "right");
    let (other_ca, _, _) = make_certs(certs.path(), "other");
    // The server's certificate and key, owned by the server's user (scripts/services runs it as postgres).
    let pgdata = cluster.dir.path().join("postgres");
    std::fs::copy(&cert, pgdata.join("server.crt")).unwrap();
    std::fs::copy(&key, pgdata.join("server.key")).unwrap();
    for f in ["server.crt", "server.key"] {
        assert!(Command::new("chown").arg("postgres:postgres").arg(pgdata.join(f)).status().unwrap().success());
        assert!(Command::new("chmod").arg("600").arg(pgdata.join(f)).status().unwrap().success());
    }
    psql(&cluster.url, "ALTER SYSTEM SET ssl = on");
    psql(&cluster.url, "SELECT pg_reload_conf()");
    std::thread::sleep(Duration::from_millis(500));

    let tls_url = format!("{}?sslmode=require&sslrootcert={}", cluster.url, ca.display());
    let migrated = signet(&["migrate", "--storage", &tls_url]);
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--storage", &tls_url]);
    let r = post_json(&agent(), &format!("{}/api/v1/log/entries", server.url), &Signer::new().v1_entry(b"over TLS")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let encrypted = query_text(
        &cluster.url,
        "SELECT count(*)::text FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.usename = 'signet' AND s.ssl",
    );
    assert!(encrypted.parse::<u32>().unwrap() >= 2, "signet's connections are TLS: {encrypted} are");

    let wrong = signet(&["migrate", "--storage", &format!("{}?sslmode=require&sslrootcert={}", cluster.url, other_ca.display())]);
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success(), "a server whose certificate does not chain to the given CA was accepted");
    assert!(err.contains("certificate verify failed"), "{err}");
}

/// A follower signs too: `signet sign-bundle` against it gets a certificate (whose SCT comes
/// from the CT log, sequenced by the other instance), a log entry and a timestamp, and the
/// bundle verifies against the trust documents.
#[test]
fn a_follower_signs_a_bundle_that_verifies() {
    let Some(db) = postgres_database() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    let _a = Server::start(&a_dir, &["--storage", &db]);
    let copy = signet(&["backup", "--data-dir", a_dir.to_str().unwrap(), "--out", b_dir.to_str().unwrap()]);
    assert!(copy.status.success(), "{copy:?}");
    let b = Server::start(&b_dir, &["--storage", &db]);
    assert_eq!(role(&agent(), &b.url).as_deref(), Some("follower"));
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (trust, artifact, bundle) = (dir.path().join("trust"), dir.path().join("artifact.txt"), dir.path().join("artifact.sigstore.json"));
    let out = signet(&["trust", "export", "--data-dir", &path(&b_dir), "--out", &path(&trust)]);
    assert!(out.status.success(), "{out:?}");
    let token = signet(&["dev-token", "--data-dir", &path(&b_dir), "--subject", "you@example.com"]);
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    std::fs::write(&artifact, b"signed through a follower\n").unwrap();
    let (config, root) = (path(&trust.join("signing_config.json")), path(&trust.join("trusted_root.json")));
    let signed = signet(&["sign-bundle", "--identity-token", &token, "--signing-config", &config, "--trusted-root", &root, "--bundle", &path(&bundle), &path(&artifact)]);
    assert!(signed.status.success(), "{}", String::from_utf8_lossy(&signed.stderr));
    let issuer = format!("{}/oidc", b.url);
    let verified = signet(&[
        "verify-bundle", "--bundle", &path(&bundle), "--trusted-root", &root,
        "--certificate-identity", "you@example.com", "--certificate-oidc-issuer", &issuer, &path(&artifact),
    ]);
    assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stderr));
}

/// Issue 41, the fault suite: three instances, writers on all of them, and a seeded schedule of
/// faults (lost and late COMMIT answers, cut connections, a black hole, SIGSTOP mid-commit,
/// SIGKILL, a skewed clock, PostgreSQL stopped or crashed and restarted, its disk full), then the log's
/// invariants checked from outside ([`chaos`]). CI runs the fixed
/// seeds; `scripts/chaos` runs any seeds, for as long as asked (`SIGNET_CHAOS_SEEDS`,
/// `SIGNET_CHAOS_SECONDS`).
#[test]
fn the_log_never_forks_under_seeded_faults() {
    if postgres_database().is_none() {
        return;
    }
    let seeds: Vec<u64> = match std::env::var("SIGNET_CHAOS_SEEDS") {
        Ok(list) => list.split(',').map(|s| s.trim().parse().expect("SIGNET_CHAOS_SEEDS: comma-separated integers")).collect(),
        Err(_) => chaos::CI_SEEDS.to_vec(),
    };
    let seconds = std::env::var("SIGNET_CHAOS_SECONDS").map_or(30, |s| s.parse().expect("SIGNET_CHAOS_SECONDS: an integer"));
    for seed in seeds {
        // A cluster of its own, on a disk of its own where one can be mounted: the schedule
        // restarts and crashes it, and fills its disk.
        let disk = crate::failures::SmallDisk::mount_with_mode("1G", "0755");
        let cluster = match &disk {
            Some(d) => OwnCluster::start_in(d.path()),
            None => OwnCluster::start(),
        };
        let fill = |hold: Duration| {
            let Some(d) = &disk else { return false };
            let ballast = d.fill();
            std::thread::sleep(hold);
            std::fs::remove_file(ballast).unwrap();
            // PostgreSQL stops when it cannot write its WAL and may fail its recovery while
            // the disk is still full: an operator frees space and starts it again.
            if !cluster.running() {
                cluster.pg_ctl(&["start"]);
            }
            true
        };
        let database = chaos::Database {
            url: &cluster.url,
            down: &|crash| cluster.pg_ctl(&[if crash { "crash" } else { "stop" }]),
            up: &|| cluster.pg_ctl(&["start"]),
            fill: &fill,
        };
        let outcome = chaos::run(&database, seed, Duration::from_secs(seconds));
        let (mut resumed, mut outage) = (outcome.resumed.clone(), outcome.outage.clone());
        resumed.sort();
        outage.sort();
        eprintln!(
            "seed {seed}: {} faults, {} appends acknowledged; after a fault's end writes resumed in (median, max) {:?}, {:?}; \
             the longest stretch without an acknowledgement (median, max) {:?}, {:?}",
            outcome.faults.len(),
            outcome.acked,
            resumed.get(resumed.len() / 2),
            resumed.last(),
            outage.get(outage.len() / 2),
            outage.last()
        );
        let (count, seconds) = outcome.reconciles;
        if count > 0 {
            eprintln!("seed {seed}: {count} reconciles after commits whose outcome was unknown, {:.1} ms each on average", seconds * 1000.0 / count as f64);
        }
        let mut worst: Vec<(Duration, &String)> = outcome.outage.iter().copied().zip(&outcome.faults).collect();
        worst.sort_by(|a, b| b.0.cmp(&a.0));
        for (gap, what) in worst.iter().take(3) {
            eprintln!("seed {seed}: {gap:.2?} without an acknowledgement during {what}");
        }
    }
}
