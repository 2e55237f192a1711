//! Crash safety, tested: SIGKILL a server under concurrent appends, restart it, and check
//! that nothing acknowledged was lost, that the log only grew consistently, and that no index
//! was handed out twice.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use rand::Rng;
use signet_core::b64;
use signet_log::{checkpoint, merkle};

const ROUNDS: usize = 12;
const WRITERS: usize = 8;

/// An append the server acknowledged with 201.
struct Acked {
    index: u64,
    leaf: [u8; 32],
}

#[test]
fn acknowledged_entries_survive_sigkill() {
    survive_kills(&[]);
}

/// The same on PostgreSQL: the server dies, the database does not, and the restarted server
/// rebuilds from what the database committed.
#[test]
fn acknowledged_entries_survive_sigkill_on_postgres() {
    let Some(db) = postgres_database() else { return };
    survive_kills(&["--storage", &db]);
}

fn survive_kills(storage: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    // Every checkpoint any response carried: (size, root).
    let seen: Arc<Mutex<Vec<(u64, [u8; 32])>>> = Arc::default();
    let mut spki = Vec::new();
    let mut rng = rand::rng();

    for round in 0..ROUNDS {
        let mut server = Server::start(dir.path(), storage);
        if spki.is_empty() {
            let pem = get(&agent(), &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text();
            spki = signet_core::pem::decode_first(pem.as_bytes()).unwrap().der;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (url, stop, acked, seen, spki) = (server.url.clone(), stop.clone(), acked.clone(), seen.clone(), spki.clone());
                std::thread::spawn(move || {
                    let (agent, signer) = (agent(), Signer::new());
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let entry = signer.v1_entry(format!("round {round} writer {w} entry {i}").as_bytes());
                        i += 1;
                        let Ok(r) = post_json(&agent, &format!("{url}/api/v1/log/entries"), &entry) else { break };
                        if r.status != 201 {
                            continue;
                        }
                        let map = r.json();
                        let e = map.as_object().unwrap().values().next().unwrap();
                        let body = b64::decode(e["body"].as_str().unwrap()).unwrap();
                        let note = e["verification"]["inclusionProof"]["checkpoint"].as_str().unwrap();
                        let cp = checkpoint::verify(note, "127.0.0.1", &spki).unwrap();
                        seen.lock().unwrap().push((cp.size, cp.root_hash));
                        acked.lock().unwrap().push(Acked { index: e["logIndex"].as_u64().unwrap(), leaf: merkle::leaf_hash(&body) });
                    }
                })
            })
            .collect();
        // On PostgreSQL a restarted server first waits out the dead one's lease (appends queue
        // meanwhile): every other round kills it in that wait, the rest once appends flow.
        if round % 2 == 0 {
            let (flowing, before) = (std::time::Instant::now(), acked.lock().unwrap().len());
            while acked.lock().unwrap().len() == before && flowing.elapsed() < Duration::from_secs(15) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(150..600)));
        server.kill(); // SIGKILL: no shutdown path runs.
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().for_each(|h| h.join().unwrap());
    }

    let server = Server::start(dir.path(), storage);
    let agent = agent();
    // On PostgreSQL the restarted server follows until the dead one's lease expires, and then
    // logs what was queued but not yet logged: the log may still grow while this test reads
    // it. So each proof is checked against the checkpoint it came with, and every checkpoint
    // against the head read last.
    let mut checkpoints: Vec<(u64, [u8; 32])> = Vec::new();

    let acked = acked.lock().unwrap();
    assert!(acked.len() > 100, "the writers got {} acknowledgements; too few to mean anything", acked.len());

    // No index was handed out twice.
    let mut by_index: HashMap<u64, [u8; 32]> = HashMap::new();
    for a in acked.iter() {
        if let Some(prev) = by_index.insert(a.index, a.leaf) {
            panic!("index {} acknowledged twice ({} and {})", a.index, hex::encode(prev), hex::encode(a.leaf));
        }
    }

    // Every acknowledged entry is present, at its index, with a valid proof against the head.
    for a in acked.iter() {
        let r = get(&agent, &format!("{}/api/v1/log/entries?logIndex={}", server.url, a.index)).unwrap();
        assert_eq!(r.status, 200, "acknowledged entry {} is gone", a.index);
        let map = r.json();
        let e = map.as_object().unwrap().values().next().unwrap();
        let body = b64::decode(e["body"].as_str().unwrap()).unwrap();
        assert_eq!(merkle::leaf_hash(&body), a.leaf, "entry {} changed", a.index);
        let p = &e["verification"]["inclusionProof"];
        let cp = checkpoint::verify(p["checkpoint"].as_str().unwrap(), "127.0.0.1", &spki).unwrap();
        assert_eq!((p["treeSize"].as_u64(), p["rootHash"].as_str()), (Some(cp.size), Some(hex::encode(cp.root_hash).as_str())));
        assert!(a.index < cp.size, "acknowledged index {} is beyond its proof's tree size {}", a.index, cp.size);
        let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
        merkle::verify_inclusion(&a.leaf, a.index, cp.size, &hashes, &cp.root_hash)
            .unwrap_or_else(|err| panic!("entry {}: its proof does not verify against its checkpoint ({}): {err}", a.index, cp.size));
        checkpoints.push((cp.size, cp.root_hash));
    }
    let head = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let size = head["treeSize"].as_u64().unwrap();
    let root = hex32(head["rootHash"].as_str().unwrap());
    checkpoint::verify(head["signedTreeHead"].as_str().unwrap(), "127.0.0.1", &spki).unwrap();

    // Every checkpoint seen before a crash is a prefix of the recovered log.
    let seen = seen.lock().unwrap();
    let mut sizes: Vec<(u64, [u8; 32])> = seen.iter().chain(&checkpoints).copied().collect();
    sizes.sort();
    sizes.dedup();
    let mut roots_by_size: HashMap<u64, [u8; 32]> = HashMap::new();
    for (s, r) in &sizes {
        if let Some(prev) = roots_by_size.insert(*s, *r) {
            assert_eq!(prev, *r, "two different roots signed for size {s}");
        }
    }
    for (s, r) in roots_by_size {
        let p = get(&agent, &format!("{}/api/v1/log/proof?firstSize={s}&lastSize={size}", server.url)).unwrap().json();
        let hashes: Vec<[u8; 32]> = p["hashes"].as_array().unwrap().iter().map(|h| hex32(h.as_str().unwrap())).collect();
        merkle::verify_consistency(s, size, &hashes, &r, &root)
            .unwrap_or_else(|e| panic!("checkpoint of size {s} is not consistent with the recovered head {size}: {e}"));
    }
    eprintln!("crash test ({storage:?}): {} acknowledged entries over {ROUNDS} kills, recovered size {size}", acked.len());
}
