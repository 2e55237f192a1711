//! `signet_log::import` on every backend: another log's entries copied in two runs (the
//! second resumes after the first's prefix), proven against that log's signed checkpoint, and
//! then served like any other log (frozen by its shard record, as a rotated shard is): entries with their own times and stamps, proofs to the
//! signed root. A checkpoint of other entries, or of another size, is refused.

use crate::common;

use std::sync::Arc;

use signet_core::hash::Hash;
use signet_core::note::Checkpoint;
use signet_keys::Signer;
use signet_log::checkpoint::NoteSigner;
use signet_log::import::{CopiedEntry, Import, ImportError};
use signet_log::{merkle, BatchPolicy, Log, LogConfig};

fn entry(i: u64) -> CopiedEntry {
    CopiedEntry {
        body: format!("entry {i}").into_bytes(),
        integrated_time: 1_700_000_000 + i as i64 / 7,
        stamp: Some(vec![i as u8; 4]),
        digest: Some(format!("sha256:{i:064x}").into_bytes()),
        identity: None,
        public_key: None,
        // Every third entry with a statement, which the copy keeps.
        attestation: (i % 3 == 0).then(|| signet_log::storage::Attestation::new(format!("statement {i}").into_bytes())),
    }
}

/// The root of entries `0..n` as the other log computed it.
fn root_of(n: u64) -> Hash {
    let mut tree = signet_log::tree::Tree::new();
    for i in 0..n {
        tree.push(merkle::leaf_hash(&entry(i).body));
    }
    tree.root(n).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_resumes_is_proven_and_serves_as_a_frozen_log() {
    const N: u64 = 700;
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap());
    let origin = "rekor.example - 42".to_string();
    let signer = NoteSigner::new("rekor.example", key.clone());
    let note = signer.sign(Checkpoint { origin: origin.clone(), size: N, root_hash: root_of(N) }).unwrap().note;
    let spki = key.spki_der().to_vec();
    let verify = move |note: &str| signet_core::note::verify(note, "rekor.example", &spki);
    for b in common::backends() {
        let storage = b.storage.clone();
        let first = tokio::task::spawn_blocking(move || {
            let mut copy = Import::open(storage, 4).unwrap();
            for start in (0..300).step_by(100) {
                copy.append((start..start + 100).map(entry).collect()).unwrap();
            }
            copy.size()
        });
        assert_eq!(first.await.unwrap(), 300, "{}", b.name);

        // A restart: the copy goes on after what is stored.
        let (storage, note2, wrong) = (b.reopen(), note.clone(), signer.sign(Checkpoint { origin: origin.clone(), size: N, root_hash: root_of(N - 1) }).unwrap().note);
        let verify = verify.clone();
        let finished = tokio::task::spawn_blocking(move || {
            let mut copy = Import::open(storage.clone(), 4).unwrap();
            assert_eq!(copy.size(), 300);
            copy.append((300..N - 1).map(entry).collect()).unwrap();
            // One entry short: the checkpoint's size is not the copy's.
            let short = Import::open(storage.clone(), 4).unwrap();
            assert!(matches!(short.finish(&note2, verify.clone()), Err(ImportError::Mismatch(why)) if why.contains("699 were copied")));
            copy.append(vec![entry(N - 1)]).unwrap();
            // The right size, another root.
            let other = Import::open(storage.clone(), 4).unwrap();
            assert!(matches!(other.finish(&wrong, verify.clone()), Err(ImportError::Mismatch(why)) if why.contains("hash to root")));
            // A signature by another key.
            let forged = NoteSigner::new("rekor.example", Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).unwrap()));
            let forged = forged.sign(Checkpoint { origin: "rekor.example - 42".into(), size: N, root_hash: root_of(N) }).unwrap().note;
            let again = Import::open(storage.clone(), 4).unwrap();
            assert!(matches!(again.finish(&forged, verify.clone()), Err(ImportError::Checkpoint(_))));
            Import::open(storage.clone(), 4).unwrap().finish(&note2, verify).unwrap();
            // Finished: not a copy in progress any more.
            assert!(matches!(Import::open(storage, 4), Err(ImportError::Finished(4))));
        });
        finished.await.unwrap();

        // Served as a log by the key that signed its checkpoint.
        let log = Log::open(
            LogConfig {
                id: 4,
                origin: origin.clone(),
                key_name: "rekor.example".into(),
                key: key.clone(),
                batch: BatchPolicy::default(),
                stamper: None,
                max_pending: 0,
                tile_cache: signet_log::DEFAULT_TILE_CACHE,
                entry_cache: signet_log::DEFAULT_ENTRY_CACHE,
                note_key: None,
                genesis: None,
            },
            b.reopen(),
        )
        .await
        .unwrap();
        assert_eq!(log.head().note, note, "{}", b.name);
        for i in [0, 1, 255, 256, 511, 699] {
            let e = log.entry_async(i).await.unwrap().unwrap();
            assert_eq!((e.body.clone(), e.integrated_time, e.stamp.clone()), (entry(i).body, entry(i).integrated_time, entry(i).stamp), "{}", b.name);
            assert_eq!(e.attestation, entry(i).attestation.map(|a| a.data), "{}: entry {i}", b.name);
            let proof = log.inclusion_proof(i, N).unwrap();
            assert!(merkle::verify_inclusion(&merkle::leaf_hash(&e.body), i, N, &proof, &root_of(N)).is_ok(), "{}: entry {i}", b.name);
        }
        assert_eq!(log.indices_by_digest(format!("sha256:{:064x}", 511).as_bytes(), None, 10).await.unwrap().indices, [511], "{}", b.name);
    }
}
