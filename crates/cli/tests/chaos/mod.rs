//! The fault suite (issue 41): three instances on one PostgreSQL behind haproxy, writers of both Rekor APIs on
//! all of them and through haproxy the whole time, readers that keep every checkpoint any instance serves, and faults from a seeded
//! schedule: a COMMIT's answer lost after the server ran it, a COMMIT delivered late, connections
//! cut mid-transaction, latency and a black hole to the database, SIGSTOP (mid-commit too),
//! SIGKILL, a clock 15 minutes off (libfaketime), and the database itself restarted or crashed,
//! or its disk full (the run's own PostgreSQL cluster on a tmpfs of its own, so no other test
//! sees it go). Afterwards the log's promises are checked from outside, with the checker's own Merkle
//! code ([`rfc6962`]): nothing acknowledged is lost or moved, no index holds two entries, every
//! checkpoint served is a prefix of the final tree and no size has two roots, `integratedTime`
//! never goes backwards, the instances agree, and writes resume within a bound after each fault.
//! The Rekor v2 log is checked the same way, read through its tiles as a witness would read it.
//!
//! Each run is reproducible from its seed: `scripts/chaos --seed N`. A seed that fails is a
//! regression test: add it to [`CI_SEEDS`].

pub mod proxy;
pub mod rfc6962;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::common::*;
use proxy::{CommitFault, PgProxy};
use rfc6962::Hash;

/// The seeds CI runs: short, fixed, and each a whole schedule.
pub const CI_SEEDS: &[u64] = &[1, 2];

/// After a fault ends, an append sent through a live instance is acknowledged within this.
/// The lease lives 3 s; a takeover is a lease lifetime plus a catch-up.
pub const RESUME_BOUND: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The next COMMIT runs on the server; its answer never reaches the instance.
    LoseCommitAnswer,
    /// The next COMMIT reaches the server this much later (past the commit deadline or not).
    DelayCommit(Duration),
    /// Every connection to the database cut, mid-transaction or not.
    ResetConnections,
    /// Nothing moves between the instance and the database for a while, then all of it does.
    BlackHole(Duration),
    /// Each message to or from the database this much later, for 3 s.
    Latency(Duration),
    /// SIGSTOP while a COMMIT is on its way to the server, SIGCONT after this long.
    PauseMidCommit(Duration),
    /// SIGSTOP at whatever point the instance is, SIGCONT after this long.
    Pause(Duration),
    /// SIGKILL, and a restart.
    Kill,
    /// A restart with the wall clock this many minutes off (libfaketime), for the rest of the run.
    Skew(i64),
    /// PostgreSQL stopped (fast: transactions rolled back; or crashed: no checkpoint, WAL
    /// replayed at start) and started again after this long. Every instance loses its
    /// connections at once.
    DatabaseRestart { crash: bool, down: Duration },
    /// The database's disk full for this long, then freed (and PostgreSQL started again if
    /// it stopped).
    DiskFull(Duration),
}

impl Fault {
    fn pick(rng: &mut StdRng) -> Fault {
        let secs = |rng: &mut StdRng, lo: u64, hi: u64| Duration::from_millis(rng.random_range(lo * 1000..=hi * 1000));
        match rng.random_range(0..11) {
            0 => Fault::LoseCommitAnswer,
            1 => Fault::DelayCommit(if rng.random_bool(0.3) { secs(rng, 16, 18) } else { secs(rng, 1, 4) }),
            2 => Fault::ResetConnections,
            3 => Fault::BlackHole(secs(rng, 1, 6)),
            4 => Fault::Latency(Duration::from_millis(rng.random_range(10..=80))),
            5 => Fault::PauseMidCommit(secs(rng, 1, 6)),
            6 => Fault::Pause(secs(rng, 1, 6)),
            7 => Fault::Kill,
            8 => Fault::Skew(if rng.random_bool(0.5) { 15 } else { -15 }),
            9 => Fault::DatabaseRestart { crash: rng.random_bool(0.5), down: Duration::from_millis(rng.random_range(200..=3000)) },
            _ => Fault::DiskFull(secs(rng, 1, 3)),
        }
    }
}

struct Instance {
    dir: PathBuf,
    /// The instance listens here across restarts, so that haproxy's server lines stay right.
    port: u16,
    proxy: PgProxy,
    storage: String,
    server: Option<Server>,
    /// Minutes the instance's wall clock is off, once a `Skew` fault set it.
    skew: i64,
}

