//! Failures survived (issue 18): a full disk under the data dir, and offered load far past
//! what one instance can serve.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A size-limited tmpfs mounted for one test, unmounted when dropped.
pub(crate) struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` where mounting is not allowed (not root); under CI, where it always is, that
    /// is a failure rather than a skip.
    pub(crate) fn mount(size: &str) -> Option<SmallDisk> {
        Self::mount_with_mode(size, "0700")
    }

    /// [`SmallDisk::mount`] with the mount's root at `mode` (0755 lets PostgreSQL's own user
    /// reach its data dir inside).
    pub(crate) fn mount_with_mode(size: &str, mode: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode={mode}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root and must be able to mount a tmpfs");
            eprintln!("cannot mount a tmpfs here (not root?): disk-full case skipped");
            return None;
        }
        Some(SmallDisk { dir })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk with a file and returns its path.
    pub(crate) fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

fn append(agent: &ureq::Agent, url: &str, signer: &Signer, what: &str) -> Reply {
    post_json(agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(what.as_bytes())).unwrap()
}

/// Today a full disk gave 500 "storage failed … database or disk is full". Now: writes
/// get 507 naming the cause, reads go on, nothing acknowledged is lost, and writes resume by
/// themselves once space returns.
#[test]
fn a_full_disk_refuses_writes_with_507_and_heals_by_itself() {
    let Some(disk) = SmallDisk::mount("24m") else { return };
    let data = disk.path().join("data");
    let mut server = Server::start(&data, &[]);
    let (agent, signer) = (agent(), Signer::new());
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let r = append(&agent, &server.url, &signer, &format!("before {i}"));
        assert_eq!(r.status, 201, "{}", r.text());
        acknowledged.push(r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap());
    }

    let filler = disk.fill();
    let mut refused = 0;
    for i in 0..20 {
        let r = append(&agent, &server.url, &signer, &format!("while full {i}"));
        match r.status {
            // A commit may still fit in the last free pages.
            201 => acknowledged.push(r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap()),
            507 => {
                refused += 1;
                assert!(r.text().contains("storage is full"), "{}", r.text());
            }
            other => panic!("a full disk answered {other}: {}", r.text()),
        }
    }
    assert!(refused > 0, "the disk never filled");
    // Reads go on.
    assert_eq!(get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, acknowledged[0])).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get(&agent, &format!("{}/healthz", server.url)).unwrap().status, 200);

    std::fs::remove_file(filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = append(&agent, &server.url, &signer, "after space returned");
        if r.status == 201 {
            acknowledged.push(r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap());
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume: {} {}", r.status, r.text());
        std::thread::sleep(Duration::from_millis(100));
    }

    // Nothing acknowledged was lost, and the store is intact: a restart opens it and serves all.
    server.kill();
    let server = Server::start(&data, &[]);
    for index in acknowledged {
        let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={index}", server.url)).unwrap();
        assert_eq!(r.status, 200, "acknowledged entry {index} is gone after the disk filled");
    }
}

/// Issue 18, "Overload": past `log.max_pending_appends`, appends are refused at once with
/// 503 and Retry-After instead of queueing into client timeouts, every other answer is a
/// normal one, and the instance is healthy right after.
#[test]
fn appends_past_the_admission_bound_are_shed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[log]\nmax_pending_appends = 4\nbatch_max_delay_ms = 200\n").unwrap();
    let server = Server::start(&dir.path().join("data"), &["--config", config.to_str().unwrap()]);
    let answers: Vec<(u16, Option<String>, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..48)
            .map(|t| {
                let url = server.url.clone();
                s.spawn(move || {
                    let (agent, signer) = (agent(), Signer::new());
                    let r = append(&agent, &url, &signer, &format!("burst {t}"));
                    (r.status, r.header("retry-after").map(str::to_string), r.text())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let shed: Vec<_> = answers.iter().filter(|a| a.0 == 503).collect();
    assert!(!shed.is_empty(), "48 concurrent appends against a bound of 4 shed none");
    assert!(answers.iter().any(|a| a.0 == 201), "nothing was admitted");
    for (status, retry_after, text) in &answers {
        match status {
            201 => {}
            503 => {
                assert_eq!(retry_after.as_deref(), Some("1"), "{text}");
                assert!(text.contains("at capacity (4 appends waiting)"), "{text}");
            }
            other => panic!("an overloaded log answered {other}: {text}"),
        }
    }
    // Healthy right after: ready, and the next append is admitted.
    let agent = agent();
    assert_eq!(get(&agent, &format!("{}/readyz", server.url)).unwrap().status, 200);
    let r = append(&agent, &server.url, &Signer::new(), "after the burst");
    assert_eq!(r.status, 201, "{}", r.text());
}

/// Issue 18, "Also PostgreSQL's own disk full": the database's tablespace sits on a small
/// filesystem that fills. Appends get 507 with PostgreSQL's reason, reads go on, and writes
/// resume by themselves once space returns; nothing acknowledged is lost.
#[test]
fn a_full_postgresql_disk_refuses_writes_with_507_and_heals_by_itself() {
    let Some(server_url) = std::env::var("SIGNET_TEST_POSTGRES").ok().filter(|u| !u.is_empty()) else {
        assert!(std::env::var("SIGNET_TEST_REQUIRE_POSTGRES").as_deref() != Ok("1"), "SIGNET_TEST_POSTGRES is not set");
        return;
    };
    let Some(disk) = SmallDisk::mount("24m") else { return };
    // The tablespace's directory belongs to the server's own user (scripts/services runs it as postgres).
    let location = disk.path().join("pg");
    std::fs::create_dir(&location).unwrap();
    let owned = Command::new("chown").args(["-R", "postgres:postgres"]).arg(disk.path()).status().unwrap();
    assert!(owned.success());
    let name = format!("signet_full_{}", std::process::id());
    psql(&server_url, &format!("CREATE TABLESPACE {name} LOCATION '{}'", location.display()));
    psql(&server_url, &format!("CREATE DATABASE {name} TABLESPACE {name}"));
    let db = format!("{}/{name}", &server_url[..server_url.rfind('/').unwrap()]);

    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--storage", &db]);
    let (agent, signer) = (agent(), Signer::new());
    let index_of = |r: &Reply| r.json().as_object().unwrap().values().next().unwrap()["logIndex"].as_u64().unwrap();
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let r = append(&agent, &server.url, &signer, &format!("before {i}"));
        assert_eq!(r.status, 201, "{}", r.text());
        acknowledged.push(index_of(&r));
    }
    let filler = disk.fill();
    let mut refused = 0;
    for i in 0..400 {
        let r = append(&agent, &server.url, &signer, &format!("while full {i}"));
        match r.status {
            // Pages PostgreSQL had already allocated still take rows.
            201 => acknowledged.push(index_of(&r)),
            507 => {
                refused += 1;
                assert!(r.text().contains("storage is full") && r.text().contains("PostgreSQL"), "{}", r.text());
                if refused >= 3 {
                    break;
                }
            }
            other => panic!("a full database disk answered {other}: {}", r.text()),
        }
    }
    assert!(refused > 0, "the database's disk never filled");
    assert_eq!(get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().status, 200);
    let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, acknowledged[0])).unwrap();
    assert_eq!(r.status, 200, "reads go on: {}", r.text());

    std::fs::remove_file(filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = append(&agent, &server.url, &signer, "after space returned");
        if r.status == 201 {
            acknowledged.push(index_of(&r));
            break;
        }
        assert!(Instant::now() < deadline, "writes did not resume: {} {}", r.status, r.text());
        std::thread::sleep(Duration::from_millis(100));
    }
    for index in &acknowledged {
        let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={index}", server.url)).unwrap();
        assert_eq!(r.status, 200, "acknowledged entry {index} is gone after the database's disk filled");
    }
    server.kill();
    psql(&server_url, &format!("DROP DATABASE {name}"));
    psql(&server_url, &format!("DROP TABLESPACE {name}"));
}
