//! Issue 43: the log, TSA and CA keys on a PKCS#11 token, a real SoftHSM2 one (Debian's
//! `softhsm2`, installed by scripts/install-deps), made by each test in a directory of its
//! own. Real clients verify what such an instance signs in interop/python/test_hsm.py.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

const PIN: &str = "246810";
const KEY_FILES: [&str; 8] = [
    "keys/rekor-v1.pem",
    "keys/rekor-v2.pem",
    "keys/ct.pem",
    "keys/tsa.pem",
    "keys/ca-intermediate.pem",
    "keys/audit.pem",
    "keys/tuf-snapshot.pem",
    "keys/tuf-timestamp.pem",
];

/// A SoftHSM2 configuration with one token, `signet`, in a temporary directory.
struct SoftHsm {
    dir: tempfile::TempDir,
}

fn softhsm_module() -> PathBuf {
    ["/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("SoftHSM2 is not installed: run scripts/install-deps (Debian's softhsm2)")
}

impl SoftHsm {
    fn new() -> SoftHsm {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tokens")).unwrap();
        let conf = format!("directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n", dir.path().join("tokens").display());
        std::fs::write(dir.path().join("softhsm2.conf"), conf).unwrap();
        let hsm = SoftHsm { dir };
        hsm.add_token("signet");
        hsm
    }

    /// Another token in the same module (a second HSM, or a second smart card).
    fn add_token(&self, label: &str) {
        let out = Command::new("softhsm2-util")
            .env("SOFTHSM2_CONF", self.conf())
            .args(["--init-token", "--free", "--label", label, "--pin", PIN, "--so-pin", "13579"])
            .output()
            .expect("softhsm2-util runs (scripts/install-deps installs softhsm2)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("softhsm2.conf")
    }

    /// `signet …` with this token's configuration, its module and its PIN.
    fn signet(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_signet"));
        c.env("SOFTHSM2_CONF", self.conf()).env("SIGNET_KEYS_PKCS11_MODULE", softhsm_module()).env("SIGNET_KEYS_PKCS11_PIN", PIN).args(args);
        c
    }

    /// Takes the token away, as an unplugged HSM (SoftHSM keeps it in files); puts it back on drop.
    fn unplug(&self) -> Unplugged<'_> {
        std::fs::rename(self.dir.path().join("tokens"), self.dir.path().join("away")).unwrap();
        Unplugged(self)
    }
}

struct Unplugged<'a>(&'a SoftHsm);

impl Drop for Unplugged<'_> {
    fn drop(&mut self) {
        let _ = std::fs::rename(self.0.dir.path().join("away"), self.0.dir.path().join("tokens"));
    }
}

/// A token, and a data dir initialised with its keys on it (at `<top>/data`), for a port of its own.
fn initialised() -> (SoftHsm, tempfile::TempDir, PathBuf, u16) {
    let hsm = SoftHsm::new();
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("data");
    let port = crate::haproxy::free_port();
    let made = init(&hsm, &data, port);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    (hsm, top, data, port)
}

fn init(hsm: &SoftHsm, data: &Path, port: u16) -> std::process::Output {
    let url = format!("http://127.0.0.1:{port}");
    hsm.signet(&["init", "--data-dir", data.to_str().unwrap(), "--public-url", &url, "--keys", "pkcs11:token=signet"]).output().unwrap()
}

fn serve(hsm: &SoftHsm, data: &Path, port: u16) -> Server {
    let mut command = hsm.signet(&["serve", "--config"]);
    command.arg(data.join("signet.toml")).args(["--listen", &format!("127.0.0.1:{port}"), "--plain-http"]);
    Server::spawn(command, data)
}

fn spki_of(pem_file: &Path) -> Vec<u8> {
    let block = signet_core::pem::decode_first(&std::fs::read(pem_file).unwrap()).unwrap();
    assert_eq!(block.label, "PUBLIC KEY");
    block.der
}

fn timestamp(agent: &ureq::Agent, url: &str) -> Reply {
    let digest = signet_core::hash::sha256(b"stamped on a token");
    let body = serde_json::json!({"artifactHash": signet_core::b64::encode(digest), "hashAlgorithm": "sha256", "certificates": true});
    post_json(agent, &format!("{url}/api/v1/timestamp"), &body).unwrap()
}