impl Instance {
    fn start(&mut self) {
        let listen = format!("127.0.0.1:{}", self.port);
        if self.skew == 0 {
            self.server = Some(Server::start_on(&self.dir, &listen, &["--storage", &self.storage]));
            return;
        }
        // libfaketime preloaded into signet itself (the `faketime` wrapper would fork, and the
        // signals would reach the wrapper). Only the wall clock: a monotonic clock moved back
        // 15 minutes can go below zero on a machine booted minutes ago.
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_signet"));
        command
            .env("LD_PRELOAD", libfaketime())
            .env("FAKETIME", format!("{:+}m", self.skew))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .args(["serve", "--dev", "--plain-http", "--listen", &listen, "--data-dir"])
            .arg(&self.dir)
            .args(["--storage", &self.storage]);
        self.server = Some(Server::spawn(command, &self.dir));
    }

    fn pid(&self) -> i32 {
        self.server.as_ref().map_or(0, |s| s.child.id() as i32)
    }

    fn signal(&self, sig: i32) {
        // SAFETY: a signal to a child process this test started.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Restarts the process if it has exited (a fenced sequencer stops by itself).
    fn revive(&mut self) -> bool {
        let exited = self.server.as_mut().is_none_or(|s| s.child.try_wait().ok().flatten().is_some());
        if exited {
            self.start();
        }
        exited
    }

    fn url(&self) -> Option<String> {
        self.server.as_ref().map(|s| s.url.clone())
    }
}

/// Debian's libfaketime for threaded programs (`scripts/install-deps` installs `faketime`).
fn libfaketime() -> PathBuf {
    std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("faketime/libfaketimeMT.so.1"))
        .find(|p| p.exists())
        .expect("libfaketime is not installed: run scripts/install-deps (Debian's faketime)")
}

/// One acknowledged append, as its 201 said it.
struct Ack {
    sent: Instant,
    answered: Instant,
    /// A Rekor v2 entry (else v1): the two logs are checked apart.
    v2: bool,
    index: u64,
    /// Base64 of the entry as logged.
    body: String,
    integrated_time: i64,
    checkpoint: String,
    proof: (u64, Hash, Vec<Hash>),
}

fn short_agent() -> ureq::Agent {
    // A request to a paused instance must not hold its writer for long.
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(5))).build().into()
}

fn hash_of(v: &Value) -> Hash {
    hex32(v.as_str().unwrap_or_default())
}

fn append(agent: &ureq::Agent, url: &str, signer: &Signer, what: &str) -> Option<Ack> {
    let sent = Instant::now();
    let r = post_json(agent, &format!("{url}/api/v1/log/entries"), &signer.v1_entry(what.as_bytes())).ok()?;
    if r.status != 201 {
        return None;
    }
    let map = r.json();
    let e = map.as_object()?.values().next()?.clone();
    let p = &e["verification"]["inclusionProof"];
    Some(Ack {
        sent,
        answered: Instant::now(),
        v2: false,
        index: e["logIndex"].as_u64()?,
        body: e["body"].as_str()?.to_string(),
        integrated_time: e["integratedTime"].as_i64()?,
        checkpoint: p["checkpoint"].as_str()?.to_string(),
        proof: (p["treeSize"].as_u64()?, hash_of(&p["rootHash"]), p["hashes"].as_array()?.iter().map(hash_of).collect()),
    })
}

fn b64_hash(v: &Value) -> Option<Hash> {
    signet_core::b64::decode(v.as_str()?).ok()?.try_into().ok()
}

fn append_v2(agent: &ureq::Agent, url: &str, signer: &Signer, what: &str) -> Option<Ack> {
    let sent = Instant::now();
    let r = post_json(agent, &format!("{url}/api/v2/log/entries"), &signer.v2_entry(what.as_bytes())).ok()?;
    if r.status != 201 {
        return None;
    }
    let e = r.json();
    let p = &e["inclusionProof"];
    Some(Ack {
        sent,
        answered: Instant::now(),
        v2: true,
        index: e["logIndex"].as_str()?.parse().ok()?,
        body: e["canonicalizedBody"].as_str()?.to_string(),
        integrated_time: 0,
        checkpoint: p["checkpoint"]["envelope"].as_str()?.to_string(),
        proof: (p["treeSize"].as_str()?.parse().ok()?, b64_hash(&p["rootHash"])?, p["hashes"].as_array()?.iter().map(b64_hash).collect::<Option<_>>()?),
    })
}

