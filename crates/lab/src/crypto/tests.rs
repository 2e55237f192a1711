//! The backends do real, correct work: signatures round-trip, tampering is rejected, the two
//! libraries agree with each other and with known answers, and `run` honours `--filter`.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

use super::backend::{nonce, AeadAlg, Backend, Keys, SigAlg};
use super::cases::{self, tampered, Fixture, SIZES};
use super::{backends, run, Config};

fn keys() -> &'static Keys {
    static KEYS: std::sync::OnceLock<Keys> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| Keys::generate().expect("keys"))
}

fn sign(b: &dyn Backend, alg: SigAlg, keys: &Keys, msg: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 512];
    let n = b.signature(alg, keys).unwrap().sign(msg, &mut out);
    out.truncate(n);
    out
}

#[test]
fn signatures_round_trip_and_reject_tampering_on_each_backend() {
    let msg = b"an artifact digest, or whatever signet signs".to_vec();
    for b in backends() {
        for alg in SigAlg::ALL {
            let s = b.signature(alg, keys()).unwrap();
            let sig = sign(b.as_ref(), alg, keys(), &msg);
            let what = format!("{} {:?}", b.name(), alg);
            assert!(s.verify(&msg, &sig), "{what}: own signature rejected");
            assert!(!s.verify(&tampered(&msg), &sig), "{what}: tampered message accepted");
            assert!(!s.verify(&msg, &tampered(&sig)), "{what}: tampered signature accepted");
            let mut flipped_tail = sig.clone();
            *flipped_tail.last_mut().unwrap() ^= 0x80;
            assert!(!s.verify(&msg, &flipped_tail), "{what}: signature with a flipped last byte accepted");
            assert!(!s.verify(&msg, &[]), "{what}: empty signature accepted");
            let expected_len = match alg {
                SigAlg::Rsa2048Sha256 => Some(256),
                SigAlg::Ed25519 => Some(64),
                _ => None, // DER ECDSA varies by a few bytes
            };
            if let Some(n) = expected_len {
                assert_eq!(sig.len(), n, "{what}: signature length");
            }
        }
    }
}

#[test]
fn each_backend_verifies_the_others_signatures_and_rejects_other_keys() {
    let msg = b"cross-check".to_vec();
    let other_keys = Keys::generate().unwrap();
    let all = backends();
    for signer in &all {
        for verifier in &all {
            for alg in SigAlg::ALL {
                let sig = sign(signer.as_ref(), alg, keys(), &msg);
                let what = format!("{:?} signed by {}, verified by {}", alg, signer.name(), verifier.name());
                assert!(verifier.signature(alg, keys()).unwrap().verify(&msg, &sig), "{what}: rejected");
                assert!(!verifier.signature(alg, &other_keys).unwrap().verify(&msg, &sig), "{what}: accepted under another key");
            }
        }
    }
}

#[test]
fn sha256_matches_the_known_answer_and_the_other_backend() {
    let abc = hex::decode("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad").unwrap();
    let [a, o] = [0, 1].map(|i| backends().remove(i).digest());
    assert_eq!(a.sha256(b"abc").to_vec(), abc);
    assert_eq!(o.sha256(b"abc").to_vec(), abc);
    for size in SIZES {
        let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
        assert_eq!(a.sha256(&data), o.sha256(&data), "SHA-256 of {size} bytes");
    }
}

#[test]
fn hmac_matches_rfc_4231_on_both_backends() {
    // RFC 4231, test case 2.
    let want = hex::decode("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843").unwrap();
    for b in backends() {
        let tag = b.mac(b"Jefe").unwrap().hmac_sha256(b"what do ya want for nothing?");
        assert_eq!(tag.to_vec(), want, "{}", b.name());
    }
}