#[test]
fn init_keeps_the_log_and_tsa_keys_on_the_token_and_they_sign() {
    let hsm = SoftHsm::new();
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("data");
    let port = crate::haproxy::free_port();
    let made = init(&hsm, &data, port);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(said.contains("signet-rekor-v1, signet-rekor-v2, signet-ct, signet-tsa, signet-ca-intermediate, signet-audit, signet-tuf-snapshot, signet-tuf-timestamp"), "{said}");
    // Only public halves reach the disk; the config names the token and holds no PIN.
    for f in KEY_FILES {
        assert!(!data.join(f).exists(), "{f} was written: the key is on the token");
    }
    let config = std::fs::read_to_string(data.join("signet.toml")).unwrap();
    assert!(config.contains("tsa = \"pkcs11:token=signet;object=signet-tsa\""), "{config}");
    assert!(!config.contains(PIN), "the PIN was written to the config");

    // A second data dir on the same token uses the keys already there.
    let again = top.path().join("again");
    assert!(init(&hsm, &again, port).status.success());
    for name in ["rekor-v1", "rekor-v2", "ct"] {
        let public = format!("keys/{name}.pub.pem");
        assert_eq!(spki_of(&data.join(&public)), spki_of(&again.join(&public)), "{name}: a second init made another key");
    }

    // With the audit log on, its anchors' key is the token's too.
    let config = config.replace("[guard.audit]\n# enabled = true", "[guard.audit]\nenabled = true");
    std::fs::write(data.join("signet.toml"), &config).unwrap();
    let server = serve(&hsm, &data, port);
    let agent = agent();
    // Only public halves, still: serving made no key file (the TUF snapshot and timestamp keys,
    // Ed25519, and the audit key are the token's).
    for f in KEY_FILES {
        assert!(!data.join(f).exists(), "serve wrote {f}: the key is on the token");
    }
    // The TUF timestamp, signed on the token, verifies under the key root.json names for it.
    let root = get(&agent, &format!("{}/tuf/1.root.json", server.url)).unwrap().json();
    let tuf_timestamp = get(&agent, &format!("{}/tuf/timestamp.json", server.url)).unwrap().json();
    let key_id = root["signed"]["roles"]["timestamp"]["keyids"][0].as_str().unwrap();
    let public = hex::decode(root["signed"]["keys"][key_id]["keyval"]["public"].as_str().unwrap()).unwrap();
    let sig = tuf_timestamp["signatures"].as_array().unwrap().iter().find(|s| s["keyid"] == key_id).expect("signed by the timestamp key");
    let signed = signet_core::jcs::to_vec(&tuf_timestamp["signed"]);
    aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ED25519, &public)
        .verify(&signed, &hex::decode(sig["sig"].as_str().unwrap()).unwrap())
        .expect("the timestamp's signature verifies with the root's timestamp key");
    // Every log's checkpoint verifies with the token's public key, and the APIs serve that key.
    let v1 = get(&agent, &format!("{}/api/v1/log", server.url)).unwrap().json();
    let note = v1["signedTreeHead"].as_str().unwrap();
    signet_log::checkpoint::verify(note, "127.0.0.1", &spki_of(&data.join("keys/rekor-v1.pub.pem"))).expect("the v1 checkpoint verifies with the token's key");
    let served = get(&agent, &format!("{}/api/v1/log/publicKey", server.url)).unwrap().text();
    assert_eq!(signet_core::pem::decode_first(served.as_bytes()).unwrap().der, spki_of(&data.join("keys/rekor-v1.pub.pem")));
    let v2 = get(&agent, &format!("{}/api/v2/checkpoint", server.url)).unwrap().text();
    signet_log::checkpoint::verify(&v2, "127.0.0.1", &spki_of(&data.join("keys/rekor-v2.pub.pem"))).expect("the v2 checkpoint verifies with the token's key");

    // An append is signed on the token: its SET and the checkpoint it comes with.
    let signer = Signer::new();
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"appended on a token")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let r = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"appended on a token")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let cp = r.json()["inclusionProof"]["checkpoint"]["envelope"].as_str().unwrap().to_string();
    signet_log::checkpoint::verify(&cp, "127.0.0.1", &spki_of(&data.join("keys/rekor-v2.pub.pem"))).expect("the batch's checkpoint verifies");

    // The TSA's certificate certifies the token's key, and its stamps verify (openssl).
    let r = timestamp(&agent, &server.url);
    assert_eq!(r.status, 200, "{}", r.text());
    let dir = top.path();
    std::fs::write(dir.join("resp.tsr"), &r.body).unwrap();
    std::fs::write(dir.join("artifact"), b"stamped on a token").unwrap();
    let chain = get(&agent, &format!("{}/api/v1/timestamp/certchain", server.url)).unwrap().text();
    let blocks = signet_core::pem::decode_all(chain.as_bytes()).unwrap();
    std::fs::write(dir.join("root.pem"), signet_core::pem::encode("CERTIFICATE", &blocks[1].der)).unwrap();
    let out = Command::new("openssl")
        .args(["ts", "-verify", "-data"])
        .arg(dir.join("artifact"))
        .arg("-in")
        .arg(dir.join("resp.tsr"))
        .arg("-CAfile")
        .arg(dir.join("root.pem"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_token_that_goes_away_is_a_503_and_the_instance_recovers_when_it_is_back() {
    let (hsm, _top, data, port) = initialised();
    let server = serve(&hsm, &data, port);
    let agent = agent();
    let signer = Signer::new();
    assert_eq!(timestamp(&agent, &server.url).status, 200);
    let size = |agent: &ureq::Agent| get(agent, &format!("{}/api/v1/log", server.url)).unwrap().json()["treeSize"].as_u64().unwrap();
    let before = size(&agent);

    let away = hsm.unplug();
    let r = timestamp(&agent, &server.url);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.text().contains("pkcs11:token=signet;object=signet-tsa") && !r.text().contains(PIN), "{}", r.text());
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"while the token is away")).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("cannot sign now"), "{}", r.text());
    // Nothing half-written: the log did not grow, and reads go on.
    assert_eq!(size(&agent), before);

    drop(away);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"while the token is away")).unwrap();
        if r.status == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "appends did not resume after the token came back: {} {}", r.status, r.text());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(timestamp(&agent, &server.url).status, 200);
    assert_eq!(size(&agent), before + 1);
}