fn role(agent: &ureq::Agent, url: &str) -> Option<String> {
    get(agent, &format!("{url}/readyz")).ok()?.json()["role"].as_str().map(str::to_string)
}

fn upstream(db: &str) -> SocketAddr {
    let authority = db.split_once("://").unwrap().1.split('/').next().unwrap();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port.parse().unwrap_or_else(|_| panic!("the test PostgreSQL is not at an IP address and port: {host_port}"))
}

/// What one run measured, for the report.
pub struct Outcome {
    pub acked: usize,
    pub faults: Vec<String>,
    /// From each fault's end to the first acknowledgement of an append sent after it.
    pub resumed: Vec<Duration>,
    /// The longest time without any acknowledgement, from each fault's start to its resumption.
    pub outage: Vec<Duration>,
    /// Reconciles after commits whose outcome was unknown, by the instances alive at the end
    /// (a restart forgets its count): how many, and their total seconds.
    pub reconciles: (u64, f64),
}

/// The database the cluster runs on: its URL, how to take it down (`crash`: as a power cut
/// would) and bring it back on the same port, and how to fill its disk for a while (`false`
/// where its disk cannot be filled: the fault is then skipped).
pub struct Database<'a> {
    pub url: &'a str,
    pub down: &'a dyn Fn(bool),
    pub up: &'a dyn Fn(),
    pub fill: &'a dyn Fn(Duration) -> bool,
}

