//! Every kind of key signet signs with, made on and signed by a real PKCS#11 token
//! (SoftHSM2, installed by scripts/install-deps), in a directory of this test's own.

use std::path::PathBuf;
use std::process::Command;

use signet_keys::pkcs11::Key;
use signet_keys::{Algorithm, KeyError, KeySource, NoteSigner, Pkcs11Settings, Signer};

const PIN: &str = "864200";

fn module() -> PathBuf {
    ["/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("SoftHSM2 is not installed: run scripts/install-deps (Debian's softhsm2)")
}

/// The settings that reach the token labelled `label`. SoftHSM reads `SOFTHSM2_CONF` and
/// its tokens when the module is first initialised, once per process: every test's token is
/// made then, in one directory.
fn token(label: &str) -> Pkcs11Settings {
    const TOKENS: [&str; 4] = ["all-kinds", "witness", "busy", "spread"];
    assert!(TOKENS.contains(&label), "add {label} to TOKENS");
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tokens")).unwrap();
        let conf = dir.path().join("softhsm2.conf");
        std::fs::write(&conf, format!("directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n", dir.path().join("tokens").display())).unwrap();
        for label in TOKENS {
            let out = Command::new("softhsm2-util")
                .env("SOFTHSM2_CONF", &conf)
                .args(["--init-token", "--free", "--label", label, "--pin", PIN, "--so-pin", "111111"])
                .output()
                .expect("softhsm2-util runs");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        // SAFETY: set under the OnceLock, before any test loads the module.
        unsafe { std::env::set_var("SOFTHSM2_CONF", &conf) };
        dir
    });
    Pkcs11Settings { module: Some(module()), pin: Some(PIN.into()), sessions: 2 }
}

fn uri(token: &str, object: &str) -> signet_keys::Pkcs11Uri {
    match format!("pkcs11:token={token};object={object}").parse::<KeySource>().unwrap() {
        KeySource::Pkcs11(u) => u,
        _ => unreachable!(),
    }
}

#[test]
fn every_algorithm_is_made_on_the_token_and_signs_there() {
    let settings = token("all-kinds");
    for (object, alg) in [("p256", Algorithm::EcdsaP256Sha256), ("p384", Algorithm::EcdsaP384Sha384), ("ed25519", Algorithm::Ed25519)] {
        let uri = uri("all-kinds", object);
        assert!(Key::ensure(&uri, &settings, alg).unwrap(), "{alg}: made");
        assert!(!Key::ensure(&uri, &settings, alg).unwrap(), "{alg}: a second ensure uses the key there");
        let key = Signer::open(&KeySource::Pkcs11(uri.clone()), &settings, &[alg], false).unwrap();
        assert!(key.on_token());
        assert_eq!(key.algorithm(), alg);
        for message in [&b""[..], b"a checkpoint", &[7u8; 10_000]] {
            let sig = key.sign(message).unwrap();
            assert!(alg.verify(key.spki_der(), message, &sig), "{alg}");
            // The general verifier agrees: the SPKI built from the token's attributes is sound.
            let public = signet_core::pubkey::PublicKey::from_spki(key.spki_der()).unwrap();
            assert!(public.verify_message(message, &sig).is_ok(), "{alg}");
        }
        // A key of the wrong kind for its use is refused by name.
        let other = if alg == Algorithm::Ed25519 { Algorithm::EcdsaP256Sha256 } else { Algorithm::Ed25519 };
        let err = Signer::open(&KeySource::Pkcs11(uri), &settings, &[other], false).unwrap_err();
        assert!(matches!(err, KeyError::WrongAlgorithm { .. }), "{err}");
        assert!(err.to_string().contains(&format!("is {alg}")), "{err}");
    }
}

/// A batch of signatures (a log batch's SETs) is spread as the key's nature calls for: over
/// the cores for a key in memory, over its sessions for a key on a token, from the first
/// signature on, since each one waits on the token.
#[test]
fn a_batch_of_signatures_spreads_over_cores_in_memory_and_sessions_on_a_token() {
    let memory = Signer::generate(Algorithm::EcdsaP256Sha256).unwrap();
    assert_eq!(memory.spread(), signet_keys::Spread { threads: signet_core::cpu::cores(), per_thread: 32 });
    let settings = token("spread");
    let uri = uri("spread", "key");
    Key::ensure(&uri, &settings, Algorithm::EcdsaP256Sha256).unwrap();
    let on_token = std::sync::Arc::new(Signer::open(&KeySource::Pkcs11(uri), &settings, &[Algorithm::EcdsaP256Sha256], false).unwrap());
    assert_eq!(on_token.spread(), signet_keys::Spread { threads: settings.sessions, per_thread: 1 });
    // Spread that wide, every signature still verifies, each for its own message.
    let messages: Vec<Vec<u8>> = (0..12).map(|i| format!("entry {i}").into_bytes()).collect();
    let (spread, key) = (on_token.spread(), on_token.clone());
    let (messages, sigs) = signet_core::cpu::fan_out(messages, spread.threads, spread.per_thread, move |_, m: &Vec<u8>| key.sign(m));
    for (m, sig) in messages.iter().zip(&sigs.unwrap()) {
        assert!(Algorithm::EcdsaP256Sha256.verify(on_token.spki_der(), m, sig));
    }
}

#[test]
fn a_note_signer_on_a_token_cosigns_what_its_vkey_verifies() {
    use signet_core::note::SignedNote;
    use signet_core::notekey::{signature_line, NoteKeyType};
    let settings = token("witness");
    let uri = uri("witness", "cosigner");
    Key::ensure(&uri, &settings, Algorithm::Ed25519).unwrap();
    let signer = NoteSigner::open(&KeySource::Pkcs11(uri), &settings, "w.example/1", NoteKeyType::Cosignature, false).unwrap();
    assert!(signer.on_token());
    let text = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    let note = format!("{text}\n{}", signature_line(&signer.sign(text, 1_700_000_000).unwrap()));
    assert_eq!(signer.vkey().verify(&SignedNote::parse(&note).unwrap()), Some(1_700_000_000));
}

#[test]
fn signing_on_a_runtime_worker_does_not_stall_the_other_tasks() {
    // Two workers, both signing on the token in a loop, and a timer task beside them: the
    // timer must keep running (block_in_place hands a signing worker's queue to another thread).
    let settings = token("busy");
    let uri = uri("busy", "key");
    Key::ensure(&uri, &settings, Algorithm::EcdsaP256Sha256).unwrap();
    let key = std::sync::Arc::new(Signer::open(&KeySource::Pkcs11(uri), &settings, &[Algorithm::EcdsaP256Sha256], false).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let ticks = runtime.block_on(async move {
        let signers: Vec<_> = (0..2)
            .map(|_| {
                let key = key.clone();
                // Longer than the timer's window: without block_in_place no worker is free for it.
                tokio::spawn(async move {
                    let started = std::time::Instant::now();
                    while started.elapsed() < std::time::Duration::from_millis(400) {
                        key.sign(b"busy").unwrap();
                    }
                })
            })
            .collect();
        let ticker = tokio::spawn(async {
            let mut ticks = 0u32;
            let started = std::time::Instant::now();
            while started.elapsed() < std::time::Duration::from_millis(200) {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                ticks += 1;
            }
            ticks
        });
        let ticks = ticker.await.unwrap();
        for s in signers {
            s.await.unwrap();
        }
        ticks
    });
    assert!(ticks >= 10, "the timer task ran {ticks} times in 200 ms while both workers signed");
}

/// local-kms (an AWS KMS emulator; scripts/test installs it as `.tools/bin/local-kms` and
/// names it in `SIGNET_LOCAL_KMS`) on a free loopback port, its keys in a directory of its own.
struct LocalKms {
    child: std::process::Child,
    port: u16,
    data: tempfile::TempDir,
}

fn local_kms_binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/local-kms");
    std::env::var_os("SIGNET_LOCAL_KMS").map(PathBuf::from).filter(|p| p.exists()).or(Some(built).filter(|p| p.exists())).expect(
        "local-kms is not installed: scripts/test builds it (go install github.com/nsmithuk/local-kms) into .tools/bin",
    )
}

impl LocalKms {
    fn start() -> LocalKms {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        LocalKms::on(port, tempfile::tempdir().unwrap())
    }

    fn on(port: u16, data: tempfile::TempDir) -> LocalKms {
        let child = Command::new(local_kms_binary())
            .env("PORT", port.to_string())
            .env("KMS_DATA_PATH", data.path())
            .env("KMS_REGION", "eu-west-2")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "local-kms did not listen on {port}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        LocalKms { child, port, data }
    }

    /// Stops it, as a KMS that does not answer; `restart` brings it back with its keys.
    fn stop(mut self) -> (u16, tempfile::TempDir) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let port = self.port;
        let data = std::mem::replace(&mut self.data, tempfile::tempdir().unwrap());
        (port, data)
    }
}