#[test]
fn a_wrong_pin_a_missing_object_or_module_stop_the_start_and_say_which() {
    let hsm = SoftHsm::new();
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("data");
    let port = crate::haproxy::free_port();

    // init with a wrong PIN writes nothing.
    let mut wrong = hsm.signet(&["init", "--data-dir", data.to_str().unwrap(), "--public-url", "http://127.0.0.1:1", "--keys", "pkcs11:token=signet"]);
    let out = wrong.env("SIGNET_KEYS_PKCS11_PIN", "999999").output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("the PIN is wrong") && !said.contains("999999"), "{said}");
    assert!(!data.join("signet.toml").exists(), "init wrote a config after failing");
    assert!(init(&hsm, &data, port).status.success());

    let start = |extra: &[(&str, &str)]| {
        let mut c = hsm.signet(&["serve", "--config"]);
        c.arg(data.join("signet.toml")).args(["--listen", &format!("127.0.0.1:{port}"), "--plain-http"]);
        for (k, v) in extra {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert!(!out.status.success(), "started with {extra:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let said = start(&[("SIGNET_KEYS_PKCS11_PIN", "111111")]);
    assert!(said.contains("the PIN is wrong") && !said.contains("111111"), "{said}");
    let said = start(&[("SIGNET_KEYS_TSA", "pkcs11:token=signet;object=no-such-key")]);
    assert!(said.contains("object=no-such-key") && said.contains("holds no public key with this label"), "{said}");
    let said = start(&[("SIGNET_KEYS_CT", "pkcs11:token=elsewhere;object=signet-ct")]);
    assert!(said.contains("no token matches") && said.contains("\"signet\""), "{said}");
    let said = start(&[("SIGNET_KEYS_PKCS11_MODULE", "/nonexistent/libpkcs11.so")]);
    assert!(said.contains("cannot load the PKCS#11 module /nonexistent/libpkcs11.so"), "{said}");
    let said = start(&[("SIGNET_KEYS_REKOR_V1", "pkcs11:token=signet;objekt=x")]);
    assert!(said.contains("SIGNET_KEYS_REKOR_V1") && said.contains("unknown attribute \"objekt\""), "{said}");

    // doctor checks the TSA certificate against the key on the token, and names what fails.
    let config = data.join("signet.toml");
    let doctor = |pin: &str| {
        let out = hsm.signet(&["doctor", "--offline", "--config"]).arg(&config).env("SIGNET_KEYS_PKCS11_PIN", pin).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (_, text) = doctor(PIN);
    let tsa = text.lines().find(|l| l.contains("tsa.pem")).unwrap_or_else(|| panic!("no TSA line:\n{text}"));
    assert!(tsa.starts_with("ok    ") && tsa.contains("matches its key"), "{text}");
    assert!(!text.contains("is not a readable PKCS#8 key"), "a public key file was taken for a broken private key:\n{text}");
    let (code, text) = doctor("000000");
    assert_eq!(code, Some(1), "{text}");
    let tsa = text.lines().find(|l| l.contains("the key pkcs11:token=signet;object=signet-tsa")).unwrap_or_else(|| panic!("no TSA line:\n{text}"));
    assert!(tsa.starts_with("FAIL  ") && tsa.contains("the PIN is wrong") && !text.contains("000000"), "{text}");
}

#[test]
fn a_restore_rotates_the_logs_whose_keys_are_on_the_token() {
    // A restored log may be behind what it acknowledged: `signet restore` moves every log to a
    // new shard, and a key on a token (no private key file here) must not hide a log from it.
    let (hsm, _top, data, port) = initialised();
    let (agent, signer) = (agent(), Signer::new());
    let server = serve(&hsm, &data, port);
    assert_eq!(post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"before the restore")).unwrap().status, 201);
    drop(server);

    let restored = hsm.signet(&["restore", "--force", "--data-dir"]).arg(&data).arg("--config").arg(data.join("signet.toml")).output().unwrap();
    assert!(restored.status.success(), "{}", String::from_utf8_lossy(&restored.stderr));
    let said = String::from_utf8_lossy(&restored.stdout);
    for log in ["rekor-v1", "rekor-v2", "ct"] {
        assert!(said.contains(&format!("\"log\":\"{log}\"")), "{log} was not rotated: {said}");
        // Each new shard's key is made on the token beside the first, never as a file.
        assert!(said.contains(&format!("\"key\":\"pkcs11:token=signet;object=signet-{log}-shard-1\"")), "{log}: {said}");
        assert!(!data.join(format!("keys/{log}.shard-1.pem")).exists(), "{log}: a shard key was written to the data dir");
    }
    let server = serve(&hsm, &data, port);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"after the restore")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let token_key = hex::encode(signet_core::hash::sha256(&spki_of(&data.join("keys/rekor-v1.pub.pem"))));
    let e = r.json().as_object().unwrap().values().next().unwrap().clone();
    assert_ne!(e["logID"].as_str().unwrap(), token_key, "the restored log went on under the old shard's key");
}