/// Runs the cluster under `seed`'s schedule for `length`, then checks the log from outside.
pub fn run(database: &Database<'_>, seed: u64, length: Duration) -> Outcome {
    let db = database.url;
    let mut rng = StdRng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let to = upstream(db);
    let mut instances: Vec<Instance> = (0..3)
        .map(|i| {
            let proxy = PgProxy::start(to);
            let storage = proxy.url_for(db);
            Instance { dir: root.path().join(format!("i{i}")), port: crate::haproxy::free_port(), proxy, storage, server: None, skew: 0 }
        })
        .collect();
    instances[0].start();
    for i in 1..instances.len() {
        // The others share the first one's keys (a copy of its data dir) and the database.
        let copy = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
            .args(["backup", "--data-dir"])
            .arg(&instances[0].dir)
            .arg("--out")
            .arg(&instances[i].dir)
            .output()
            .unwrap();
        assert!(copy.status.success(), "{copy:?}");
        instances[i].start();
    }
    // haproxy in front of the three (deploy/haproxy.cfg), as a deployment has it: two more
    // writers and the reader go through it, and it must route around every fault.
    let front = crate::haproxy::haproxy_binary().map(|bin| {
        let backends: Vec<String> = instances.iter().map(|i| format!("127.0.0.1:{}", i.port)).collect();
        crate::haproxy::Haproxy::start(bin, [&backends[0], &backends[1], &backends[2]])
    });
    let front_url = front.as_ref().map(|f| f.1.clone());
    let through_haproxy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let urls: Arc<Mutex<Vec<Option<String>>>> = Arc::new(Mutex::new(instances.iter().map(Instance::url).collect()));
    let stop = Arc::new(AtomicBool::new(false));
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let served: Arc<Mutex<Vec<(bool, String)>>> = Arc::default();

    // Two writers per instance, each keeping to its own: a writer stuck on a paused instance
    // does not hide whether the others can write. One of each two writes Rekor v1 entries, the
    // other Rekor v2's: the two logs share the sequencer, its lease and its commits. Writers 6
    // (v1) and 7 (v2) go through haproxy.
    let writer_count = if front.is_some() { 8 } else { 6 };
    let writers: Vec<_> = (0..writer_count)
        .map(|w| {
            let (urls, stop, acks, front_url, through_haproxy) = (urls.clone(), stop.clone(), acks.clone(), front_url.clone(), through_haproxy.clone());
            std::thread::spawn(move || {
                let (agent, signer) = (short_agent(), Signer::new());
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let url = if w < 6 { urls.lock().unwrap()[w % 3].clone() } else { front_url.clone() };
                    let what = format!("seed {seed} writer {w} entry {n}");
                    let append = if w < 3 || w == 6 { append } else { append_v2 };
                    match url.and_then(|u| append(&agent, &u, &signer, &what)) {
                        Some(ack) => {
                            if w >= 6 {
                                through_haproxy.fetch_add(1, Ordering::Relaxed);
                            }
                            acks.lock().unwrap().push(ack)
                        }
                        None => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        })
        .collect();
    let reader = {
        let (urls, stop, served, front_url) = (urls.clone(), stop.clone(), served.clone(), front_url.clone());
        std::thread::spawn(move || {
            let agent = short_agent();
            while !stop.load(Ordering::Relaxed) {
                let now: Vec<Option<String>> = urls.lock().unwrap().iter().cloned().chain([front_url.clone()]).collect();
                for url in now.into_iter().flatten() {
                    if let Ok(r) = get(&agent, &format!("{url}/api/v1/log")) {
                        if let Some(note) = (r.status == 200).then(|| r.json()["signedTreeHead"].as_str().map(str::to_string)).flatten() {
                            served.lock().unwrap().push((false, note));
                        }
                    }
                    if let Ok(r) = get(&agent, &format!("{url}/api/v2/checkpoint")) {
                        if r.status == 200 {
                            served.lock().unwrap().push((true, r.text()));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let agent = short_agent();
    let started = Instant::now();
    let (mut faults, mut resumed, mut windows) = (Vec::new(), Vec::new(), Vec::new());
    let (mut aimed_at_commits, mut commits_hit) = (0, 0);
    std::thread::sleep(Duration::from_secs(1));
    while started.elapsed() < length {
        let fault = Fault::pick(&mut rng);
        // Mostly the sequencer: that is where a fault can fork the log.
        let sequencer = instances.iter().position(|i| i.url().is_some_and(|u| role(&agent, &u).as_deref() == Some("sequencer")));
        let target = match sequencer {
            Some(s) if rng.random_bool(0.75) => s,
            _ => rng.random_range(0..instances.len()),
        };
        let at = started.elapsed();
        let began = Instant::now();
        let (ended, hit) = inject(&mut instances[target], database, fault);
        if matches!(fault, Fault::LoseCommitAnswer | Fault::DelayCommit(_) | Fault::PauseMidCommit(_)) && Some(target) == sequencer {
            aimed_at_commits += 1;
            commits_hit += usize::from(hit);
        }
        urls.lock().unwrap()[target] = instances[target].url();
        // Resumed: an append sent after the fault ended is acknowledged.
        let after = loop {
            if acks.lock().unwrap().iter().any(|a| a.sent > ended) {
                break ended.elapsed();
            }
            if ended.elapsed() > Duration::from_secs(30) {
                break ended.elapsed();
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let what = format!("{:>6.1}s {fault:?} on instance {target}{}: writes resumed after {after:.2?}", at.as_secs_f64(), if Some(target) == sequencer { " (the sequencer)" } else { "" });
        eprintln!("seed {seed}: {what}");
        faults.push(what);
        resumed.push(after);
        windows.push((began, ended + after));
        for (i, instance) in instances.iter_mut().enumerate() {
            if instance.revive() {
                eprintln!("seed {seed}: instance {i} had stopped (fenced or killed); restarted");
                urls.lock().unwrap()[i] = instance.url();
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
    }
    stop.store(true, Ordering::Relaxed);
    writers.into_iter().for_each(|h| h.join().unwrap());
    reader.join().unwrap();
    for instance in &mut instances {
        instance.revive();
    }

    let acks = std::mem::take(&mut *acks.lock().unwrap());
    let served = std::mem::take(&mut *served.lock().unwrap());
    let urls: Vec<String> = instances.iter().filter_map(Instance::url).collect();
    let v2_spki = signet_keys::Signer::load_or_generate(&instances[0].dir.join("keys/rekor-v2.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap().spki_der().to_vec();
    let (v1_acks, v2_acks): (Vec<Ack>, Vec<Ack>) = acks.into_iter().partition(|a| !a.v2);
    let (v1_served, v2_served): (Vec<(bool, String)>, Vec<(bool, String)>) = served.into_iter().partition(|s| !s.0);
    let v1_served: Vec<String> = v1_served.into_iter().map(|s| s.1).collect();
    let v2_served: Vec<String> = v2_served.into_iter().map(|s| s.1).collect();
    // The harness is the instances' process manager (systemd's `Restart=` in production): a
    // sequencer fenced while the log is checked stops, and is restarted as a follower. One that
    // runs but does not answer still fails the check.
    let checked = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let _done = SetOnDrop(&checked);
        scope.spawn(|| {
            while !checked.load(Ordering::Relaxed) {
                for (i, instance) in instances.iter_mut().enumerate() {
                    if instance.revive() {
                        eprintln!("seed {seed}: instance {i} stopped while the log was checked (fenced?); restarted");
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        check(&agent, &urls, &v1_acks, &v1_served);
        check_v2(&agent, &urls, &v2_acks, &v2_served, &v2_spki);
    });
    let acks: Vec<Ack> = v1_acks.into_iter().chain(v2_acks).collect();
    let reconciles = reconciles(&agent, &urls);
    // A sequencer under write load commits many times a second: a proxy that never finds its
    // COMMIT no longer recognises them, and the suite would test nothing.
    assert!(aimed_at_commits == 0 || commits_hit > 0, "seed {seed}: {aimed_at_commits} faults aimed at the sequencer's COMMITs and none found one");
    for (what, after) in faults.iter().zip(&resumed) {
        assert!(*after <= RESUME_BOUND, "seed {seed}: writes did not resume within {RESUME_BOUND:?}: {what}");
    }
    let (commits, lost): (u64, u64) = instances.iter().map(|i| i.proxy.counts()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let via = through_haproxy.load(Ordering::Relaxed);
    eprintln!("seed {seed}: {} appends acknowledged ({via} through haproxy), {commits} COMMITs through the proxies, {lost} answers lost", acks.len());
    assert!(front.is_none() || via > 0, "seed {seed}: no append through haproxy was acknowledged");
    drop(front);
    let mut answered: Vec<Instant> = acks.iter().map(|a| a.answered).collect();
    answered.sort();
    let outage = windows.iter().map(|&(from, to)| longest_gap(&answered, from, to)).collect();
    Outcome { acked: acks.len(), faults, resumed, outage, reconciles }
}

/// (how many, their total seconds) of the reconciles the live instances did since they
/// started, from their `/metrics`.
fn reconciles(agent: &ureq::Agent, urls: &[String]) -> (u64, f64) {
    let (mut count, mut seconds) = (0u64, 0f64);
    for url in urls {
        let Ok(r) = get(agent, &format!("{url}/metrics")) else { continue };
        for line in r.text().lines() {
            let value = line.rsplit(' ').next().unwrap_or("");
            if line.starts_with("signet_log_reconcile_seconds_count") {
                count += value.parse::<u64>().unwrap_or(0);
            } else if line.starts_with("signet_log_reconcile_seconds_sum") {
                seconds += value.parse::<f64>().unwrap_or(0.0);
            }
        }
    }
    (count, seconds)
}

/// The longest stretch of `[from, to]` in which no append was acknowledged.
fn longest_gap(answered: &[Instant], from: Instant, to: Instant) -> Duration {
    let inside = answered.iter().copied().filter(|t| *t > from && *t < to);
    let (mut last, mut longest) = (from, Duration::ZERO);
    for t in inside.chain(std::iter::once(to)) {
        longest = longest.max(t - last);
        last = t;
    }
    longest
}

/// Injects `fault` into `instance`; returns when it ended, and whether a fault aimed at a
/// COMMIT found one.
fn inject(instance: &mut Instance, database: &Database<'_>, fault: Fault) -> (Instant, bool) {
    let proxy = &instance.proxy;
    let wait_for_commit = |proxy: &PgProxy| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while proxy.armed() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        // A follower may commit nothing in that time.
        let hit = !proxy.armed();
        proxy.disarm();
        hit
    };
    let mut hit = false;
    match fault {
        Fault::LoseCommitAnswer => {
            proxy.arm(CommitFault::LoseAnswer);
            hit = wait_for_commit(proxy);
        }
        Fault::DelayCommit(d) => {
            proxy.arm(CommitFault::Delay(d));
            hit = wait_for_commit(proxy);
            std::thread::sleep(d);
        }
        Fault::ResetConnections => proxy.reset(),
        Fault::BlackHole(d) => {
            proxy.black_hole(true);
            std::thread::sleep(d);
            proxy.black_hole(false);
        }
        Fault::Latency(d) => {
            proxy.latency(d);
            std::thread::sleep(Duration::from_secs(3));
            proxy.latency(Duration::ZERO);
        }
        Fault::PauseMidCommit(d) => {
            let (hold, seen, release) = proxy::hold();
            proxy.arm(hold);
            if seen.recv_timeout(Duration::from_secs(5)).is_ok() {
                hit = true;
                instance.signal(libc::SIGSTOP);
                let _ = release.send(());
                std::thread::sleep(d);
                instance.signal(libc::SIGCONT);
            } else {
                proxy.disarm();
            }
        }
        Fault::Pause(d) => {
            instance.signal(libc::SIGSTOP);
            std::thread::sleep(d);
            instance.signal(libc::SIGCONT);
        }
        Fault::Kill => {
            if let Some(s) = instance.server.as_mut() {
                s.kill();
            }
            instance.start();
        }
        Fault::Skew(minutes) => {
            if let Some(s) = instance.server.as_mut() {
                s.kill();
            }
            instance.skew = minutes;
            instance.start();
        }
        Fault::DatabaseRestart { crash, down } => {
            (database.down)(crash);
            std::thread::sleep(down);
            (database.up)();
        }
        Fault::DiskFull(hold) => {
            if !(database.fill)(hold) {
                eprintln!("no disk of its own to fill (not root?): the full disk is skipped");
            }
        }
    }
    (Instant::now(), hit)
}

/// Sets its flag when dropped, a panic included: the supervisor of [`run`]'s check stops then.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// GET `url`, retried while the instance does not answer at all (it may be restarting):
/// the check reads what the log serves, whichever process serves it.
fn read(agent: &ureq::Agent, url: &str) -> Reply {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match get(agent, url) {
            Ok(r) => return r,
            Err(e) if Instant::now() > deadline => panic!("{url} does not answer: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// What each instance answers at `path`: `Ok(body)` for a 200, else what went wrong.
fn answers(agent: &ureq::Agent, urls: &[String], path: &str) -> Vec<Result<String, String>> {
    urls.iter()
        .map(|u| match get(agent, &format!("{u}{path}")) {
            Ok(r) if r.status == 200 => Ok(r.text()),
            Ok(r) => Err(format!("{u}: {} {}", r.status, r.text())),
            Err(e) => Err(format!("{u}: {e}")),
        })
        .collect()
}

/// The log's promises, checked from outside against every instance.
fn check(agent: &ureq::Agent, urls: &[String], acks: &[Ack], served: &[String]) {
    // The instances agree on the head once the followers have caught up.
    let deadline = Instant::now() + Duration::from_secs(15);
    let head = loop {
        let heads: Vec<Result<(u64, String), String>> = answers(agent, urls, "/api/v1/log")
            .into_iter()
            .map(|a| a.map(|text| serde_json::from_str::<Value>(&text).unwrap_or_default()))
            .map(|h| h.map(|h| (h["treeSize"].as_u64().unwrap_or(0), h["rootHash"].as_str().unwrap_or("").to_string())))
            .collect();
        if let [Ok(first), rest @ ..] = heads.as_slice() {
            if rest.iter().all(|h| h.as_ref() == Ok(first)) {
                break first.clone();
            }
        }
        assert!(Instant::now() < deadline, "the instances do not agree on the head: {heads:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let (size, root) = (head.0, hex32(&head.1));
    assert!(acks.len() > 20, "too little load to mean anything: {} appends acknowledged", acks.len());

    // Every leaf, read from the first instance: together they must hash to the head's root.
    let mut leaves: Vec<Hash> = Vec::with_capacity(size as usize);
    let mut bodies: Vec<String> = Vec::with_capacity(size as usize);
    let mut last_time = i64::MIN;
    for index in 0..size {
        let r = read(agent, &format!("{}/api/v1/log/entries?logIndex={index}", urls[0]));
        assert_eq!(r.status, 200, "entry {index} of {size} is not served: {}", r.text());
        let e = r.json().as_object().unwrap().values().next().unwrap().clone();
        let body = e["body"].as_str().unwrap().to_string();
        leaves.push(rfc6962::leaf_hash(&signet_core::b64::decode(&body).unwrap()));
        bodies.push(body);
        let time = e["integratedTime"].as_i64().unwrap();
        assert!(time >= last_time, "integratedTime goes backwards at index {index}: {time} after {last_time}");
        last_time = time;
    }
    assert_eq!(rfc6962::prefix_roots(&leaves, [size]).get(&size), Some(&root), "the stored entries do not hash to the head's root");

    // Every acknowledged entry: at its index, once, with its body, with a proof that verifies.
    let mut by_index: HashMap<u64, &str> = HashMap::new();
    for ack in acks {
        if let Some(other) = by_index.insert(ack.index, &ack.body) {
            assert_eq!(other, ack.body, "index {} acknowledged for two different entries", ack.index);
        }
        let stored = bodies.get(ack.index as usize).unwrap_or_else(|| panic!("acknowledged entry {} is beyond the head {size}", ack.index));
        assert_eq!(stored, &ack.body, "entry {} is not the one acknowledged", ack.index);
        let (tree, proof_root, hashes) = &ack.proof;
        assert!(
            rfc6962::inclusion_holds(ack.index, *tree, &leaves[ack.index as usize], hashes, proof_root),
            "the inclusion proof acknowledged with entry {} does not verify",
            ack.index
        );
        assert!(ack.integrated_time > 0);
    }
    // On the other instances too.
    for url in &urls[1..] {
        for ack in acks {
            let r = read(agent, &format!("{url}/api/v1/log/entries?logIndex={}", ack.index));
            assert_eq!(r.status, 200, "{url} lost acknowledged entry {}", ack.index);
            let e = r.json().as_object().unwrap().values().next().unwrap().clone();
            assert_eq!(e["body"].as_str(), Some(ack.body.as_str()), "{url} serves another entry at {}", ack.index);
        }
    }

    // Every checkpoint anyone was given: signed by the log, no size with two roots, and the
    // root of that many leaves of the final tree.
    let pem = read(agent, &format!("{}/api/v1/log/publicKey", urls[0])).text();
    let spki = signet_core::pem::decode_first(pem.as_bytes()).unwrap().der;
    let mut roots: BTreeMap<u64, Hash> = BTreeMap::new();
    let notes = acks.iter().map(|a| a.checkpoint.as_str()).chain(served.iter().map(String::as_str));
    for note in notes {
        let cp = signet_log::checkpoint::verify(note, "127.0.0.1", &spki).unwrap_or_else(|e| panic!("a served checkpoint does not verify: {e:?}\n{note}"));
        if let Some(other) = roots.insert(cp.size, cp.root_hash) {
            assert_eq!(other, cp.root_hash, "two roots for size {}: a fork", cp.size);
        }
    }
    for ack in acks {
        let (tree, proof_root, _) = &ack.proof;
        assert_eq!(roots.get(tree), Some(proof_root), "entry {}'s proof is against a root no checkpoint signed", ack.index);
    }
    let prefixes = rfc6962::prefix_roots(&leaves, roots.keys().copied());
    for (&n, r) in &roots {
        assert!(n <= size, "a checkpoint of size {n} was served, beyond the final head {size}");
        if n > 0 {
            assert_eq!(prefixes.get(&n), Some(r), "the checkpoint of size {n} is not a prefix of the final tree");
        }
    }
    eprintln!("checked: {size} entries, {} acknowledged, {} checkpoints of {} sizes, {} instances agree", acks.len(), served.len() + acks.len(), roots.len(), urls.len());
}

/// The tile path element for tile `index` (c2sp.org/tlog-tiles: groups of three digits, all
/// but the last prefixed with `x`).
fn tile_index(index: u64) -> String {
    let digits = format!("{index:03}");
    let padded = format!("{}{digits}", "0".repeat((3 - digits.len() % 3) % 3));
    let groups: Vec<&str> = padded.as_bytes().chunks(3).map(|c| std::str::from_utf8(c).unwrap()).collect();
    let (last, rest) = groups.split_last().unwrap();
    rest.iter().map(|g| format!("x{g}/")).collect::<String>() + last
}

/// The Rekor v2 log's promises, read through its tiles as a witness or monitor would.
fn check_v2(agent: &ureq::Agent, urls: &[String], acks: &[Ack], served: &[String], spki: &[u8]) {
    let verify = |note: &str| {
        signet_log::checkpoint::verify(note, "127.0.0.1", spki).unwrap_or_else(|e| panic!("a served v2 checkpoint does not verify: {e:?}\n{note}"))
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let head = loop {
        let heads: Vec<Result<(u64, Hash), String>> = answers(agent, urls, "/api/v2/checkpoint")
            .into_iter()
            .map(|a| a.map(|note| verify(&note)).map(|cp| (cp.size, cp.root_hash)))
            .collect();
        if let [Ok(first), rest @ ..] = heads.as_slice() {
            if rest.iter().all(|h| h.as_ref() == Ok(first)) {
                break *first;
            }
        }
        assert!(Instant::now() < deadline, "the instances do not agree on the v2 head: {heads:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let (size, root) = head;
    assert!(acks.len() > 10, "too little v2 load to mean anything: {} appends acknowledged", acks.len());

    // Every entry, from the entry bundles of the first instance.
    let mut entries: Vec<Vec<u8>> = Vec::with_capacity(size as usize);
    for tile in 0..size.div_ceil(256) {
        let width = (size - tile * 256).min(256);
        let path = match width {
            256 => tile_index(tile),
            w => format!("{}.p/{w}", tile_index(tile)),
        };
        let r = read(agent, &format!("{}/api/v2/tile/entries/{path}", urls[0]));
        assert_eq!(r.status, 200, "v2 entry bundle {path}: {}", r.text());
        let mut rest = r.body.as_slice();
        while let [hi, lo, tail @ ..] = rest {
            let len = u16::from_be_bytes([*hi, *lo]) as usize;
            assert!(tail.len() >= len, "v2 entry bundle {path} is cut short");
            entries.push(tail[..len].to_vec());
            rest = &tail[len..];
        }
    }
    assert_eq!(entries.len() as u64, size, "the v2 entry bundles hold {} entries, the head {size}", entries.len());
    let leaves: Vec<Hash> = entries.iter().map(|e| rfc6962::leaf_hash(e)).collect();
    assert_eq!(rfc6962::prefix_roots(&leaves, [size]).get(&size), Some(&root), "the v2 entries do not hash to the head's root");

    let mut by_index: HashMap<u64, &str> = HashMap::new();
    for ack in acks {
        if let Some(other) = by_index.insert(ack.index, &ack.body) {
            assert_eq!(other, ack.body, "v2 index {} acknowledged for two different entries", ack.index);
        }
        let stored = entries.get(ack.index as usize).unwrap_or_else(|| panic!("acknowledged v2 entry {} is beyond the head {size}", ack.index));
        assert_eq!(signet_core::b64::encode(stored), ack.body, "v2 entry {} is not the one acknowledged", ack.index);
        let (tree, proof_root, hashes) = &ack.proof;
        assert!(rfc6962::inclusion_holds(ack.index, *tree, &leaves[ack.index as usize], hashes, proof_root), "the proof acknowledged with v2 entry {} does not verify", ack.index);
    }
    let mut roots: BTreeMap<u64, Hash> = BTreeMap::new();
    for note in acks.iter().map(|a| a.checkpoint.as_str()).chain(served.iter().map(String::as_str)) {
        let cp = verify(note);
        if let Some(other) = roots.insert(cp.size, cp.root_hash) {
            assert_eq!(other, cp.root_hash, "two v2 roots for size {}: a fork", cp.size);
        }
    }
    for ack in acks {
        let (tree, proof_root, _) = &ack.proof;
        assert_eq!(roots.get(tree), Some(proof_root), "v2 entry {}'s proof is against a root no checkpoint signed", ack.index);
    }
    let prefixes = rfc6962::prefix_roots(&leaves, roots.keys().copied());
    for (&n, r) in &roots {
        assert!(n <= size, "a v2 checkpoint of size {n} was served, beyond the final head {size}");
        if n > 0 {
            assert_eq!(prefixes.get(&n), Some(r), "the v2 checkpoint of size {n} is not a prefix of the final tree");
        }
    }
    eprintln!("checked v2: {size} entries, {} acknowledged, {} checkpoints of {} sizes", acks.len(), served.len() + acks.len(), roots.len());
}

#[test]
fn tile_indices_are_spelled_as_the_spec_says() {
    assert_eq!(tile_index(0), "000");
    assert_eq!(tile_index(7), "007");
    assert_eq!(tile_index(999), "999");
    assert_eq!(tile_index(1_000), "x001/000");
    assert_eq!(tile_index(1_234_067), "x001/x234/067");
}