impl Drop for LocalKms {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn keys_in_aws_kms_are_made_there_sign_there_and_a_kms_away_is_transient() {
    use signet_keys::awskms;
    let kms = LocalKms::start();
    // The SDK's own settings, as an operator would give them; one KMS per test process.
    // SAFETY: only this test reads these variables.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL_KMS", format!("http://127.0.0.1:{}", kms.port));
        std::env::set_var("AWS_REGION", "eu-west-2");
        std::env::set_var("AWS_ACCESS_KEY_ID", "signet-test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "signet-test");
    }
    let source = |alias: &str| format!("awskms:///alias/{alias}").parse::<KeySource>().unwrap();
    let uri = |alias: &str| match source(alias) {
        KeySource::AwsKms(u) => u,
        _ => unreachable!(),
    };
    let none = Pkcs11Settings::default();
    for (alias, alg) in [("signet-p256", Algorithm::EcdsaP256Sha256), ("signet-p384", Algorithm::EcdsaP384Sha384)] {
        assert!(awskms::Key::ensure(&uri(alias), alg).unwrap(), "{alg}: made");
        assert!(!awskms::Key::ensure(&uri(alias), alg).unwrap(), "{alg}: a second ensure uses the key there");
        let key = Signer::open(&source(alias), &none, &[alg], false).unwrap();
        assert!(key.on_token() && key.algorithm() == alg);
        for message in [&b""[..], b"a timestamp", &[9u8; 70_000]] {
            let sig = key.sign(message).unwrap();
            assert!(alg.verify(key.spki_der(), message, &sig), "{alg}");
        }
        // Many at once, as a log batch's SETs are made: each signature is a round trip of its own.
        let spread = key.spread();
        assert!(spread.threads > signet_core::cpu::cores() && spread.per_thread == 1, "{spread:?}");
        let key = std::sync::Arc::new(key);
        let messages: Vec<Vec<u8>> = (0..40).map(|i| format!("entry {i}").into_bytes()).collect();
        let signer = key.clone();
        let (messages, sigs) = signet_core::cpu::fan_out(messages, spread.threads, spread.per_thread, move |_, m: &Vec<u8>| signer.sign(m));
        assert!(messages.iter().zip(&sigs.unwrap()).all(|(m, sig)| alg.verify(key.spki_der(), m, sig)), "{alg}");
        let err = Signer::open(&source(alias), &none, &[Algorithm::Ed25519], false).unwrap_err();
        assert!(matches!(err, KeyError::WrongAlgorithm { .. }), "{err}");
    }
    let err = Signer::open(&source("no-such-key"), &none, &[Algorithm::EcdsaP256Sha256], false).unwrap_err();
    assert!(matches!(err, KeyError::Hsm { .. }) && err.to_string().contains("awskms:///alias/no-such-key"), "{err}");
    assert!(err.to_string().contains("NotFound"), "the error does not say what KMS said: {err}");

    // KMS goes away: a signature fails as transient (a 503), within the bound; it comes back.
    let key = Signer::open(&source("signet-p256"), &none, &[Algorithm::EcdsaP256Sha256], false).unwrap();
    let (port, data) = kms.stop();
    let started = std::time::Instant::now();
    let err = key.sign(b"while KMS is away").unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(11), "a signature waited {:?} for KMS", started.elapsed());
    let _back = LocalKms::on(port, data);
    let sig = key.sign(b"KMS is back").unwrap();
    assert!(Algorithm::EcdsaP256Sha256.verify(key.spki_der(), b"KMS is back", &sig));
}