/// Runs openssl; its output when it fails.
fn openssl(args: &[&str], files: &[&Path]) -> Result<String, String> {
    let out = Command::new("openssl").args(args).args(files).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() { Ok(text) } else { Err(text) }
}

/// Two tokens, and a data dir initialised with its online keys on `signet` and its roots on
/// `offline-root`; init's output.
fn initialised_with_an_offline_root() -> (SoftHsm, tempfile::TempDir, PathBuf, u16, std::process::Output) {
    let hsm = SoftHsm::new();
    hsm.add_token("offline-root");
    let top = tempfile::tempdir().unwrap();
    let data = top.path().join("data");
    let port = crate::haproxy::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let args = ["init", "--data-dir", data.to_str().unwrap(), "--public-url", &url, "--keys", "pkcs11:token=signet", "--root-key", "pkcs11:token=offline-root"];
    let made = hsm.signet(&args).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    (hsm, top, data, port, made)
}

#[test]
fn the_ca_signs_on_tokens_and_its_root_stays_out_of_the_config() {
    let (hsm, top, data, port, made) = initialised_with_an_offline_root();
    let url = format!("http://127.0.0.1:{port}");
    let d = data.to_str().unwrap();
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(said.contains("root CA key: pkcs11:token=offline-root;object=signet-ca-root (keep it offline)"), "{said}");
    assert!(said.contains("TUF root key: pkcs11:token=offline-root;object=signet-tuf-root (keep it offline)"), "{said}");
    for f in ["keys/tuf-root.pem", "keys/tuf-targets.pem", "keys/tuf-snapshot.pem", "keys/tuf-timestamp.pem"] {
        assert!(!data.join(f).exists(), "{f} was written: the TUF keys are on the tokens");
    }
    for f in ["keys/ca-root.pem", "keys/ca-intermediate.pem"] {
        assert!(!data.join(f).exists(), "{f} was written: the key is on a token");
    }
    let config = std::fs::read_to_string(data.join("signet.toml")).unwrap();
    assert!(config.contains("ca_intermediate = \"pkcs11:token=signet;object=signet-ca-intermediate\""), "{config}");
    assert!(!config.contains("offline-root"), "the config names the root's token, so it would be needed online:\n{config}");
    // The root on one token signed the intermediate on the other, and the TSA certificate.
    let (root, inter, tsa) = (data.join("ca/root.pem"), data.join("ca/intermediate.pem"), data.join("ca/tsa.pem"));
    let text = openssl(&["x509", "-noout", "-text", "-in"], &[&root]).unwrap();
    assert!(text.contains("NIST CURVE: P-384") || text.contains("secp384r1"), "the root is not P-384:\n{text}");
    openssl(&["verify", "-CAfile"], &[&root, &inter]).unwrap();
    openssl(&["verify", "-CAfile"], &[&root, &tsa]).unwrap();
    // --root-key-out writes a file; a root on a token stays there: not both.
    let both = hsm.signet(&["init", "--data-dir", top.path().join("both").to_str().unwrap(), "--public-url", &url, "--root-key", "pkcs11:token=offline-root", "--root-key-out"]).arg(top.path().join("root.pem")).output().unwrap();
    assert_eq!(both.status.code(), Some(2), "{}", String::from_utf8_lossy(&both.stderr));

    // The offline root's token is not needed to serve: take it away, as it would be.
    std::fs::rename(hsm.dir.path().join("tokens"), hsm.dir.path().join("all")).unwrap();
    std::fs::create_dir(hsm.dir.path().join("tokens")).unwrap();
    for entry in std::fs::read_dir(hsm.dir.path().join("all")).unwrap() {
        let entry = entry.unwrap();
        let token_info = std::fs::read(entry.path().join("token.object")).unwrap_or_default();
        if !token_info.windows(12).any(|w| w == b"offline-root") {
            std::fs::rename(entry.path(), hsm.dir.path().join("tokens").join(entry.file_name())).unwrap();
        }
    }
    // --dev for its OIDC issuer; the keys are the config's.
    let mut command = hsm.signet(&["serve", "--dev", "--config"]);
    command.arg(data.join("signet.toml")).args(["--listen", &format!("127.0.0.1:{port}"), "--plain-http"]);
    let server = Server::spawn(command, &data);
    assert!(!data.join("keys/ca-root.pem").exists() && !data.join("keys/ca-intermediate.pem").exists(), "serve --dev made a CA key file");
    // The TUF repository init made on the tokens is the one served; serving made no TUF key.
    let root_json = get(&agent(), &format!("{}/tuf/1.root.json", server.url)).unwrap().text();
    assert_eq!(root_json.as_bytes(), std::fs::read(data.join("tuf/1.root.json")).unwrap().as_slice());
    assert!(!data.join("keys/tuf-root.pem").exists() && !data.join("keys/tuf-timestamp.pem").exists(), "serve made a TUF key file");
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["dev-token", "--data-dir", d, "--subject", "ca@example.com"]).output().unwrap();
    let oidc = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let agent = agent();
    let issue = || post_raw(&agent, &format!("{}/api/v2/signingCert", server.url), "application/json", cert_request(&oidc, "ca@example.com")).unwrap();
    let r = issue();
    assert_eq!(r.status, 200, "{}", r.text());
    let chain: Vec<String> = r.json()["signedCertificateEmbeddedSct"]["chain"]["certificates"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    let leaf = top.path().join("leaf.pem");
    std::fs::write(&leaf, &chain[0]).unwrap();
    openssl(&["verify", "-purpose", "any", "-CAfile"], &[&root, Path::new("-untrusted"), &inter, &leaf]).unwrap();

    // The token with the intermediate goes away: no certificate, a 503 that names the key.
    let away = hsm.unplug();
    let r = issue();
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.text().contains("pkcs11:token=signet;object=signet-ca-intermediate") && !r.text().contains(PIN), "{}", r.text());
    drop(away);
    let deadline = Instant::now() + Duration::from_secs(15);
    while issue().status != 200 {
        assert!(Instant::now() < deadline, "certificates did not resume after the token came back");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_rotation_makes_the_new_tsa_key_on_the_token_certified_by_the_root_on_another() {
    let (hsm, top, data, port, _) = initialised_with_an_offline_root();
    let d = data.to_str().unwrap();
    let old_cert = std::fs::read(data.join("ca/tsa.pem")).unwrap();

    // A root key that is not the root's is refused, and nothing changes.
    let wrong = hsm.signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--root-key", "pkcs11:token=signet;object=signet-tsa", "--new-key", "pkcs11:token=signet;object=signet-tsa-2"]).output().unwrap();
    assert!(!wrong.status.success(), "rotated with the TSA's own key as the root");
    assert_eq!(std::fs::read(data.join("ca/tsa.pem")).unwrap(), old_cert);
    let rotated = hsm
        .signet(&["trust", "rotate", "--tsa", "--data-dir", d, "--root-key", "pkcs11:token=offline-root;object=signet-ca-root", "--new-key", "pkcs11:token=signet;object=signet-tsa-2"])
        .output()
        .unwrap();
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    let told = String::from_utf8_lossy(&rotated.stderr);
    assert!(told.contains("set [keys] tsa = \"pkcs11:token=signet;object=signet-tsa-2\""), "{told}");
    assert!(!data.join("keys/tsa.pem").exists(), "the new key was written to the data dir");
    openssl(&["verify", "-CAfile"], &[&data.join("ca/root.pem"), &data.join("ca/tsa.pem")]).unwrap();

    // Started as told, the instance stamps with the new key, and the old certificate's
    // window is in the trusted root.
    let config = std::fs::read_to_string(data.join("signet.toml")).unwrap();
    let config = config.replace("object=signet-tsa\"", "object=signet-tsa-2\"");
    std::fs::write(data.join("signet.toml"), config).unwrap();
    let server = serve(&hsm, &data, port);
    let agent = agent();
    let r = timestamp(&agent, &server.url);
    assert_eq!(r.status, 200, "{}", r.text());
    std::fs::write(top.path().join("resp.tsr"), &r.body).unwrap();
    std::fs::write(top.path().join("artifact"), b"stamped on a token").unwrap();
    openssl(&["ts", "-verify", "-data"], &[&top.path().join("artifact"), Path::new("-in"), &top.path().join("resp.tsr"), Path::new("-CAfile"), &data.join("ca/root.pem")]).unwrap();
    let out = hsm.signet(&["trust", "export", "--data-dir", d, "--out"]).arg(top.path().join("trust")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trusted: serde_json::Value = serde_json::from_slice(&std::fs::read(top.path().join("trust/trusted_root.json")).unwrap()).unwrap();
    assert_eq!(trusted["timestampAuthorities"].as_array().unwrap().len(), 2, "the old TSA and the new: {trusted}");
}

/// A TSA rotation onto a new object of the token, scheduled on the running instance: the
/// token is away when the second comes, so nothing is stamped (503, Retry-After) rather than
/// stamped by a key whose window has ended; back, the new key signs. A restart with the
/// config still naming the old object uses the one the rotation recorded.
#[test]
fn a_scheduled_rotation_onto_the_token_waits_for_the_token_and_never_signs_past_the_old_window() {
    let (hsm, top, data, port, _) = initialised_with_an_offline_root();
    let d = data.to_str().unwrap();
    let mut server = serve(&hsm, &data, port);
    let agent = agent();
    let old_cert = std::fs::read(data.join("ca/tsa.pem")).unwrap();
    let scheduled = hsm
        .signet(&[
            "trust", "rotate", "--tsa", "--data-dir", d, "--root-key", "pkcs11:token=offline-root;object=signet-ca-root",
            "--new-key", "pkcs11:token=signet;object=signet-tsa-next", "--at", "+12s", "--wait", "10",
        ])
        .output()
        .unwrap();
    assert!(scheduled.status.success(), "{}", String::from_utf8_lossy(&scheduled.stderr));
    let report: serde_json::Value = serde_json::from_slice(&scheduled.stdout).unwrap();
    assert_eq!(report["new_key"], "pkcs11:token=signet;object=signet-tsa-next");
    assert!(!data.join("keys/tsa.next.pem").exists(), "a token's key was written to the data dir");
    let from = report["new_from"].as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_second();
    let new_cert = std::fs::read(data.join("ca/next/tsa.pem")).unwrap();
    assert_eq!(timestamp(&agent, &server.url).status, 200);

    // The token goes away before the hand-over and comes back after it.
    let away = hsm.unplug();
    while jiff::Timestamp::now().as_second() < from + 1 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let r = timestamp(&agent, &server.url);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("1"));
    drop(away);
    let deadline = Instant::now() + Duration::from_secs(15);
    let r = loop {
        let r = timestamp(&agent, &server.url);
        if r.status == 200 {
            break r;
        }
        assert!(Instant::now() < deadline, "stamps did not resume after the token came back: {}", r.text());
        std::thread::sleep(Duration::from_millis(300));
    };
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().body;
    let root = signet_verify::trust_root::TrustedRoot::from_json(&root).unwrap();
    let verified = signet_verify::timestamp::verify(&root, &r.body, b"stamped on a token").unwrap();
    let new_der = signet_core::pem::decode_first(&new_cert).unwrap().der;
    assert_eq!(verified.tsa.chain[0].der, new_der, "stamped by the new key");
    assert!(verified.time >= from);

    // Promoted; the config still names the old object, and the recorded key wins.
    let deadline = Instant::now() + Duration::from_secs(5);
    while data.join("ca/next/tsa.pem").exists() {
        assert!(Instant::now() < deadline, "not promoted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_ne!(std::fs::read(data.join("ca/tsa.pem")).unwrap(), old_cert);
    server.kill();
    let server = serve(&hsm, &data, port);
    let r = timestamp(&agent, &server.url);
    assert_eq!(r.status, 200, "{}", r.text());
    let verified = signet_verify::timestamp::verify(&root, &r.body, b"stamped on a token").unwrap();
    assert_eq!(verified.tsa.chain[0].der, new_der, "the restarted instance stamps with the rotated key");
    drop(top);
}

/// Issue 43: the TUF root and targets moved to 3 of 5 keys, each on a token of its own, in an
/// offline ceremony (propose, one signature per holder, publish), then the root signed again
/// without a key change; the running server adopts each once its thresholds are met.
#[test]
fn a_ceremony_moves_tuf_root_and_targets_to_three_of_five_tokens() {
    let (hsm, top, data, port, _) = initialised_with_an_offline_root();
    let holders: Vec<String> = (1..=5).map(|i| format!("holder{i}")).collect();
    for h in &holders {
        hsm.add_token(h);
    }
    let server = serve(&hsm, &data, port);
    let agent = agent();
    let dir = top.path();
    let d = data.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = hsm.signet(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr))
    };

    // Each holder makes a root key and a targets key on their token and hands over the public halves.
    let (mut root_pubs, mut targets_pubs) = (Vec::new(), Vec::new());
    for h in &holders {
        for (role, pubs) in [("root", &mut root_pubs), ("targets", &mut targets_pubs)] {
            let out = hsm.signet(&["tuf", "pubkey", "--make", "--key", &format!("pkcs11:token={h};object=tuf-{role}")]).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let path = dir.join(format!("{h}-{role}.pub"));
            std::fs::write(&path, &out.stdout).unwrap();
            pubs.push(path.to_str().unwrap().to_string());
        }
    }
    // Made once: a second --make finds the same key.
    let again = hsm.signet(&["tuf", "pubkey", "--make", "--key", "pkcs11:token=holder1;object=tuf-root"]).output().unwrap();
    assert_eq!(again.stdout, std::fs::read(&root_pubs[0]).unwrap());

    let ceremony = dir.join("ceremony");
    let c = ceremony.to_str().unwrap();
    let tuf = data.join("tuf");
    let mut args = vec!["tuf", "propose", "root", "--repo", tuf.to_str().unwrap(), "--out", c, "--root-threshold", "3", "--targets-threshold", "3"];
    for (r, t) in root_pubs.iter().zip(&targets_pubs) {
        args.extend(["--root-key", r, "--targets-key", t]);
    }
    let (code, said) = run(&args);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("to be signed by 3 of its 5 root keys and 1 of the current root's 1"), "{said}");
    let trust = dir.join("trust");
    assert_eq!(run(&["trust", "export", "--data-dir", d, "--out", trust.to_str().unwrap()]).0, Some(0));
    let (code, said) = run(&["tuf", "propose", "targets", "--repo", tuf.to_str().unwrap(), "--out", c, "--trust", trust.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    let (root_file, targets_file) = (ceremony.join("2.root.json"), ceremony.join("2.targets.json"));
    let (root_file, targets_file) = (root_file.to_str().unwrap(), targets_file.to_str().unwrap());

    // The current root's key (on the offline-root token) and two holders sign the root:
    // short of the new threshold, and publish says by how much.
    let (code, said) = run(&["tuf", "sign", "--key", "pkcs11:token=offline-root;object=signet-tuf-root", root_file]);
    assert_eq!(code, Some(0), "{said}");
    for h in &holders[..2] {
        assert_eq!(run(&["tuf", "sign", "--key", &format!("pkcs11:token={h};object=tuf-root"), root_file]).0, Some(0));
    }
    for h in &holders[1..4] {
        assert_eq!(run(&["tuf", "sign", "--key", &format!("pkcs11:token={h};object=tuf-targets"), targets_file]).0, Some(0));
    }
    let (code, said) = run(&["tuf", "publish", "--data-dir", d, "--check", root_file, targets_file]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("2 valid signatures of the 3 needed from the 5 root keys"), "{said}");
    assert!(!data.join("tuf/staged").exists(), "nothing is staged when a threshold is short");

    // A third holder signs; the running server publishes both.
    assert_eq!(run(&["tuf", "sign", "--key", "pkcs11:token=holder5;object=tuf-root", root_file]).0, Some(0));
    let (code, said) = run(&["tuf", "publish", "--data-dir", d, "--wait", "30", root_file, targets_file]);
    assert_eq!(code, Some(0), "{said}");
    let first = get(&agent, &format!("{}/tuf/1.root.json", server.url)).unwrap().json();
    let second = get(&agent, &format!("{}/tuf/2.root.json", server.url)).unwrap().json();
    for role in ["root", "targets"] {
        assert_eq!(second["signed"]["roles"][role]["threshold"], 3, "{role}");
        assert_eq!(second["signed"]["roles"][role]["keyids"].as_array().unwrap().len(), 5, "{role}");
    }
    // Checked as a client does: the new root under the old and under itself, the targets under it.
    let old_root: tough::schema::Signed<tough::schema::Root> = serde_json::from_value(first).unwrap();
    let new_root: tough::schema::Signed<tough::schema::Root> = serde_json::from_value(second).unwrap();
    old_root.signed.verify_role(&new_root).expect("the new root verifies under the old one");
    new_root.signed.verify_role(&new_root).expect("the new root verifies under itself");
    let timestamp = get(&agent, &format!("{}/tuf/timestamp.json", server.url)).unwrap().json();
    let snapshot_v = timestamp["signed"]["meta"]["snapshot.json"]["version"].as_u64().unwrap();
    let snapshot = get(&agent, &format!("{}/tuf/{snapshot_v}.snapshot.json", server.url)).unwrap().json();
    assert_eq!(snapshot["signed"]["meta"]["targets.json"]["version"], 2);
    let targets: tough::schema::Signed<tough::schema::Targets> = serde_json::from_value(get(&agent, &format!("{}/tuf/2.targets.json", server.url)).unwrap().json()).unwrap();
    new_root.signed.verify_role(&targets).expect("the targets verify under the new root's 3 of 5");
    let (_, status) = run(&["tuf", "status", "--data-dir", d]);
    assert!(status.contains("keys 3 of 5"), "{status}");

    // The root signed again before it expires, no key changed: three of the five holders.
    let (code, said) = run(&["tuf", "propose", "root", "--repo", tuf.to_str().unwrap(), "--out", c]);
    assert_eq!(code, Some(0), "{said}");
    let third = ceremony.join("3.root.json");
    for h in ["holder1", "holder3", "holder4"] {
        assert_eq!(run(&["tuf", "sign", "--key", &format!("pkcs11:token={h};object=tuf-root"), third.to_str().unwrap()]).0, Some(0));
    }
    let (code, said) = run(&["tuf", "publish", "--data-dir", d, "--wait", "30", third.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{said}");
    let third: tough::schema::Signed<tough::schema::Root> = serde_json::from_value(get(&agent, &format!("{}/tuf/3.root.json", server.url)).unwrap().json()).unwrap();
    new_root.signed.verify_role(&third).expect("root 3 verifies under root 2");
    assert!(third.signed.expires > new_root.signed.expires);
    assert_eq!(third.signed.keys, new_root.signed.keys);
}

/// Issue 43: an online rotation of each log whose key is on a token makes the new key on the
/// token too (object `<first>-shard-<n>`), never a file; the new log signs with it, and a
/// restart finds it there.
#[test]
fn an_online_log_rotation_makes_the_new_key_on_the_token_beside_the_first() {
    let (hsm, _top, data, port) = initialised();
    let start = |hsm: &SoftHsm| {
        let mut command = hsm.signet(&["serve", "--dev", "--config"]);
        command.arg(data.join("signet.toml")).args(["--listen", &format!("127.0.0.1:{port}"), "--plain-http"]);
        Server::spawn(command, &data)
    };
    let server = start(&hsm);
    let (agent, signer) = (agent(), Signer::new());
    let token = crate::shards::admin_token(&["--data-dir".as_ref(), data.as_os_str()]);
    let mut log_ids = std::collections::HashMap::new();
    for log in ["ct", "rekor-v2", "rekor-v1"] {
        let report = crate::log_key_rotation::rotate_online(&server.url, &token, log);
        assert_eq!(report["key"], format!("pkcs11:token=signet;object=signet-{log}-shard-1"), "{report}");
        assert!(!data.join(format!("keys/{log}.shard-1.pem")).exists(), "{log}: a shard key was written to the data dir");
        log_ids.insert(log, signet_core::b64::decode(report["active"]["logID"].as_str().unwrap()).unwrap());
    }
    // The trusted root lists each new key; the new logs sign with them.
    let root = get(&agent, &format!("{}/trust/trusted_root.json", server.url)).unwrap().json();
    let key_with = |field: &str, id: &[u8]| -> Vec<u8> {
        root[field]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| signet_core::b64::decode(l["publicKey"]["rawBytes"].as_str().unwrap()).unwrap())
            .find(|spki| signet_core::hash::sha256(spki).as_slice() == id)
            .expect("the new key is in the trusted root")
    };
    let v2_key = key_with("tlogs", &log_ids["rekor-v2"]);
    let r = post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"after a rotation on a token")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let cp = r.json()["inclusionProof"]["checkpoint"]["envelope"].as_str().unwrap().to_string();
    signet_log::checkpoint::verify(&cp, "127.0.0.1", &v2_key).expect("the new v2 log's checkpoint verifies under the token's new key");
    key_with("ctlogs", &log_ids["ct"]);
    drop(server);

    // A restart opens every shard's key on the token.
    let server = start(&hsm);
    let r = post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"after a restart")).unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let e = r.json().as_object().unwrap().values().next().unwrap().clone();
    assert_eq!(e["logID"].as_str().unwrap(), hex::encode(&log_ids["rekor-v1"]), "the v1 append is signed by the new shard's key");
}