#[test]
fn aes_gcm_matches_the_known_answer_on_both_backends() {
    // McGrew & Viega, "The Galois/Counter Mode of Operation", test case 2.
    for b in backends() {
        let mut s = b.aead_session(AeadAlg::Aes128Gcm, &[0u8; 16], [0u8; 12]).unwrap();
        let mut record = [0u8; 16];
        let tag = s.seal(&[], &mut record);
        assert_eq!(hex::encode(record), "0388dace60b6a392f328c2b971b2fe78", "{}", b.name());
        assert_eq!(hex::encode(tag), "ab6e47d42cec13bdf53a67b21257bddf", "{}", b.name());
    }
}

#[test]
fn aes_gcm_sessions_agree_open_and_advance_the_nonce() {
    let fx = Fixture::generate().unwrap();
    let aad = [0x17u8; cases::AAD_BYTES];
    for (alg, key, algorithm) in [
        (AeadAlg::Aes128Gcm, &fx.aes128_key[..], &aead::AES_128_GCM),
        (AeadAlg::Aes256Gcm, &fx.aes256_key[..], &aead::AES_256_GCM),
    ] {
        let mut sessions: Vec<_> = backends().iter().map(|b| b.aead_session(alg, key, fx.iv).unwrap()).collect();
        let opener = LessSafeKey::new(UnboundKey::new(algorithm, key).unwrap());
        for (seq, size) in SIZES.into_iter().enumerate() {
            let plain: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
            let sealed: Vec<(Vec<u8>, [u8; 16])> = sessions
                .iter_mut()
                .map(|s| {
                    let mut r = plain.clone();
                    let tag = s.seal(&aad, &mut r);
                    (r, tag)
                })
                .collect();
            assert_eq!(sealed[0], sealed[1], "{alg:?} record {seq}: the backends disagree");
            let (ct, tag) = &sealed[0];
            assert_ne!(ct, &plain, "{alg:?}: record not encrypted");
            let open = |ct: &[u8], n: u64| {
                let mut buf = [ct, &tag[..]].concat();
                let nonce = Nonce::assume_unique_for_key(nonce(&fx.iv, n));
                opener.open_in_place(nonce, Aad::from(&aad), &mut buf).map(|p| p.to_vec())
            };
            assert_eq!(open(ct, seq as u64).unwrap(), plain, "{alg:?} record {seq} does not open");
            assert!(open(&tampered(ct), seq as u64).is_err(), "{alg:?}: tampered record opens");
            assert!(open(ct, seq as u64 + 1).is_err(), "{alg:?}: record opens under another nonce");
        }
    }
}

#[test]
fn every_case_prepares_and_runs_on_both_backends() {
    let fx = Fixture::generate().unwrap();
    for case in cases::all() {
        for b in backends() {
            let mut op = case.prepare(b.as_ref(), &fx).unwrap_or_else(|e| panic!("{e}"));
            op();
            op();
        }
    }
}

#[test]
fn run_measures_only_the_filtered_cases_on_both_backends() {
    let cfg = Config { seconds_per_op: 0.002, repeats: 3, filter: Some("ED25519-VER".into()) };
    let mut seen = Vec::new();
    let report = run(&cfg, &mut |r| seen.push(r.id.clone())).unwrap();
    assert_eq!(seen, vec!["ed25519-verify"]);
    let case = &report.cases[0];
    assert_eq!(case.backends.keys().collect::<Vec<_>>(), vec!["aws-lc", "openssl"]);
    for r in case.backends.values() {
        assert_eq!(r.repeats_ops_s.len(), 3);
        assert!(r.min_ops_s > 0.0 && r.min_ops_s <= r.median_ops_s && r.median_ops_s <= r.max_ops_s);
    }
    assert!(case.ratio_awslc_over_openssl.unwrap() > 0.0);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["repeats"], 3);
    assert!(report.table().contains("Ed25519 verify"));
}

#[test]
fn run_refuses_bad_options() {
    let bad = |cfg: Config| matches!(run(&cfg, &mut |_| {}), Err(e) if e.is_usage());
    assert!(bad(Config { filter: Some("nothing-matches".into()), ..Config::default() }));
    assert!(bad(Config { seconds_per_op: 0.0, ..Config::default() }));
    assert!(bad(Config { repeats: 0, ..Config::default() }));
}
