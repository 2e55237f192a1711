//! Checkpoints and Rekor entries: the CPU work of an append request before it is queued,
//! and of a client checking a checkpoint. Inputs come from the fixture (a P-256 key and
//! certificate), so the signature checks are real ones.

use std::hint::black_box;
use std::sync::Arc;

use signet_keys::Signer;
use signet_core::micro::criterion::Criterion;
use signet_core::micro::fixture::SignedArtifact;
use signet_core::micro::{measure, Bench, Opts};

use crate::checkpoint::{self, Checkpoint, NoteSigner};
use crate::rekor::{v1, v2};

const ORIGIN: &str = "log.example.org - 2605736670972794746";

fn checkpoint() -> Checkpoint {
    Checkpoint { origin: ORIGIN.into(), size: 1_000_000, root_hash: signet_core::hash::sha256(b"root") }
}

pub fn checkpoint_sign(c: &mut Criterion, bench: &Bench) {
    let signer = NoteSigner::new("log.example.org", Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("P-256 key")));
    let cp = checkpoint();
    measure(c, bench, Opts::default(), |b| b.iter(|| signer.sign(black_box(cp.clone())).expect("signs")));
}

pub fn checkpoint_verify(c: &mut Criterion, bench: &Bench) {
    let key = Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("P-256 key"));
    let note = NoteSigner::new("log.example.org", key.clone()).sign(checkpoint()).expect("signs").note;
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| checkpoint::verify(black_box(&note), "log.example.org", key.spki_der()).expect("verifies"))
    });
}

/// Request bodies as they arrive: JSON bytes, parsed inside the timed loop as the handler does.
fn request_bytes(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON serializes")
}

pub fn rekor_v1(c: &mut Criterion, bench: &Bench) {
    let req = request_bytes(&SignedArtifact::new(b"micro-benchmark artifact").hashedrekord_v1());
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| v1::parse(black_box(&req)).expect("a valid entry"))
    });
}

pub fn rekor_v2(c: &mut Criterion, bench: &Bench) {
    let req = request_bytes(&SignedArtifact::new(b"micro-benchmark artifact").hashedrekord_v2());
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| v2::parse(black_box(&req)).expect("a valid entry"))
    });
}

/// A full batch's SETs (256 v1 entries), on one thread and spread over the cores as the
/// sequencer spreads them (from a job on a runtime's blocking pool, whose threads help): their
/// ratio is how much of a batch's serial stage the cores take.
fn batch_sets(c: &mut Criterion, bench: &Bench, threads: usize) {
    use crate::shared::Stamper;
    type Batch = Vec<Vec<u8>>;
    let stamper = Arc::new(v1::SetSigner::new(Arc::new(Signer::generate(signet_keys::Algorithm::EcdsaP256Sha256).expect("P-256 key"))));
    // The runtime lives on a thread of its own, which takes batches and gives them back:
    // `signet bench micro` runs inside a runtime, in which another's block_on may not nest.
    let (to_driver, batches) = std::sync::mpsc::channel::<Batch>();
    let (to_bench, signed) = std::sync::mpsc::channel::<Batch>();
    let driver = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().expect("a runtime");
        for batch in batches {
            let s = stamper.clone();
            let job = move || signet_core::cpu::fan_out(batch, threads, signet_keys::Spread::on_cores().per_thread, move |i, body: &Vec<u8>| s.stamp(1_000 + i as u64, 1_700_000_000, body));
            let (back, sets) = rt.block_on(rt.spawn_blocking(job)).expect("the job ran");
            assert_eq!(sets.expect("signs").len(), back.len());
            if to_bench.send(back).is_err() {
                break;
            }
        }
    });
    let mut bodies = vec![super::v1_body(); 256];
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            to_driver.send(std::mem::take(&mut bodies)).expect("the driver runs");
            bodies = signed.recv().expect("the driver answers");
        })
    });
    drop(to_driver);
    driver.join().expect("the driver ends");
}

pub fn sets_256_one_thread(c: &mut Criterion, bench: &Bench) {
    batch_sets(c, bench, 1)
}

pub fn sets_256(c: &mut Criterion, bench: &Bench) {
    batch_sets(c, bench, signet_core::cpu::cores())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_requests_are_accepted_by_both_apis() {
        let s = SignedArtifact::new(b"x");
        let e1 = v1::parse_value(&s.hashedrekord_v1()).unwrap();
        let e2 = v2::parse_value(&s.hashedrekord_v2()).unwrap();
        assert_eq!(e1.digest_key, e2.digest_key);
        assert!(String::from_utf8(e1.body).unwrap().contains(r#""kind":"hashedrekord""#));
    }
}
